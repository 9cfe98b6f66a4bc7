"""store/ (docstring written with the room)."""
