"""Test and benchmark support: the committed runs of a checkout as populations of real requests,
simulated sides and runs, same-config rerun pairs, and the heads fixture's servers.

Not used by any command. tests/ and benchmarks/ import it as an installed package (``./setup.sh``
installs specbench editable), so neither puts a folder on ``sys.path``. What reads committed runs
reads them under ``CHECKOUT``: it works from a checkout, not from a wheel.
"""

from __future__ import annotations

from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
BASELINES = CHECKOUT / "results" / "baselines"
