"""`specbench report`: a run's tables, study analyses (divergence, speed-up, k prediction) and index.html."""
