"""Weight-streaming runtime: exactness against resident training, device memory, budget, sparse
bytes, the store's AdamW and layout. Tiny models on CPU (docs/stream.md)."""
from __future__ import annotations

import json

import pytest
import torch

from llmbench.errors import BadInput
from llmbench.streaming.config import StreamRun, check_causal_lm
from llmbench.streaming.config import workload_and_options as S
from llmbench.streaming.run import run_compare, run_train
from llmbench.streaming.store import MEASURE_ADAMW, AdamConfig, ParameterStore


def test_streamed_losses_equal_resident_over_20_steps():
    out = run_compare(*S(model="tiny", batch=4, seq=32, steps=20))
    assert len(out["streamed_loss"]) == 21 and out["pairs"] == 20  # 1 warm-up pair + 20 timed
    assert out["max_rel_loss_diff"] <= 1e-5
    assert out["streamed_loss"][-1] < out["streamed_loss"][0]  # it learns: the check is not vacuous
    # the ratio is the median of the per-pair ratios (resident / streamed step time), with its spread
    import statistics

    from llmbench.streaming.run import PHASES
    pairs = [r / t for t, r in zip(out["streamed_step_times_s"], out["resident_step_times_s"])]
    assert len(pairs) == 20 and out["ratio"] == pytest.approx(statistics.median(pairs))
    assert out["ratio_p10"] <= out["ratio"] <= out["ratio_p90"] and out["ratio_iqr"] >= 0
    assert set(out["phases_s_per_step"]) == set(PHASES) and out["phases_s_per_step"]["forward_s"] > 0


@pytest.mark.parametrize("prefetch", [0, 2])
def test_other_prefetch_depths_are_exact(prefetch):
    out = run_compare(*S(model="tiny", layers=3, batch=2, seq=16, steps=3, prefetch=prefetch))
    assert out["max_rel_loss_diff"] <= 1e-5
    # prefetch K keeps at most K + 1 blocks (and at least 1) plus the embeddings on the device
    blocks = (out["device_weight_bytes_peak"] - out["embedding_weight_bytes"]) / out["layer_weight_bytes"]
    assert blocks == min(prefetch + 1, 3)


def test_recompute_is_exact_and_needs_less_device_memory():
    base = dict(model="tiny", layers=3, batch=4, seq=32)
    out = run_compare(*S(**base, steps=4, recompute=True))
    assert out["max_rel_loss_diff"] <= 1e-5 and out["recompute"]
    keep = run_train(*S(**base, steps=1))
    again = run_train(*S(**base, steps=1, recompute=True))
    assert again["device_bytes_estimate"] < keep["device_bytes_estimate"]
    assert again["device_weight_bytes_peak"] == keep["device_weight_bytes_peak"]


def test_device_weight_peak_is_flat_in_depth():
    peaks = {}
    for layers in (4, 16):
        out = run_train(*S(model="tiny", layers=layers, batch=2, seq=16, steps=1))
        peaks[layers] = out["device_weight_bytes_peak"]
        assert out["device_weight_bytes_peak"] <= 3 * out["layer_weight_bytes"] + out["embedding_weight_bytes"]
    assert peaks[4] == peaks[16]


def test_bigger_than_budget_trains_and_learns():
    cfg = dict(model="tiny", layers=6, width=256, batch=8, seq=32, steps=8)
    probe = run_train(*S(**{**cfg, "steps": 1}))
    budget = probe["device_bytes_estimate"] + 1024
    assert probe["weights_and_adam_bytes"] > budget  # weights + Adam moments alone do not fit
    out = run_train(*S(**cfg, device_memory_budget_bytes=budget))
    assert out["loss"][-1] < out["loss"][0] - 0.05
    assert out["device_weight_bytes_peak"] < budget


