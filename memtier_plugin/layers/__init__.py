"""layers/ (docstring written with the room)."""
