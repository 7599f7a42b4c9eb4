"""StreamOptions / StreamRun / PipelineConfig / Tier (llmbench/streaming/config.py): torch-free, the store parsed
once, defaults declared once, bad values as one BadInput line."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from llmbench.errors import BadInput
from llmbench.streaming.config import PipelineConfig, StreamOptions, Tier, defaults


def test_config_imports_no_torch():
    code = ("import sys, llmbench.streaming.config as c, llmbench.streaming.storedir, "
            "llmbench.streaming.precision; c.StreamOptions(store='disk:/tmp/x'); c.workload_and_options(batch=2); "
            "print('torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_tier_is_parsed_once_with_home_expanded():
    cfg = StreamOptions(store="disk:~/st")
    assert cfg.store == Tier(kind="disk", path=Path(os.path.expanduser("~/st")))
    assert str(cfg.store) == f"disk:{Path.home() / 'st'}"
    assert StreamOptions(store=cfg.store).store is cfg.store  # a Tier passes through
    rel = StreamOptions(store="disk:rel/dir").store.path
    assert rel.is_absolute() and rel == Path.cwd() / "rel" / "dir"
    assert StreamOptions().store == Tier(kind="ram") and str(Tier()) == "ram"


@pytest.mark.parametrize("bad", ["nvme", "disk:", "disk:  ", "", "RAM", 3])
def test_bad_tier_is_bad_input(bad):
    with pytest.raises(BadInput, match="--store"):
        StreamOptions(store=bad)


def test_defaults_are_the_dataclass_fields_and_the_cli_reads_them():
    """The stream commands' options come from the fields' metadata (_cliutil.add_fields), as every
    other command's: a Workload (global batch, resize, recompute) and StreamOptions."""
    from llmbench._cliutil import Parser
    from llmbench.streaming import cli

    d = defaults(StreamOptions)
    assert d["device_memory_budget_bytes"] is None and d["prefetch"] == 1
    assert defaults(PipelineConfig)["micro_batches"] is None
    root = Parser(prog="llmbench")
    from llmbench._cliutil import Group
    cli.register(Group(root))
    a = root.parse_args(["stream", "train", "--batch", "3", "--layers", "2", "--recompute", "full",
                         "--device-memory-budget", "5000"])
    w = cli.workload_of(a, "train")
    assert (w.batch, w.resize["n_layers"], w.layout.recompute, w.model) == (3, 2, "full", "gpt2-small")
    assert StreamOptions(**{k: getattr(a, k) for k in cli.OPTIONS["train"]}) == \
        StreamOptions(device="cpu", device_memory_budget_bytes=5000)
    c = root.parse_args(["stream", "compare"])
    assert (c.steps, c.warmup_steps) == (20, 2)  # >= 20 timed step pairs by default
    with pytest.raises(BadInput, match="prefetch"):
        root.parse_args(["stream", "train", "--prefetch", "-1"])


@pytest.mark.parametrize("kw, match", [
    (dict(batch=0), "--batch"), (dict(prompt_len=-1), "--prompt-len"), (dict(gen_len=0), "--gen-len"),
    (dict(batch=6, micro_batches=4), "equal parts"), (dict(precision="int8"), "--precision"),
    (dict(stage_memory_budget_bytes=0), "--stage-memory-budget"), (dict(warmup_runs=-1), "--warmup-runs"),
    (dict(balance="flops"), "--balance"),
])
def test_pipeline_config_rules(kw, match):
    with pytest.raises(BadInput, match=match):
        PipelineConfig(**kw)
