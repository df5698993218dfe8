"""Planning and executing a study: the matrix expanded into cells, servers grouped and started, each cell
measured, and the run directory written and read back (store, read, sweep)."""
