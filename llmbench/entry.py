"""The `llmbench` console script.

One prediction (`llmbench predict train|infer`, `llmbench project`) must answer in well under a
second, interpreter start-up included, so those commands are dispatched here to their argparse
front end without importing typer (whose start-up alone is most of that budget); everything
else goes to the typer app in `llmbench.cli`.
"""
from __future__ import annotations

import sys

FAST = {("predict", "train"): "predict_train_main", ("predict", "infer"): "predict_infer_main",
        ("project",): "project_main"}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    for prefix, name in FAST.items():
        if tuple(argv[:len(prefix)]) == prefix:
            from llmbench._cliutil import BAD_INPUT, fail_one_line
            from llmbench.perfmodel import commands

            try:
                getattr(commands, name)(argv[len(prefix):])
            except BAD_INPUT as e:
                fail_one_line(e)
            except BrokenPipeError:
                sys.stderr.close()
            return
    from llmbench.cli import main as cli_main

    cli_main(argv)
