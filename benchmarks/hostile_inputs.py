"""Every hostile example of issue 23, run as a user would: one subprocess each, a 10 s kill limit.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/hostile_inputs.py [--only WORD] [--no-torch] [--json]

Each example builds its input in a fresh temporary folder (its own $LLMBENCH_HOME; no
$LLMBENCH_PROFILES, $LLMBENCH_HARDWARE_PATH or $LLMBENCH_DB from the caller), runs `python -m
llmbench ...` (or one Python API call) and prints the command, wall seconds, exit code, the first
stderr line and a verdict:

    ok        refused: exit 2 and exactly one stderr line naming what it must name; or answered
              (exit 0) correctly where the issue says an answer is right (calibrate skipping rows
              with their reasons, a folder named twice in $LLMBENCH_HARDWARE_PATH read once, ...)
    SLOW      an ok answer that took more than 2 s (the issue's limit)
    HANG      killed at 10 s
    CRASH     a traceback, an "internal error" line, or an exit code other than 0 and 2
    ACCEPTED  exit 0 on an input that must be refused
    VAGUE     refused in one line that does not name the file / row / argument, or in several lines
    WRONG     exit 0 where an answer is right, but not the right answer

Exit code 1 when any example is not ok. tests/test_hostile_inputs.py runs the examples that need no
torch (`torch=False`) so CI keeps them; the one that imports torch before it answers (`measure train
--layout auto`: the planner reads the device's memory through torch) is run here only.
"""
from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
HF = ROOT / "tests" / "data" / "hf_configs"
KILL_S = 10.0
SLOW_S = 2.0
PREDICT = ("predict", "train", "--model", "gpt2-xl", "--hardware", "a100-80gb", "--batch", "8", "--seq", "1024",
           "--json")
API = """import sys, llmbench as lb
from llmbench.errors import BadInput
try:
    r = {call}
except BadInput as e:
    assert isinstance(e, ValueError)
    print("error: " + str(e), file=sys.stderr); sys.exit(2)
print(r)
"""


@dataclass(frozen=True, kw_only=True)
class Example:
    name: str
    """a short id (--only matches it)"""
    why: str
    """the bullet of issue 23's "Why" it comes from"""
    argv: tuple
    """`llmbench` arguments, or ("api", "lb.call(...)"); {tmp} is the example's folder"""
    build: Callable[[Path], dict] | None = None
    """writes the input files under the folder; returns extra environment variables"""
    refuse: bool = True
    """the input must be refused (exit 2, one line); else it must be answered (exit 0)"""
    names: tuple = ()
    """words the refusal line must hold (the file, row, argument; {tmp} expands)"""
    answer: Callable[[str, str], str | None] | None = None
    """for an answer: (stdout, stderr) -> what is wrong, or None"""
    torch: bool = False
    """needs torch (skipped by --no-torch and by the pytest)"""


# ---------------------------------------------------------------- inputs

def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def profile(text: str | None) -> Callable[[Path], dict]:
    """A calibration profile for a100-80gb in $LLMBENCH_PROFILES (None: a link to /dev/zero)."""
    def build(tmp: Path) -> dict:
        path = tmp / "profiles" / "a100-80gb.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        if text is None:
            os.symlink("/dev/zero", path)
        else:
            path.write_text(text)
        return {"LLMBENCH_PROFILES": str(tmp / "profiles")}
    return build


def overlay(text: str) -> Callable[[Path], dict]:
    """A measured overlay for a100-80gb in $LLMBENCH_HOME/hardware."""
    def build(tmp: Path) -> dict:
        _write(tmp / "home" / "hardware" / "a100-80gb.json", text)
        return {}
    return build


def hf_config(base: str, change: Callable[[dict], None]) -> Callable[[Path], dict]:
    """tests/data/hf_configs/<base>/config.json, changed, written to {tmp}/m/config.json."""
    def build(tmp: Path) -> dict:
        cfg = json.loads((HF / base / "config.json").read_text())
        change(cfg)
        _write(tmp / "m" / "config.json", json.dumps(cfg))
        return {}
    return build


def _set(**kv) -> Callable[[dict], None]:
    return lambda cfg: cfg.update(kv)


def _gemma_one_layer_type(cfg: dict) -> None:
    text = cfg.get("text_config", cfg)
    text["num_hidden_layers"] = 48
    text["layer_types"] = ["full_attention"]


