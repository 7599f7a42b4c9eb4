"""Weight-streaming training (the Cerebras MemoryX/SwarmX execution on torch): docs/stream.md.

Modules: `store` (ParameterStore), `executor` (StreamingExecutor), `comm` (SwarmComm, data
parallel), `sparse` (sparse streaming), `run` (the train/compare loops), `cli` (commands).
Nothing here is imported by `llmbench.cli` at start-up but `cli`, which imports no torch.
"""
