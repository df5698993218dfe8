"""The typed forms everything else builds on: the counts of speculative decoding (``counts.py``) and a
request's row (``requests.py``), low enough in the layers that parsers, statistics and the run
directory's records all use the same classes (docs/internals.md "Layers")."""
