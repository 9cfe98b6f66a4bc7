"""bench/ (docstring written with the room)."""
