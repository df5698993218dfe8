"""Pure analysis: canonical records and counts in, acceptance statistics, CIs and DataFrames out."""
