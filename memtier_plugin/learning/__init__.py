"""learning/ (docstring written with the room)."""
