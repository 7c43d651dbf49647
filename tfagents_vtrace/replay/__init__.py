"""replay layer (see DESIGN.md)."""
