"""Hostile input to every command: exit 0 with valid JSON, or exit 2 with one line; never a
traceback, never an internal error, never a hang.

The commands are found by walking the argparse tree (a new command is fuzzed without a change
here); each option gets the hostile values of its kind (numbers, names, paths), and a few option
combinations are drawn at random by hypothesis. Commands that would start real work (measure,
stream, study run, reproduce, report) run with their engine replaced by a stub, so the borders
(parsing, Workload validation, files, databases) are what is tested; each engine's own checks
have their own tests.
"""
from __future__ import annotations

import json
import os
import signal
import string
from contextlib import contextmanager

import pytest

from llmbench.cli import build, main

SECONDS_PER_CALL = 30
NUMBERS = ["0", "-1", "-0", "1.5", "nan", "inf", "-inf", "1e400", "", "x", "9" * 40, "0x10", "1_0"]
NAMES = ["", "nope", "[/red]", "[bold]x[/bold]", "x" * 300, "a?b", "../../etc/passwd", "~", "-", "é",
         "\u202e", "cuda:99", "disk:", "disk:/dev/null/x", "NaN"]


def _commands(parser, path=()):
    """(path, leaf parser) of every command."""
    subs = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    if not subs:
        yield path, parser
        return
    for name, sub in subs[0].choices.items():
        yield from _commands(sub, (*path, name))


