"""Lightning callbacks, one per file; ``conf/callbacks/`` selects them (checkpointing, the progress bar or
epoch line, test embeddings, the per-sample loss as a noise detector)."""
