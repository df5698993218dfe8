"""Results on disk: the run directory written after every cell (store) and read back for report and
compare (read; ``vllm bench sweep`` directories and result files through sweep)."""