def hardware_file(old: str, new: str, name: str = "my-gpu") -> Callable[[Path], dict]:
    """`hardware init --like h100-sxm` with `old` replaced by `new`, at {tmp}/hw/mine.toml."""
    def build(tmp: Path) -> dict:
        from llmbench.hardware.lookup import init_toml

        text = init_toml("h100-sxm", name="my-gpu")
        assert old in text, old
        _write(tmp / "hw" / "mine.toml", text.replace(old, new, 1).replace('"my-gpu"', json.dumps(name), 1))
        return {}
    return build


def twice_in_path(tmp: Path) -> dict:
    hardware_file("devices_per_node = 8", "devices_per_node = 8")(tmp)
    d = str(tmp / "hw")
    return {"LLMBENCH_HARDWARE_PATH": os.pathsep.join([d, d + "/"])}


def in_path(build: Callable[[Path], dict]) -> Callable[[Path], dict]:
    def both(tmp: Path) -> dict:
        return {**build(tmp), "LLMBENCH_HARDWARE_PATH": str(tmp / "hw")}
    return both


def results_db(*sql: str) -> Callable[[Path], dict]:
    """{tmp}/r.db: three measured training rows of gpt2-small on cpu, then `sql` run on it."""
    def build(tmp: Path) -> dict:
        from llmbench.point import Workload
        from llmbench.results.store import ResultsDB

        with ResultsDB(tmp / "r.db") as db:
            for b in (2, 4, 8):
                w = Workload(model="gpt2-small", hardware="cpu", batch=b, seq_len=64, precision="fp32")
                db.record(w, metrics={"tokens_per_s": 10.0 * b})
        con = sqlite3.connect(tmp / "r.db")
        for s in sql:
            con.execute(s)
        con.commit()
        con.close()
        return {}
    return build


