"""The wafer-scale execution designs as runtimes on torch (docs/stream.md).

Weight streaming (Cerebras MemoryX/SwarmX): `config` (StreamOptions, StreamRun, Tier; no torch), `store`
(ParameterStore) and `storedir` (its locked, validated directory), `executor` (StreamingExecutor),
`precision` (mixed-precision policy, loss scaling), `comm` (SwarmComm, data parallel), `sparse`
(sparse streaming), `trainers` (streamed and resident trainers, initial weights, data), `run` (the
train/compare loops), `memory` (host memory), `cli` (commands).
SRAM-resident pipelined inference (seed 004): `pipeline` (stages under torchrun) and `pipeplan`
(the per-stage memory plan; no torch).
Nothing here is imported by `llmbench.cli` at start-up but `cli` and `config`, which import no torch.
"""
