"""models/ (docstring written with the room)."""
