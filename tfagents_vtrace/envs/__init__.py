"""envs layer (see DESIGN.md)."""
