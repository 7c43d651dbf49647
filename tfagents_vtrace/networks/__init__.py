"""networks layer (see DESIGN.md)."""
