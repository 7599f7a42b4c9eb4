"""StreamConfig / PipelineConfig / Tier (llmbench/streaming/config.py): torch-free, the store parsed
once, defaults declared once, bad values as one BadInput line."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from llmbench.errors import BadInput
from llmbench.streaming.config import PipelineConfig, StreamConfig, Tier, defaults


def test_config_imports_no_torch():
    code = ("import sys, llmbench.streaming.config as c, llmbench.streaming.storedir, "
            "llmbench.streaming.precision; c.StreamConfig(store='disk:/tmp/x'); "
            "print('torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_tier_is_parsed_once_with_home_expanded():
    cfg = StreamConfig(store="disk:~/st")
    assert cfg.store == Tier(kind="disk", path=Path(os.path.expanduser("~/st")))
    assert str(cfg.store) == f"disk:{Path.home() / 'st'}"
    assert StreamConfig(store=cfg.store).store is cfg.store  # a Tier passes through
    rel = StreamConfig(store="disk:rel/dir").store.path
    assert rel.is_absolute() and rel == Path.cwd() / "rel" / "dir"
    assert StreamConfig().store == Tier(kind="ram") and str(Tier()) == "ram"


@pytest.mark.parametrize("bad", ["nvme", "disk:", "disk:  ", "", "RAM", 3])
def test_bad_tier_is_bad_input(bad):
    with pytest.raises(BadInput, match="--store"):
        StreamConfig(store=bad)


def test_defaults_are_the_dataclass_fields_and_the_cli_reads_them():
    """The CLI passes only the options given: every other field keeps the dataclass default."""
    import argparse

    from llmbench.streaming import cli

    d = defaults(StreamConfig)
    assert d["device_memory_budget_bytes"] is None and d["precision"] == "fp32"
    assert defaults(PipelineConfig)["micro_batches"] is None
    p = argparse.ArgumentParser()
    cli._options(p, StreamConfig, None)
    a = p.parse_args(["--batch", "3"])
    a._config, a._names = StreamConfig, None
    assert cli._config(a) == StreamConfig(batch=3)


@pytest.mark.parametrize("kw, match", [
    (dict(batch=0), "--batch"), (dict(prompt_len=-1), "--prompt-len"), (dict(gen_len=0), "--gen-len"),
    (dict(batch=6, micro_batches=4), "equal parts"), (dict(precision="int8"), "--precision"),
    (dict(stage_memory_budget_bytes=0), "--stage-memory-budget"), (dict(warmup_runs=-1), "--warmup-runs"),
    (dict(balance="flops"), "--balance"),
])
def test_pipeline_config_rules(kw, match):
    with pytest.raises(BadInput, match=match):
        PipelineConfig(**kw)
