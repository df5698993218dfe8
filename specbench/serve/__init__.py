"""Serving vLLM: start and stop servers (server, procs), the flags the installed vLLM takes (flags), its
launcher (vllm_main), the plugin that runs inside it (plugin/) and what a server attests it ran (attest)."""
