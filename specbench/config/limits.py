"""The study's limits, each written once: what the schema refuses and what the checks name."""

MAX_CELLS = 10_000  # each cell is a vLLM server start (about a minute): 10^4 is a week of runs
MAX_REQUESTS = 10_000_000  # per cell: more is a typo, not a study
MAX_TIMEOUT_S = 7 * 24 * 3600.0
MAX_TEMPERATURE = 100.0
MAX_K = 64  # num_speculative_tokens, in serve.speculative and as an axis
MAX_REPEATS = 100
