# Two commands do all set-up on a fresh machine:
#   make reproduce   # .venv + install + `llmbench reproduce`
#   make test        # .venv + install + pytest
# torch: installs TORCH_SPEC (the CPU build on this machine's disk) unless .venv can already import
# torch — a GPU user keeps their own with `python -m venv --system-site-packages .venv` first, or
# `make test TORCH_SPEC=torch==2.5.1+cu124` (see README).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0
REPRODUCE_ARGS ?= --quick

.PHONY: setup reproduce test test-fast bench clean profiles docs-outputs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# editable_mode=compat: the checkout goes on sys.path by a plain .pth line; the default mode's import
# hook costs every Python start in the venv ~15-20 ms here (pathlib, importlib.util at site time)
$(VENV)/.installed: pyproject.toml Makefile | $(BIN)/python
	@$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install -q "$(TORCH_SPEC)"
	$(BIN)/pip install -q -e ".[dev]" --config-settings editable_mode=compat
	@touch $@

setup: $(VENV)/.installed

reproduce: setup
	$(BIN)/llmbench reproduce $(REPRODUCE_ARGS)

# the shipped calibration: the pooled fit on llmbench/reference/published_v2.csv and every row's
# leave-one-source-out error (llmbench/perfmodel/profiles/); rerun after editing published_v2.csv
profiles: setup
	$(BIN)/llmbench calibrate --published --write-shipped

# after a refit or a model change: paste fresh outputs of the analytical commands into docs/*.md and
# README (tests/test_docs_outputs.py fails on a stale one), and print validate's tables for docs/predict.md
docs-outputs: setup
	$(BIN)/python scripts/docs_outputs.py --write
	$(BIN)/llmbench validate --json > .validate.json && $(BIN)/python scripts/validate_tables.py .validate.json

test: setup
	$(BIN)/python -m pytest -q -n auto --maxprocesses 4 --dist loadfile --durations=10

test-fast: setup
	$(BIN)/python -m pytest -q -n auto --maxprocesses 4 --dist loadfile -m "not slow"

clean:
	rm -rf $(VENV) *.egg-info
