"""Measure: real PyTorch benchmarks on the device at hand (docs/measure.md).

Imports nothing heavy here: `llmbench.measure.cli` must load without torch.
"""
