"""The `kdissect` command line: one module per command, and what they print."""
