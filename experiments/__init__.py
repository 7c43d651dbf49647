"""absl-flag experiment entry points."""
