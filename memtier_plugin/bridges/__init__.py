"""bridges/ (docstring written with the room)."""
