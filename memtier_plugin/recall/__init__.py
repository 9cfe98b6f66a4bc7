"""recall/ (docstring written with the room)."""
