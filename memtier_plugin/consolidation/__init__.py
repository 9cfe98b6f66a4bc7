"""consolidation/ (docstring written with the room)."""