def calibration_db(tmp: Path) -> dict:
    """tests/test_calibrate_db.py's measured layout rows (a fit that works), plus two rows that no
    longer read: a point stored as a JSON list, a Workload with batch -1."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_calibrate_db import TRUE, synthetic_db

    from llmbench.perfmodel.calibrate import _prior

    synthetic_db(tmp / "runs.db", {**_prior("cpu"), **TRUE})
    con = sqlite3.connect(tmp / "runs.db")
    con.execute("UPDATE results SET point = '[1, 2]' WHERE rowid = 1")
    con.execute("UPDATE results SET point = json_set(point, '$.batch', -1) WHERE rowid = 4")
    con.commit()
    con.close()
    return {}


def csv_rows(*rows: str) -> Callable[[Path], dict]:
    head = "id,hardware,suite,model,batch,seq_len,precision,metric,value"
    return lambda tmp: (_write(tmp / "rows.csv", "\n".join((head, *rows)) + "\n"), {})[1]


def trace_dir(tmp: Path) -> dict:
    (tmp / "trace").mkdir()
    return {}


def link_to_zero(name: str) -> Callable[[Path], dict]:
    return lambda tmp: (os.symlink("/dev/zero", tmp / name), {})[1]


# ---------------------------------------------------------------- answers

def _json(out: str):
    return json.loads(out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(f"non-standard JSON {c}")))


def answered_json(key: str) -> Callable[[str, str], str | None]:
    """stdout is strict JSON holding `key`."""
    def check(out: str, err: str) -> str | None:
        try:
            data = _json(out)
        except ValueError as e:
            return f"stdout is not strict JSON ({e})"
        return None if key in json.dumps(data) else f"no {key!r} in the answer"
    return check


def skipped_with_reasons(out: str, err: str) -> str | None:
    """calibrate --from: fitted on the good rows, the unusable ones listed with their reasons."""
    (rep,) = _json(out)
    reasons = " ".join(s["reason"] for s in rep.get("skipped", []))
    if rep.get("status") != "fitted":
        return f"status {rep.get('status')!r}"
    missing = [w for w in ("JSON list", "batch must be >= 1") if w not in reasons]
    return f"skipped rows lack the reasons {missing}" if missing else None


def skipped_one_row(out: str, err: str) -> str | None:
    """A reader of the store: the good rows, and one stderr line naming the database and the
    skipped row (a progress line beside it is fine)."""
    if len([ln for ln in err.splitlines() if "r.db: skipped 1 row(s)" in ln]) != 1:
        return f"no stderr line names the one skipped row: {err.strip()[:100]!r}"
    return None


def strict_json_skipping(out: str, err: str) -> str | None:
    try:
        _json(out)
    except ValueError as e:
        return f"stdout is not strict JSON ({e})"
    return None


def report_written(out: str, err: str) -> str | None:
    problem = skipped_one_row(out, err)
    return problem or (None if _json(out).get("skipped_rows") == 1 else "skipped_rows is not 1")


# ---------------------------------------------------------------- the examples

def _work() -> list[Example]:
    why = "work that grows with a number"
    plan8 = ("plan", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--devices", "8", "--seq", "1024")
    train8 = ("predict", "train", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--devices", "8",
              "--seq", "1024")
    return [
        Example(name="predict-batch-1e8", why=why, argv=(*train8, "--batch", "1e8", "--json"), refuse=False,
                answer=answered_json("step_time_s")),
        Example(name="plan-batch-1e8", why=why, argv=(*plan8, "--batch", "1e8", "--json"), refuse=False,
                answer=answered_json("layouts")),
        Example(name="plan-batch-1e15", why=why, argv=(*plan8, "--batch", "1e15"), names=("--batch", "2^40")),
        Example(name="predict-batch-1e15", why=why, argv=(*train8, "--batch", "1e15"), names=("--batch", "2^40")),
        Example(name="api-plan-batch-1e15", why=why,
                argv=("api", "lb.plan('llama-3.1-8b', 'h100-sxm', devices=8, batch=10**15, seq=1024)"),
                names=("batch", "2^40")),
        Example(name="infer-devices-1e12", why=why, names=("--devices", "2^24"),
                argv=("predict", "infer", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--devices", "1e12")),
        Example(name="hw-devices-per-node-1e20-check", why=why, argv=("hardware", "check", "{tmp}/hw/mine.toml"),
                build=hardware_file("devices_per_node = 8", "devices_per_node = 1e20"),
                names=("mine.toml", "devices_per_node")),
        Example(name="hw-devices-per-node-1e20-predict", why=why,
                argv=("predict", "train", "--model", "gpt2-xl", "--hardware", "{tmp}/hw/mine.toml", "--batch", "8",
                      "--seq", "1024"),
                build=hardware_file("devices_per_node = 8", "devices_per_node = 1e20"),
                names=("mine.toml", "devices_per_node")),
        Example(name="hw-devices-per-node-1e20-plan", why=why,
                argv=("plan", "--model", "gpt2-xl", "--hardware", "my-gpu", "--devices", "64", "--batch", "512",
                      "--seq", "1024"),
                build=in_path(hardware_file("devices_per_node = 8", "devices_per_node = 1e20")),
                names=("mine.toml", "devices_per_node")),
        Example(name="config-1e9-layers", why=why, argv=("models", "show", "{tmp}/m/config.json"),
                build=hf_config("llama-2-7b", _set(num_hidden_layers=10**9)), names=("config.json", "n_layers")),
        Example(name="measure-train-auto-batch-1e9", why=why, torch=True, names=("batch", "65,536"),
                argv=("measure", "train", "--model", "gpt2-small", "--n-layers", "1", "--device", "cpu",
                      "--batch", "1e9", "--seq", "16", "--layout", "auto")),
        Example(name="stream-infer-prompt-100000", why=why, names=("128",),
                argv=("stream", "infer", "--model", "tiny", "--prompt-len", "100000")),
        Example(name="stream-infer-prompt-1000", why=why, names=("128",),
                argv=("stream", "infer", "--model", "tiny", "--prompt-len", "1000")),
    ]


def _profiles() -> list[Example]:
    why = "files read without validation"
    path = "{tmp}/profiles/a100-80gb.json"
    cases = {"compute-max-0": '{"params": {"compute_max": 0}}', "compute-max-neg": '{"params": {"compute_max": -5}}',
             "compute-max-nan": '{"params": {"compute_max": NaN}}',
             "compute-max-string": '{"params": {"compute_max": "0.8"}}', "list": "[1, 2]", "dev-zero": None}
    out = [Example(name=f"profile-{k}", why=why, argv=PREDICT, build=profile(v), names=(path,))
           for k, v in cases.items()]
    out += [Example(name=f"overlay-{k}", why=why, argv=PREDICT, build=overlay(v),
                    names=("{tmp}/home/hardware/a100-80gb.json", "peak_flops.bf16"))
            for k, v in {"peak-nan": '{"peak_flops": {"bf16": NaN}}',
                         "peak-neg": '{"peak_flops": {"bf16": -1}}'}.items()]
    return out


def _configs() -> list[Example]:
    why = "files read without validation"
    cfg = "{tmp}/m/config.json"
    show = ("models", "show", cfg)
    heads0 = hf_config("llama-2-7b", _set(num_attention_heads=0))
    return [
        Example(name="config-heads-0-show", why=why, argv=show, build=heads0, names=(cfg, "num_attention_heads")),
        Example(name="config-heads-0-predict", why=why, build=heads0, names=(cfg, "num_attention_heads"),
                argv=("predict", "train", "--model", cfg, "--hardware", "a100-80gb", "--batch", "8", "--seq", "512")),
        Example(name="config-heads-0-api", why=why, build=heads0, names=(cfg, "num_attention_heads"),
                argv=("api", f"lb.predict_train('{cfg}', 'a100-80gb', batch=8, seq=512)")),
        Example(name="config-heads-0-measure", why=why, build=heads0, names=(cfg, "num_attention_heads"),
                argv=("measure", "train", "--model", cfg, "--device", "cpu", "--batch", "1", "--seq", "16",
                      "--n-layers", "1", "--steps", "1", "--no-record")),
        Example(name="config-model-type-object", why=why, argv=show, names=(cfg, "model_type"),
                build=hf_config("llama-2-7b", _set(model_type={"a": 1}))),
        Example(name="config-moe-intermediate-0", why=why, argv=show, names=(cfg, "moe_intermediate_size"),
                build=hf_config("deepseek-v3", _set(moe_intermediate_size=0))),
        Example(name="config-qwen-moe-intermediate-0", why=why, argv=show, names=(cfg, "moe_intermediate_size"),
                build=hf_config("qwen3-30b-a3b", _set(moe_intermediate_size=0))),
        Example(name="config-kv-heads-0", why=why, argv=show, names=(cfg, "num_key_value_heads"),
                build=hf_config("llama-2-7b", _set(num_key_value_heads=0))),
        Example(name="config-kv-heads-not-dividing", why=why, argv=show, names=(cfg,),
                build=hf_config("llama-2-7b", _set(num_key_value_heads=3))),
        Example(name="config-gemma3-one-layer-type", why=why, argv=show, names=(cfg, "layer_types"),
                build=hf_config("gemma-3-12b-pt", _gemma_one_layer_type)),
        Example(name="config-dev-zero", why=why, argv=("models", "show", "{tmp}/config.json"),
                build=link_to_zero("config.json"), names=("{tmp}/config.json", "not a regular file")),
    ]


def _store() -> list[Example]:
    why = "one bad row breaks the store's readers"
    as_list = results_db("UPDATE results SET point = '[1, 2]' WHERE rowid = 1")
    invalid = results_db("UPDATE results SET point = json_set(point, '$.batch', -1) WHERE rowid = 1")
    nan = results_db("UPDATE results SET metrics = '{\"tokens_per_s\": NaN}' WHERE rowid = 2")
    db = ("--db", "{tmp}/r.db")
    calibrate = ("calibrate", "--hardware", "cpu", "--dry-run", "--json", "--from")
    return [
        Example(name="list-point-as-list", why=why, argv=("results", "list", *db, "--json"), build=as_list,
                refuse=False, answer=skipped_one_row),
        Example(name="export-point-as-list", why=why, argv=("results", "export", *db, "--format", "csv"),
                build=as_list, refuse=False, answer=skipped_one_row),
        Example(name="report-point-as-list", why=why, build=as_list, refuse=False, answer=report_written,
                argv=("report", *db, "--out", "{tmp}/out", "--no-predict", "--json")),
        Example(name="to-csv-point-as-list", why=why, build=as_list, refuse=False,
                answer=lambda out, err: None if out.count("gpt2-small") == 2 else "not the two good rows",
                argv=("api", "lb.results.open('{tmp}/r.db').to_csv()")),
        Example(name="report-row-batch-minus-1", why=why, build=invalid, refuse=False, answer=report_written,
                argv=("report", *db, "--out", "{tmp}/out", "--no-predict", "--json")),
        Example(name="export-json-nan", why=why, argv=("results", "export", *db, "--format", "json"), build=nan,
                refuse=False, answer=strict_json_skipping),
        Example(name="calibrate-db-unusable-rows", why=why, argv=(*calibrate, "{tmp}/runs.db"), build=calibration_db,
                refuse=False, answer=skipped_with_reasons),
        Example(name="calibrate-csv-no-batch-seq", why=why, argv=(*calibrate, "{tmp}/rows.csv"),
                build=csv_rows("a,cpu,train,gpt2-small,,,fp32,tokens_per_s,100",
                               "b,cpu,train,gpt2-small,4,,fp32,tokens_per_s,100"),
                names=("rows.csv", "no batch or seq_len")),
        Example(name="calibrate-csv-inf", why=why, argv=(*calibrate, "{tmp}/rows.csv"),
                build=csv_rows("a,cpu,train,gpt2-small,4,64,fp32,tokens_per_s,inf"),
                names=("rows.csv", "finite")),
        Example(name="calibrate-from-dev-zero", why=why, argv=(*calibrate, "{tmp}/rows.json"),
                build=link_to_zero("rows.json"), names=("rows.json",)),
    ]


def _names() -> list[Example]:
    why = "names that escape"
    return [
        Example(name="hardware-init-name-dotdot", why=why, names=("--name",),
                argv=("hardware", "init", "--like", "h100-sxm", "--name", "../evil")),
        Example(name="hardware-init-name-newline", why=why, names=("--name",),
                argv=("hardware", "init", "--like", "h100-sxm", "--name", "a\nb")),
        Example(name="user-file-named-dotdot", why=why, argv=("hardware", "list"),
                build=in_path(hardware_file("devices_per_node = 8", "devices_per_node = 8", name="../evil")),
                names=("{tmp}/hw/mine.toml", "name", "../evil")),
        Example(name="hardware-path-same-folder-twice", why=why, argv=("hardware", "show", "my-gpu", "--json"),
                build=twice_in_path, refuse=False, answer=answered_json("my-gpu")),
    ]


def _api_and_leftovers() -> list[Example]:
    serve = ("serve", "--model", "gpt2-small", "--hardware", "a100-80gb", "--rate", "1")
    return [
        Example(name="api-measure-block-ep-2", why="the Python API", names=("ep=2",),
                argv=("api", "lb.measure_block(model='gpt2-small', ep=2, device='cpu')")),
        Example(name="serve-requests-1e12", why="last session's leftovers", argv=(*serve, "--requests", "1e12"),
                names=("--requests", "exceeds")),
        Example(name="serve-trace-directory", why="last session's leftovers", build=trace_dir,
                argv=(*serve[:-2], "--trace", "{tmp}/trace"), names=("{tmp}/trace", "directory")),
        Example(name="serve-trace-dev-zero", why="files read without validation", build=link_to_zero("t.csv"),
                argv=(*serve[:-2], "--trace", "{tmp}/t.csv"), names=("{tmp}/t.csv", "not a regular file")),
        Example(name="study-spec-dev-zero", why="files read without validation", build=link_to_zero("s.yaml"),
                argv=("study", "show", "{tmp}/s.yaml"), names=("{tmp}/s.yaml", "not a regular file")),
        Example(name="plan-profile-dev-zero", why="files read without validation", build=link_to_zero("p.json"),
                argv=("plan", "--model", "gpt2-xl", "--hardware", "a100-80gb", "--devices", "8", "--batch", "64",
                      "--seq", "1024", "--profile", "{tmp}/p.json"), names=("p.json",)),
    ]


def examples() -> list[Example]:
    return [*_work(), *_profiles(), *_configs(), *_store(), *_names(), *_api_and_leftovers()]


# ---------------------------------------------------------------- running

@dataclass(frozen=True, kw_only=True)
class Outcome:
    example: Example
    command: str
    wall_s: float
    code: int | None
    """None: killed at KILL_S"""
    first_line: str
    verdict: str
    detail: str = ""
    stderr: str = field(default="", repr=False)


def _command(ex: Example, tmp: Path) -> list[str]:
    argv = [a.replace("{tmp}", str(tmp)) for a in ex.argv]
    if argv[0] == "api":
        return [sys.executable, "-c", API.format(call=argv[1])]
    return [sys.executable, "-m", "llmbench", *argv]


def _env(ex: Example, tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("LLMBENCH_PROFILES", "LLMBENCH_HARDWARE_PATH", "LLMBENCH_DB")}
    env.update(LLMBENCH_HOME=str(tmp / "home"), PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    env.update((ex.build or (lambda _: {}))(tmp))
    return env


def verdict(ex: Example, code: int | None, wall_s: float, out: str, err: str, tmp: Path) -> tuple[str, str]:
    """(verdict, what is wrong) of one run."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if code is None:
        return "HANG", f"killed at {KILL_S:g} s"
    if "Traceback" in err or "internal error" in err or code not in (0, 2):
        return "CRASH", f"exit {code}"
    if ex.refuse:
        if code == 0:
            return "ACCEPTED", "exit 0"
        missing = [w.replace("{tmp}", str(tmp)) for w in ex.names if w.replace("{tmp}", str(tmp)) not in err]
        if len(lines) != 1 or not lines[0].startswith("error: ") or missing:
            return "VAGUE", f"{len(lines)} lines" if len(lines) != 1 else f"does not name {missing}"
    else:
        if code != 0:
            return "WRONG", "refused an input that has an answer"
        try:
            problem = ex.answer(out, err) if ex.answer else None
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            problem = f"answer unreadable ({e})"
        if problem:
            return "WRONG", problem
    return ("SLOW", f"{wall_s:.1f} s > {SLOW_S:g} s") if wall_s > SLOW_S else ("ok", "")