def test_budget_is_enforced_with_one_line_exit_2(capsys):
    from llmbench.cli import main

    with pytest.raises(SystemExit) as e:
        main(["stream", "train", "--model", "tiny", "--steps", "1", "--device-memory-budget", "100000"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: does not fit") and err.count("\n") == 1


def test_runtime_account_stops_an_allocation_over_budget():
    """The executor counts every device buffer itself: past the budget the step fails with a
    ValueError (one line at the CLI), and close() returns promptly."""
    import time

    from llmbench.measure.modeling import build_model
    from llmbench.streaming.executor import StreamingExecutor
    from llmbench.streaming.trainers import initial_groups, make_batch

    spec = S(model="tiny", layers=2)[0].spec()
    skel = build_model(spec, meta=True)
    store = ParameterStore.create("ram", initial_groups(spec, 0, skel), adam=AdamConfig())
    ends_bytes = store.numel("ends") * 4
    ex = StreamingExecutor(skel, store, device=torch.device("cpu"), budget_bytes=ends_bytes + 1000)
    idx, tgt = make_batch(spec, 2, 16, 0, 0)
    with pytest.raises(ValueError, match="over --device-memory-budget"):
        ex.train_step(idx, tgt)
    t0 = time.perf_counter()
    ex.close()
    assert time.perf_counter() - t0 < 5
    assert store.step == 0  # nothing was committed


def test_sparse_streams_10_to_20_percent_of_dense():
    base = dict(model="tiny", width=128, batch=2, seq=16, steps=2)
    dense = run_train(*S(**base))
    sparse = run_train(*S(**base, sparsity=0.9))
    ratio = sparse["streamed_bytes_per_step"] / dense["streamed_bytes_per_step"]
    assert 0.10 <= ratio <= 0.20
    assert dense["streamed_bytes_per_step"] == dense["dense_streamed_bytes_per_step"]


def test_sparse_store_keeps_pruned_weights_at_zero(tmp_path):
    out = run_train(*S(model="tiny", layers=2, batch=2, seq=16, steps=3, sparsity=0.5,
                                 store=f"disk:{tmp_path}"))
    store = ParameterStore.open(f"disk:{tmp_path}")
    w = store.param_views("block.0")["blocks.0.mlp.fc.weight"]
    assert store.step == 3 and len(out["loss"]) == 3
    assert abs((w == 0).float().mean().item() - 0.5) < 0.01


def test_store_adamw_matches_torch():
    torch.manual_seed(1)
    w0 = torch.randn(5, 7)
    p = torch.nn.Parameter(w0.clone())
    opt = torch.optim.AdamW([p], lr=0.01)
    store = ParameterStore.create("ram", {"g": {"w": w0}}, adam=AdamConfig(lr=0.01))
    for _ in range(5):
        g = torch.randn(5, 7)
        p.grad = g.clone()
        opt.step()
        store.update("g", g)
        store.commit(0.0)
    torch.testing.assert_close(store.param_views("g")["w"], p.detach(), rtol=1e-6, atol=1e-7)
    m, v = store.moments("g")
    torch.testing.assert_close(m.view(5, 7), opt.state[p]["exp_avg"])
    torch.testing.assert_close(v.view(5, 7), opt.state[p]["exp_avg_sq"])


def test_store_commit_needs_every_group_and_keeps_old_slot(tmp_path):
    tier = f"disk:{tmp_path}"
    store = ParameterStore.create(tier, {"a": {"x": torch.ones(4)}, "b": {"y": torch.ones(3)}},
                                  adam=AdamConfig())
    store.update("a", torch.ones(4))
    with pytest.raises(RuntimeError, match="commit before every group"):
        store.commit(1.0)
    # not committed: the manifest still says step 0, and the committed slot holds the initial weights
    assert json.loads((tmp_path / "manifest.json").read_text())["step"] == 0
    assert torch.equal(store.weights("a"), torch.ones(4))
    store.update("b", torch.ones(3))
    store.commit(1.0)
    store.close()
    with ParameterStore.open(tier) as again:
        assert again.step == 1 and again.losses == [1.0] and again.weights("a")[0] < 1.0
        assert again.nbytes == 2 * 3 * 7 * 4


def test_kill_between_flush_and_manifest_keeps_the_old_step(tmp_path, monkeypatch):
    """The new slot is written and flushed, the process dies before the manifest flips: a reopen
    sees the previous step's weights, untouched (the double buffer never writes the live slot)."""
    from llmbench.streaming import store as store_mod

    tier = f"disk:{tmp_path}"
    store = ParameterStore.create(tier, {"a": {"x": torch.ones(4)}}, adam=AdamConfig())

    def die(where):
        if where == "before_manifest":
            raise KeyboardInterrupt("killed")

    monkeypatch.setattr(store_mod, "_crash_point", die)
    store.update("a", torch.ones(4))
    with pytest.raises(KeyboardInterrupt):
        store.commit(1.0)
    store.close()  # the process died: its lock is gone
    again = ParameterStore.open(tier)
    assert again.step == 0 and again.losses == [] and torch.equal(again.weights("a"), torch.ones(4))
    assert not torch.equal(again._slots[("a", 1)][0], torch.ones(4))  # the new slot was written


def test_store_capacity_and_tier_errors(tmp_path):
    with pytest.raises(ValueError, match="capacity"):
        ParameterStore.create("ram", {"a": {"x": torch.ones(100)}}, adam=AdamConfig(), capacity_bytes=1000)
    with pytest.raises(BadInput, match="ram' or 'disk:PATH"):
        ParameterStore.create("nvme", {"a": {"x": torch.ones(1)}}, adam=AdamConfig())
    with pytest.raises(ValueError, match="no store to resume"):
        ParameterStore.open(f"disk:{tmp_path}/none")


def test_resume_refuses_another_runs_store(tmp_path):
    run_train(*S(model="tiny", layers=2, batch=2, seq=16, steps=1, store=f"disk:{tmp_path}"))
    with pytest.raises(ValueError, match="made for another run"):
        run_train(*S(model="tiny", layers=2, batch=4, seq=16, steps=2,
                               store=f"disk:{tmp_path}", resume=True))


@pytest.mark.parametrize("kw, match", [
    (dict(batch=0), "batch"), (dict(prefetch=-1), "prefetch"), (dict(sparsity=1.0), "sparsity"),
    (dict(resume=True), "--resume"), (dict(store="nvme"), "--store"),
    (dict(device_memory_budget_bytes=0), "device_memory_budget_bytes"), (dict(store="disk:"), "--store"),
    (dict(resume=True, overwrite=True, store="disk:/tmp/x"), "exclude"),
    (dict(lr=float("nan")), "lr"), (dict(layers=0), "n_layers"),
])
def test_workload_and_option_rules(kw, match):
    with pytest.raises(BadInput, match=match):
        S(**kw)


@pytest.mark.parametrize("kw, match", [
    (dict(precision="fp8"), "precision"), (dict(batch=6, micro_batch=2), "grad_accum"),
])
def test_what_the_stream_runtime_does_not_run(kw, match):
    w, opts = S(precision=kw.pop("precision", "fp32"))
    with pytest.raises(BadInput, match=match):
        StreamRun.of(w.with_(**kw), opts)
    with pytest.raises(BadInput, match="recompute"):
        StreamRun.of(S(precision="fp32")[0].with_(recompute="selective"), opts)


def test_global_batch_splits_over_ranks():
    """--batch is the global batch, as in measure and predict: 8 sequences over 2 ranks are 4 each."""
    w, opts = S(batch=8, precision="fp32")
    assert StreamRun.of(w, opts, world=2).batch == 4 and StreamRun.of(w, opts).batch == 8
    with pytest.raises(BadInput, match="split"):
        StreamRun.of(w.with_(batch=3), opts, world=2)


def test_model_overrides():
    spec = S(model="gpt2-small", layers=2, width=64, heads=4, vocab=100)[0].spec()
    assert (spec.n_layers, spec.d_model, spec.d_ff, spec.n_heads, spec.vocab_size) == (2, 64, 256, 4, 100)
    with pytest.raises(BadInput, match="learned positions"):  # never extended silently (point.check_positions)
        S(model="gpt2-small", seq=4096)[0].spec()
    with pytest.raises(ValueError, match="head"):
        check_causal_lm(S(model="bert-base")[0].spec())
    with pytest.raises(BadInput, match="head"):
        run_train(*S(model="bert-base", steps=1))


def test_cli_json_keys(capsys, tmp_path):
    from llmbench.cli import main
    from llmbench.results.store import ResultsDB

    main(["stream", "train", "--model", "tiny", "--layers", "2", "--batch", "2", "--seq", "16",
          "--steps", "2", "--json", "--db", str(tmp_path / "r.db")])
    out = json.loads(capsys.readouterr().out)
    with ResultsDB(tmp_path / "r.db") as db:
        (row,) = [db.get(k) for k in out["result_keys"]]
    assert row["metrics"]["tokens_per_s"] == out["tokens_per_s"]
    assert (row["metrics"]["loss_first"], row["metrics"]["loss_last"]) == (out["loss"][0], out["loss"][-1])
    assert row["point"]["layout"]["mode"] == "weight_streaming" and row["workload_id"]
    for key in ("tokens_per_s", "loss", "streamed_bytes_per_step", "exposed_stream_s_per_step",
                "device_weight_bytes_peak", "store_bytes"):
        assert key in out
    assert len(out["loss"]) == 2 and out["tokens_per_s"] > 0
    main(["stream", "compare", "--model", "tiny", "--layers", "2", "--batch", "2", "--seq", "16",
          "--steps", "2", "--json", "--db", str(tmp_path / "c.db")])
    out = json.loads(capsys.readouterr().out)
    with ResultsDB(tmp_path / "c.db") as db:
        streamed, resident = [db.get(k) for k in out["result_keys"]]
    assert streamed["metrics"]["tokens_per_s"] == out["streamed_tokens_per_s"]
    assert resident["metrics"]["tokens_per_s"] == out["resident_tokens_per_s"]
    assert resident["point"]["layout"]["mode"] == "resident" and streamed["workload_id"] != resident["workload_id"]
    # the resident row is the very workload `measure train` records: results of the engines one query apart
    from llmbench.measure.options import RunOptions
    from llmbench.measure.suites import resolve_workload
    w = resolve_workload(S(layers=2, batch=2, seq=16)[0], torch.device("cpu"), RunOptions(device="cpu"))
    assert resident["workload_id"] == w.id()
    assert streamed["workload_id"] == w.with_(mode="weight_streaming").id()
    for key in ("resident_tokens_per_s", "streamed_tokens_per_s", "ratio", "max_rel_loss_diff",
                "device_weight_bytes_peak", "layer_weight_bytes"):
        assert key in out


def test_accelerator_code_path_runs_with_stub_streams(monkeypatch):
    """No GPU in CI: drive the side-stream / pinned-memory / event branch of the executor with
    stub streams on CPU, so a Python error there cannot hide until someone has a GPU. The losses
    must still equal resident training's."""
    import contextlib

    from llmbench.measure.modeling import build_model
    from llmbench.streaming import executor as exm
    from llmbench.streaming.trainers import ResidentTrainer, initial_groups, make_batch

    class Stub:
        def record_event(self):
            return self

        def synchronize(self):
            pass

        def wait_event(self, event):
            pass

        def wait_stream(self, stream):
            pass

    class StubModule:
        Stream = staticmethod(lambda device=None: Stub())
        stream = staticmethod(lambda s: contextlib.nullcontext())
        current_stream = staticmethod(lambda device=None: Stub())
        set_device = staticmethod(lambda index: None)

    monkeypatch.setattr(torch.Tensor, "record_stream", lambda self, s: None)
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: self.clone())
    monkeypatch.setattr(torch, "get_device_module", lambda device=None: StubModule)
    w, opts = S(model="tiny", layers=3, batch=2, seq=16, precision="fp32")
    cfg, spec = StreamRun.of(w, opts), w.spec()
    skel = build_model(spec, meta=True)
    store = ParameterStore.create("ram", initial_groups(spec, 0, skel),
                                  adam=AdamConfig(lr=cfg.lr, **MEASURE_ADAMW))  # ResidentTrainer's
    ex = exm.StreamingExecutor(skel, store, device=torch.device("cpu"))
    monkeypatch.setattr(ex, "_accel", True)
    ex._mod, ex._side, ex._grad_stream = StubModule, Stub(), Stub()
    monkeypatch.setattr(ex, "_host_buffer", lambda shape: torch.empty(shape, dtype=ex.dtype))
    res = ResidentTrainer(spec, cfg, torch.device("cpu"))
    try:
        for step in range(3):
            idx, tgt = make_batch(spec, 2, 16, 0, step)
            assert ex.train_step(idx, tgt) == pytest.approx(res.step(idx, tgt), rel=1e-6)
    finally:
        ex.close()
