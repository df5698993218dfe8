"""Reading speculative-decoding metrics from logs, /metrics scrapes and printed summaries."""
