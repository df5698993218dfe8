"""The typed records everything else builds on: the counts of speculative decoding (``counts.py``), a
request's row (``requests.py``), a run directory's files (``files.py``: cell.json, acceptance.json,
manifest.json, with their parts in ``cell.py``), low enough in the layers that parsers, statistics,
the runner and the readers all use the same classes (docs/internals.md "Layers"); with the rules
both the runner and the readers apply to stored cells: a cell's attestation against its claim
(``attestation.py``) and the baseline a cell pairs with (``baseline.py``)."""
