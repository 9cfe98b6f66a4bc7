"""scheduling/ (docstring written with the room)."""
