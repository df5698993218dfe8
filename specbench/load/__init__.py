"""Load generation: the built-in streaming driver, the llmperf adapter, prompt sets and lint."""