def run_one(ex: Example) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="llmbench-hostile-") as d:
        tmp = Path(d)
        env, cmd = _env(ex, tmp), _command(ex, tmp)
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=KILL_S,
                               stdin=subprocess.DEVNULL)
            code, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            code, out, err = None, "", (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        wall = time.perf_counter() - t0
        v, detail = verdict(ex, code, wall, out, err, tmp)
        first = next((ln for ln in err.splitlines() if ln.strip()), "").replace(str(tmp), "{tmp}")
        shown = " ".join(repr(a) if (not a or any(c in a for c in " \n'()")) else a for a in ex.argv)
        return Outcome(example=ex, command=("" if ex.argv[0] == "api" else "llmbench ") + shown, wall_s=wall,
                       code=code, first_line=first, verdict=v, detail=detail, stderr=err)


def table(outcomes: list[Outcome]) -> str:
    rows = ["| example | command | wall s | exit | first stderr line | verdict |", "|---|---|---:|---:|---|---|"]
    for o in outcomes:
        cmd = o.command.replace("|", "\\|")
        first = (o.first_line[:117] + "...") if len(o.first_line) > 120 else o.first_line
        verdict = o.verdict + (f" ({o.detail})" if o.detail else "")
        rows.append(f"| {o.example.name} | `{cmd}` | {o.wall_s:.2f} | {'killed' if o.code is None else o.code} "
                    f"| {first.replace('|', '/')} | {verdict} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="run the examples whose name holds this word")
    ap.add_argument("--no-torch", action="store_true", help="skip the examples that need torch")
    ap.add_argument("--json", action="store_true", help="one JSON object per example instead of the table")
    a = ap.parse_args(argv)
    chosen = [ex for ex in examples() if (not a.only or a.only in ex.name) and not (a.no_torch and ex.torch)]
    outcomes = [run_one(ex) for ex in chosen]
    if a.json:
        print(json.dumps([{"name": o.example.name, "command": o.command, "wall_s": round(o.wall_s, 3),
                           "exit": o.code, "first_line": o.first_line, "verdict": o.verdict, "detail": o.detail}
                          for o in outcomes], indent=1))
    else:
        print(table(outcomes))
        bad = [o for o in outcomes if o.verdict != "ok"]
        load = os.getloadavg()[0]
        print(f"\n{len(outcomes) - len(bad)} of {len(outcomes)} ok (load average {load:.1f}, "
              f"{os.cpu_count()} CPUs){': not ok: ' + ', '.join(o.example.name for o in bad) if bad else ''}")
    return 1 if any(o.verdict != "ok" for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