PARSER = build()
COMMANDS = dict(_commands(PARSER))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    (d / "garbage.db").write_bytes(os.urandom(4096))
    (d / "empty.json").write_text("")
    (d / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (d / "nan.json").write_text('{"model_type": "gpt2", "n_layer": NaN}')
    (d / "text.yaml").write_text("a: &a [*a]\n")
    (d / "dir.db").mkdir()
    from llmbench.results.store import ResultsDB

    with ResultsDB(d / "ok.db") as store:
        store.record({"suite": "train", "model": "gpt2-small", "hardware": "cpu"}, metrics={"tokens_per_s": 1.0})
    return d


def _path_values(files) -> list[str]:
    return [str(files / "garbage.db"), str(files / "dir.db"), str(files / "empty.json"), str(files / "deep.json"),
            str(files / "nan.json"), str(files / "text.yaml"), "/dev/zero", "/nonexistent/dir/x.db",
            str(files / ("n" * 300)), str(files / "a?b.db"), str(files)]


#: a valid invocation of each command (options the fuzz replaces one at a time)
def _base(files) -> dict:
    db = ["--db", str(files / "ok.db")]
    return {
        ("models", "show"): ["gpt2-small"],
        ("hardware", "show"): ["a100-80gb"],
        ("predict", "train"): ["--model", "gpt2-small", "--hardware", "a100-80gb", "--batch", "8", "--seq", "128"],
        ("predict", "infer"): ["--model", "gpt2-small", "--hardware", "a100-80gb"],
        ("project",): ["--model", "gpt2-small", "--hardware", "a100-80gb", "--batch", "8", "--seq", "128",
                       "--dataset", "owt"],
        ("calibrate",): ["--published", "--dry-run", "--hardware", "gaudi2"],
        ("study", "show"): ["gas"],
        ("study", "run"): ["gas", "--quick", *db],
        ("study", "predict"): ["gas", "--hardware", "a100-80gb", "--db", str(files / "pred.db")],
        ("results", "list"): db, ("results", "export"): db, ("results", "load-published"): db,
        ("report",): db, ("reproduce",): db,
    }


class Stubbed(Exception):
    pass


@pytest.fixture
def stubs(monkeypatch, tmp_path):
    """Engines that would start real work return a canned result instead; the commands run in a
    scratch directory (names like `nope` or `~` become files there) with a scratch LLMBENCH_HOME."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LLMBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LLMBENCH_DB", raising=False)
    import llmbench.measure.suites as suites
    import llmbench.studies.runner as runner

    def fake_workload(w, run):
        return w.with_(hardware=w.hardware or "cpu", precision=w.precision or "fp32", devices=w.devices or 1), \
            {"status": "ok", "metrics": {"tokens_per_s": 1.0}, "error": None, "environment": {}}

    monkeypatch.setattr(suites, "run_workload", fake_workload)
    monkeypatch.setattr(suites, "run_suite", lambda suite, cfg: {"status": "ok", "metrics": {
        "gemm": {}, "layer": {}, "copy": {"bytes": 1, "min": 1.0, "median": 1.0, "max": 1.0}, "device": "cpu",
        "repeats": 1}, "error": None, "environment": {}})
    monkeypatch.setattr(runner, "run_study", lambda *a, **k: {"study": "gas", "quick": True, "hardware": "cpu",
                                                               "results": [], "counts": dict.fromkeys(
                                                                   ("ok", "oom", "error", "skipped"), 0),
                                                               "ran": 0, "skipped_now": 0, "already_recorded": 0,
                                                               "db": "x"})
    import llmbench.report.html as html
    import llmbench.studies.reproduce as rep
    monkeypatch.setattr(rep, "reproduce", lambda **k: {"report": "x"})
    monkeypatch.setattr(html, "report", lambda *a, **k: {"report": "x"})
    try:
        import llmbench.measure.serve as mserve
        monkeypatch.setattr(mserve, "measure_serve", _fake_serve)
    except ImportError:  # no torch
        pass
    try:
        import llmbench.streaming.run as srun
        monkeypatch.setattr(srun, "run_train", lambda w, opts: {"rank": 1})
        monkeypatch.setattr(srun, "run_compare", lambda w, opts: {"ratio": 1.0})
    except ImportError:  # no torch
        pass


def _fake_serve(spec, trace, cfg, **kw):
    """measure serve's runtime: the real checks of model and requests, then no replay (every
    request done 0.1 s after it arrives, in one token)."""
    import llmbench.measure.serve as mserve

    reqs = mserve.requests_of(trace)
    mserve.check_servable(spec)
    mserve.check_requests(spec, cfg, reqs)
    recs = tuple(mserve.RequestRecord(request_id=i, arrival_s=r.arrival_s, first_token_s=r.arrival_s + 0.1,
                                      finish_s=r.arrival_s + 0.1, prompt_tokens=r.prompt_tokens, output_tokens=1,
                                      token_times_s=(r.arrival_s + 0.1,), preemptions=0, tokens=(0,))
                 for i, r in enumerate(reqs))
    return mserve.Replay(records=recs, kv_blocks=1, free_blocks_at_end=1, preemptions=0, steps=1, duration_s=1.0,
                         kv_cache_utilization=0.0), {"device": "cpu", "device_type": "cpu", "hardware": "cpu",
                                                               "precision": "fp32"}


@contextmanager
def _deadline(seconds):
    def boom(*_):
        raise TimeoutError(f"no answer in {seconds} s")
    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def run(capsys, argv) -> tuple[int, str, str]:
    code = 0
    with _deadline(SECONDS_PER_CALL):
        try:
            main(list(argv))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    out = capsys.readouterr()
    return code, out.out, out.err


def check(capsys, argv):
    code, out, err = run(capsys, argv)
    where = f"llmbench {' '.join(map(repr, argv))}"
    assert "Traceback" not in err and "internal error" not in err, f"{where}: {err}"
    assert code in (0, 2), f"{where}: exit {code}: {err}"
    if code == 2:
        assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, f"{where}: {err!r}"
    elif "--json" in argv and out.strip():
        json.loads(out, parse_constant=lambda c: pytest.fail(f"{where}: non-standard JSON {c}"))
    return code


def _kind(action) -> str:
    if action.nargs == 0:
        return "flag"
    t = getattr(action.type, "__name__", "")
    if action.choices:
        return "choice"
    if action.type in (int, float) or t not in ("", "str", "Path"):
        return "number"
    if action.dest in ("db", "out", "output", "source", "store", "name", "model") or action.type is not None:
        return "path"
    return "name"


CASES = [(path, a.option_strings[0] if a.option_strings else None, a)
         for path, p in COMMANDS.items() for a in p._actions
         if a.dest not in ("help", "json") and a.nargs != 0 and a.help != "==SUPPRESS=="]


@pytest.mark.parametrize("path, flag, action", CASES, ids=[f"{' '.join(p)} {f or a.dest}" for p, f, a in CASES])
def test_hostile_values(capsys, files, stubs, path, flag, action):
    base = _base(files).get(path, [])
    values = {"number": NUMBERS, "choice": NUMBERS[:3] + NAMES[:4], "name": NAMES,
              "path": NAMES + _path_values(files)}[_kind(action)]
    for value in values:
        if flag is None:  # a positional: replace the base's first word
            argv = [*path, value, *base[1:], "--json"]
        else:
            argv = [*path, *_without(base, flag), flag, value]
            if any(o == "--json" for o in COMMANDS[path]._option_string_actions):
                argv.append("--json")
        check(capsys, argv)


def _without(argv, flag):
    out, skip = [], False
    for i, x in enumerate(argv):
        if skip:
            skip = False
            continue
        if x == flag:
            skip = i + 1 < len(argv) and not argv[i + 1].startswith("--")
            continue
        out.append(x)
    return out


@pytest.mark.parametrize("path", list(COMMANDS), ids=[" ".join(p) for p in COMMANDS])
def test_garbage_words_and_unknown_options(capsys, files, stubs, path):
    for extra in (["--nope"], ["--nope", "1"], ["extra-word"], ["--json", "--json"], ["--db"], ["-"]):
        check(capsys, [*path, *_base(files).get(path, []), *extra])


def test_random_training_workloads(capsys, stubs):
    """Random numbers for every predict-train knob: a prediction with strict JSON, or one line."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    ints = st.one_of(st.integers(-2, 8), st.sampled_from([16, 48, 64, 96, 1024, 10**9]))

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(batch=ints, seq=ints, devices=ints, tp=ints, pp=ints, micro=ints, ga=ints, zero=st.integers(-1, 4),
           sparsity=st.sampled_from(["0", "0.5", "0.99", "1", "nan"]),
           model=st.sampled_from(["gpt2-small", "gpt2-xl", "llama-2-7b", "bert-base"]),
           hw=st.sampled_from(["a100-80gb", "cs2", "sn30", "bow-ipu", "cpu"]))
    def one(batch, seq, devices, tp, pp, micro, ga, zero, sparsity, model, hw):
        argv = ["predict", "train", "--model", model, "--hardware", hw, "--batch", str(batch), "--seq", str(seq),
                "--devices", str(devices), "--tp", str(tp), "--pp", str(pp), "--micro-batch", str(micro),
                "--grad-accum", str(ga), "--zero", str(zero), "--sparsity", sparsity, "--json"]
        check(capsys, argv)

    one()


def test_printable_garbage_everywhere(capsys, files, stubs):
    """Random printable words after every command: never a traceback."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    word = st.text(alphabet=string.printable.strip() + "é[]", min_size=0, max_size=12)

    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(path=st.sampled_from(list(COMMANDS)), words=st.lists(word, max_size=4))
    def one(path, words):
        check(capsys, [*path, *words])

    one()
