"""specbench: measure, analyse and gate speculative-decoding acceptance in vLLM."""

__version__ = "0.1.0"
