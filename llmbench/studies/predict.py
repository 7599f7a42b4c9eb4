"""The one prediction planner: what the analytical model predicts for a study, recorded as
source="predicted" next to the measured and published results of the same Workloads.

    llmbench study predict gas --db runs.db                      # the study's predict: section
    llmbench study predict gas --hardware h100-sxm,cs2 --db runs.db

A study's `predict:` section (studies/specs/*.yaml) lists the catalog hardware it is drawn for and
its own grid of full-size workloads; without one, the study's full-size points are predicted on
`--hardware`, else on every catalog accelerator. Each workload is predicted by
`llmbench.perfmodel.predict.predict(w)` on each hardware, with the one precision rule
(`point.precision_for`: the workload's precision where the hardware has a peak for it, else the
hardware's own; workloads that become the same are predicted once) and the one block rule (suite
`block` is one layer: predict handles it). The recorded Workload says its hardware and precision;
layout knobs left open stay open (the model chooses; the chosen values are in the metrics).

A prediction whose workload does not fit the devices' memory is recorded as `oom` with its
metrics (fits false); one the model rejects (a batch that does not split, an unknown model) as
`skipped` with why; anything else as `error`: a sweep never stops on one point.
`predict_measured(db)` predicts every measured workload on the hardware it was measured on, so
measured and predicted results share a workload_id.
"""
from __future__ import annotations

import time

from llmbench.point import Workload, precision_for
from llmbench.results.store import ResultsDB

#: the options of a prediction's command, in the order the captions show them
_CMD_FIELDS = ("batch", "seq_len", "gen_len", "devices", "micro_batch", "grad_accum", "precision",
               "sparsity", "head")


def predict_command(w: Workload, dataset: str | None = None) -> str:
    """The `llmbench predict|project ...` command of one prediction (the report's captions): the
    fields the workload sets, layout knobs included; a resized model is said in words."""
    d = {k: getattr(w, k) for k in _CMD_FIELDS
         if getattr(w, k) not in (None, 0, 0.0) or (k == "gen_len" and w.suite == "infer")}
    d.update({k: v for k, v in w.layout.to_dict().items() if v is not None})
    opts = " ".join(f"--{'seq' if k == 'seq_len' else k.replace('_', '-')} {v}" for k, v in d.items())
    if w.resize:
        opts += " (model resized: " + ", ".join(f"{k}={v}" for k, v in w.resize.items()) + ")"
    if dataset:
        return f"llmbench project --model {w.model} --hardware {w.hardware} --dataset {dataset} {opts}"
    cmd = "infer" if w.suite == "infer" else "train"
    tail = " (suite block: one layer)" if w.suite == "block" else ""
    return f"llmbench predict {cmd} --model {w.model} --hardware {w.hardware} {opts}{tail}"


def predict_one(w: Workload, hw, dataset: str | None = None) -> tuple[str, dict, str | None]:
    """(status, metrics, error) of one workload on one HardwareSpec (w.hardware is its name)."""
    from llmbench.perfmodel.predict import predict_or_unfit

    try:
        pred, refusal = predict_or_unfit(w, hw=hw)
        metrics = _plain(pred.to_dict())
        if dataset:
            metrics.update(_project(pred, dataset))
    except ValueError as e:  # BadInput too: the model says this workload cannot be predicted
        return "skipped", {}, " ".join(str(e).split())[:300]
    except Exception as e:  # noqa: BLE001 - a prediction that fails is a result, not a crash
        return "error", {}, f"{type(e).__name__}: {e}".splitlines()[0][:300]
    if metrics.get("fits", True) is False:
        return "oom", metrics, (refusal or "does not fit in device memory (predicted)")[:300]
    return "ok", metrics, None


def _project(pred, dataset: str) -> dict:
    """Time for one epoch of `dataset` at the predicted throughput (llmbench project)."""
    from llmbench.perfmodel.project import get_dataset, project

    out = project(get_dataset(dataset), pred)
    return {"epoch_time_s": out["seconds"], "device_hours": out["device_hours"]}


def _plain(d: dict) -> dict:
    """numpy scalars as Python numbers (the results store writes JSON)."""
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in d.items()}


def planned(spec, hardware: list[str] | None = None) -> list[tuple[Workload, object, str | None]]:
    """(Workload with hardware and precision, HardwareSpec, dataset) of every prediction of a
    study, in spec order, each workload once. `hardware` replaces the spec's lists."""
    from llmbench.hardware import catalog, get_hardware

    hws = {}
    out, seen = [], set()
    for pp in spec.predict_points():
        names = hardware or list(pp.hardware) or [h for h, s in catalog().items() if s.kind != "cpu"]
        for name in names:
            hw = hws.setdefault(name, get_hardware(name))
            w = pp.workload.with_(hardware=hw.name,
                                  precision=precision_for(hw, pp.workload.precision))
            mark = (w.id(), pp.dataset)
            if mark not in seen:
                seen.add(mark)
                out.append((w, hw, pp.dataset))
    return out


