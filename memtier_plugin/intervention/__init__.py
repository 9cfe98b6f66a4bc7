"""intervention/ (docstring written with the room)."""
