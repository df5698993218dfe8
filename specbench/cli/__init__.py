"""Command-line interface: thin modules that parse arguments, call the core, render, exit."""
