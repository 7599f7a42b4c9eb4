"""Train a model whose resident training state does not fit this machine's RAM, from a disk store.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/stream_bigger_than_ram.py --store disk:/work/tmp_streaming/big

Default: the GPT-3 2.7B shape (d_model 2560, 32 heads) cut to 20 layers, 1.71B parameters: resident
fp32 training needs 16 bytes per parameter (weights, gradients, two Adam moments) = 27.3 GB plus
activations, over the 25.3 GB (23.5 GiB) of RAM here, and the script shows resident training
refused before it allocates (llmbench.streaming.trainers.check_resident_fits). The streamed run
keeps fp32 masters and Adam moments in a two-slot disk store (24 bytes per parameter = 41 GB,
written sparse: 16 B/param after step 1, 24 from step 2) and holds on the host only the layers in
flight and their gradients; it prints peak RSS and device-side weight bytes. The full 32-layer
2.7B would need a 64 GB store: more free disk than this shared machine had (78 GB free, shared by
seven engineers); --layers 32 runs it where the disk allows. The script checks the free disk and
RAM first and refuses a run that cannot fit, so it cannot fill the disk or push the machine into
the OOM killer.

GPU variant (prepared, not run: no GPU in this session): a model larger than the device's HBM
trained with bf16 copies streamed from a host-RAM store, under a device budget:

    python benchmarks/stream_bigger_than_ram.py --device cuda --precision bf16 --model gpt3-6.7b \\
        --layers 32 --batch 4 --seq 2048 --steps 5 --store ram --device-memory-budget 40e9

(gpt3-6.7b: 6.66B parameters; resident bf16 training with fp32 masters needs 20 B/param = 133 GB,
over an H100's 80 GB or an H200's 141 GB; the store takes 24 B/param = 160 GB of host RAM, or use
--store disk:PATH on a host with less.)
"""
from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

GB, GiB = 1e9, 2 ** 30


def _disk_used_bytes(path: Path) -> int:
    """Blocks the store's files take on disk (they are sparse until written)."""
    return sum(f.stat().st_blocks * 512 for f in path.glob("*.f32"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="gpt3-2.7b")
    ap.add_argument("--layers", type=int, default=20)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-4, help="AdamW lr (1e-3 made the loss of the "
                    "1.7B model rise over its first steps at 128 tokens per step)")
    ap.add_argument("--store", default="disk:/work/tmp_streaming/big")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--device-memory-budget", type=float, default=None)
    ap.add_argument("--disk-margin-gb", type=float, default=10.0, help="free disk kept for others")
    ap.add_argument("--keep", action="store_true", help="keep the store afterwards")
    ap.add_argument("--out", default="docs/results/stream_bigger_than_ram_cpu.json")
    a = ap.parse_args()

    from llmbench.errors import BadInput
    from llmbench.measure import device as dev
    from llmbench.models.counting import param_count
    from llmbench.measure import hostmem as memory
    from llmbench.streaming.config import StreamRun, workload_and_options

    budget = int(a.device_memory_budget) if a.device_memory_budget else None
    w, opts = workload_and_options(model=a.model, layers=a.layers, batch=a.batch, seq=a.seq, steps=a.steps,
                                   store=a.store, device=a.device, precision=a.precision, overwrite=True,
                                   lr=a.lr, device_memory_budget_bytes=budget)
    cfg, spec, device = StreamRun.of(w, opts), w.spec(), dev.resolve(a.device)
    p = param_count(spec)
    print(f"{spec.name} x {spec.n_layers} layers, d_model {spec.d_model}: {p:,} parameters")
    print(f"machine: RAM {memory.total_bytes() / GB:.1f} GB ({memory.total_bytes() / GiB:.1f} GiB), "
          f"available {memory.available_bytes() / GB:.1f} GB")
    resident_refused(spec, cfg, device, BadInput)
    if cfg.store.kind == "disk":
        check_disk(cfg.store.path, 24 * p, a.disk_margin_gb * GB)
    out = train(w, opts, p)
    out["command"] = "benchmarks/stream_bigger_than_ram.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(a).items() if v not in (None, False))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=2))
    print(f"wrote {a.out}")
    if cfg.store.kind == "disk" and not a.keep:
        remove_store(cfg.store.path)


def resident_refused(spec, cfg, device, BadInput) -> None:
    from llmbench.streaming.trainers import ResidentTrainer

    try:
        ResidentTrainer(spec, cfg, device)
    except BadInput as e:
        print(f"resident: refused before allocating: {e}")
        return
    raise SystemExit("resident training would fit here: pick a larger --layers / --model")


def check_disk(path: Path, store_bytes: int, margin: float) -> None:
    path.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(path).free + _disk_used_bytes(path)  # an old store here is replaced
    print(f"disk: the store takes {store_bytes / GB:.1f} GB (24 B/param), {free / GB:.1f} GB free at {path}")
    if free - store_bytes < margin:
        raise SystemExit(f"not started: the store would leave less than {margin / GB:.0f} GB free")


def train(w, opts, params: int) -> dict:
    from llmbench.measure import hostmem as memory
    from llmbench.streaming.run import run_train

    t0 = time.time()
    out = run_train(w, opts)
    wall = time.time() - t0
    disk = _disk_used_bytes(opts.store.path) if opts.store.kind == "disk" else 0
    print(f"streamed: {len(out['loss'])} steps in {wall:,.0f} s (store creation included); step times "
          f"{', '.join(f'{t:,.1f}' for t in out.get('step_times_s', []))} s")
    print("loss: " + " ".join(f"{x:.4f}" for x in out["loss"]))
    print(f"peak RSS {out['peak_rss_bytes'] / GB:.2f} GB ({out['peak_rss_bytes'] / params:.2f} B/param); "
          f"resident state would be {16 * params / GB:.1f} GB")
    print(f"device-side weights peak {out['device_weight_bytes_peak'] / GB:.3f} GB (layer "
          f"{out['layer_weight_bytes'] / GB:.3f} GB, embeddings+head {out['embedding_weight_bytes'] / GB:.3f} GB), "
          f"gradients peak {out['device_grad_bytes_peak'] / GB:.3f} GB")
    print(f"store {out['store_bytes'] / GB:.1f} GB ({disk / GB:.1f} GB on disk now); exposed stream "
          f"{out['exposed_stream_s_per_step']:.1f} s/step, optimizer {out['optimizer_s_per_step']:.1f} s/step "
          f"({out['exposed_optimizer_s_per_step']:.1f} exposed)")
    out.update(wall_s=wall, store_disk_bytes=disk, machine_ram_bytes=memory.total_bytes())
    return out


def remove_store(path: Path) -> None:
    """Delete the store's own files (the manifest names them), nothing else."""
    from llmbench.streaming.storedir import LOCK_NAME, MANIFEST, store_files

    m = json.loads((path / MANIFEST).read_text())
    for name in store_files(m["groups"]) + [MANIFEST, LOCK_NAME]:
        (path / name).unlink(missing_ok=True)
    print(f"removed the store at {path}")


if __name__ == "__main__":
    main()
