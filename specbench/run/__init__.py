"""Planning and executing a study: the matrix expanded into cells, servers grouped and started, each cell
measured and handed to :mod:`specbench.results` to be written."""