def record_prediction(store: ResultsDB, w: Workload, hw, study: str, dataset: str | None = None,
                      env: dict | None = None) -> str:
    """Predict one workload and record it (source predicted, linked to `study`); returns the key.
    A projection is tagged with its data set (the workload alone does not say it)."""
    from llmbench import __version__

    status, metrics, error = predict_one(w, hw, dataset)
    environment = {"command": predict_command(w, dataset), "tool": f"llmbench {__version__} perfmodel",
                   "study": study, **({"dataset": dataset} if dataset else {}), **(env or {})}
    return store.record(w, source="predicted", status=status, metrics=metrics, error=error,
                        environment=environment, study=study,
                        tag=f"dataset={dataset}" if dataset else None)


def predict_study(name: str, hardware: list[str] | None = None, db: str | None = None) -> dict:
    """Record the predictions of one study; a summary with every recorded row."""
    from llmbench.studies.spec import get_study

    study = get_study(name)
    with ResultsDB(db) as store:
        keys = [record_prediction(store, w, hw, study.name, ds) for w, hw, ds in planned(study, hardware)]
        rows = [store.get(k) for k in keys]
        db_path = str(store.path)
    counts = {s: sum(r["status"] == s for r in rows) for s in ("ok", "oom", "skipped", "error")}
    return {"study": study.name, "hardware": sorted({r["hardware"] for r in rows}), "db": db_path,
            "predicted": len(rows), "counts": counts, "results": rows}


def predict_all(store: ResultsDB, studies=None, *, log=print) -> dict:
    """Every study's predictions into `store`; a one-line count per status."""
    from llmbench.studies.spec import studies as all_studies

    t0, counts, n = time.perf_counter(), {}, 0
    for study in (studies or all_studies().values()):
        for w, hw, ds in planned(study):
            row = store.get(record_prediction(store, w, hw, study.name, ds))
            counts[row["status"]] = counts.get(row["status"], 0) + 1
            n += 1
    dt = time.perf_counter() - t0
    log(f"predicted {n} workloads in {dt:.1f} s: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    return {"n": n, "counts": counts, "seconds": dt}


def predict_measured(store: ResultsDB, *, log=print) -> int:
    """Predict every measured workload (status ok) on the hardware it was measured on ('cpu', or
    the accelerator's catalog entry), linked to the studies that measured it: the measured and
    predicted results of one Workload share its workload_id. Rows whose hardware the catalog
    does not know are left out (and counted)."""
    from llmbench.hardware import get_hardware

    n, unknown = 0, set()
    for r in store.query(source="measured", status="ok"):
        if not r.get("workload_id"):
            continue  # ceilings, streaming runs: not a workload's result
        w = Workload.from_dict(r["point"])
        try:
            hw = get_hardware(w.hardware)
        except ValueError:
            unknown.add(w.hardware)
            continue
        for study in store.studies_of(r["key"]) or ["measured"]:
            record_prediction(store, w, hw, study, env={"predicts": "measured"})
        n += 1
    log(f"  this machine: predicted {n} measured workloads"
        + (f"; no catalog entry for {', '.join(sorted(unknown))}" if unknown else ""))
    return n


def predict_missing(store: ResultsDB) -> list[dict]:
    """Rows (not written) predicting every measured workload of `store` that has no prediction
    yet, on the hardware it ran on: what `llmbench report --db` draws beside a user's own runs
    without writing to their database. Hardware the catalog does not know is left out."""
    from llmbench.hardware import get_hardware
    from llmbench.results.store import make_row

    have = {r["workload_id"] for r in store.query(source="predicted") if r.get("workload_id")}
    out, seen = [], set()
    for r in store.query(source="measured", status="ok"):
        wid = r.get("workload_id")
        if not wid or wid in have or wid in seen:
            continue
        seen.add(wid)
        w = Workload.from_dict(r["point"])
        try:
            hw = get_hardware(w.hardware)
        except ValueError:
            continue
        status, metrics, error = predict_one(w, hw)
        for study in store.studies_of(r["key"]) or [None]:
            out.append(make_row(w, source="predicted", status=status, metrics=metrics, error=error,
                                study=study, environment={"command": predict_command(w), "predicts": "measured"}))
    return out
