"""Plots (matplotlib, Agg backend: no display on CI machines). Importing any module here selects
the backend first."""

import matplotlib

matplotlib.use("Agg")
