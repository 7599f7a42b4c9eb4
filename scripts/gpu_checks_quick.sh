#!/usr/bin/env bash
# The GPU checks that fit one short device session (one NVIDIA GPU, at most ~7 minutes: BUDGET_S=420
# caps the whole script, each step has its own timeout, a failing step does not stop the others):
#
#   bash scripts/gpu_checks_quick.sh [OUT_DIR]     # default: $OUT, else /tmp/llmbench-gpu-quick
#
#   env.txt               nvidia-smi, torch, python
#   cuda_tests.txt        pytest of the requires_cuda tests (this torch, this GPU)
#   ceilings.json         GEMM TFLOP/s per precision and device copy GB/s (memory efficiency bound)
#   train_gpt2xl.json     GPT-2 XL pre-training, bf16, batch 8 x 1024: MFU, peak memory, and the
#                         prediction of the same workload beside it (state bytes, step time)
#   stream_small.json     stream compare, GPT-2 small, batch 8 x 256 (issue 19: streamed/resident,
#                         resident side against measure train)
#   stream_medium.json    stream compare, GPT-2 medium, batch 16 x 256 (4,096 tokens a step)
#   train_small.json      measure train, GPT-2 small, batch 8 x 256 (the resident side's reference)
#   infer_gpt2xl.json     GPT-2 XL prefill and KV-cache decode, batch 1 and 16, bf16
#   serve_rt_R.json, serve_sim_R.json   measure serve (the runtime) and serve (the simulator) at R/s
# The summary at the end prints the figures the issues ask for.
set -u
OUT_DIR="${1:-${OUT:-${TMPDIR:-/tmp}/llmbench-gpu-quick}}"
BUDGET_S="${BUDGET_S:-420}"
MIN_STEP_S=15
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"

M="$PY -m llmbench measure"
HW=$($PY -c "import torch; from llmbench.point import hardware_for_device as h; print(h('cuda', torch.cuda.get_device_name(0)))" 2>/dev/null)
echo "catalog hardware: $HW"
step cuda_tests.txt 60 $PY -m pytest -q -x -m requires_cuda tests/test_measure_cuda.py
step ceilings.json 60 $M ceilings --device cuda --model gpt2-xl --batch 8 --seq 1024 --repeats 5 --json --no-record
step train_gpt2xl.json 60 $M train --model gpt2-xl --batch 8 --seq 1024 --precision bf16 --steps 8 --warmup-steps 3 --device cuda --json --no-record
step train_small.json 40 $M train --model gpt2-small --batch 8 --seq 256 --precision bf16 --steps 10 --warmup-steps 3 --device cuda --json --no-record
step stream_small.json 60 $PY -m llmbench stream compare --model gpt2-small --batch 8 --seq 256 --precision bf16 --steps 10 --warmup-steps 3 --device cuda --json
step stream_medium.json 70 $PY -m llmbench stream compare --model gpt2-medium --batch 16 --seq 256 --precision bf16 --steps 8 --warmup-steps 2 --device cuda --json
step infer_gpt2xl.json 40 $M infer --model gpt2-xl --batch 1,16 --seq 512 --gen-len 64 --precision bf16 --device cuda --json --no-record
for R in 8 64; do
  step serve_rt_$R.json 35 $M serve --model gpt2-small --device cuda --rate $R --requests 200 --prompt-len 256 --output-len 64 --max-num-seqs 64 --json --no-record
  step serve_sim_$R.json 20 $PY -m llmbench serve --model gpt2-small --hardware "$HW" --engine vllm --policy continuous --rate $R --requests 200 --prompt-len 256 --output-len 64 --max-num-seqs 64 --json
done

$PY - "$OUT_DIR" <<'PYEOF'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
def load(name):
    try:
        return json.loads((out / name).read_text())
    except Exception as e:
        print(f"{name}: unreadable ({type(e).__name__})")
        return None
def first(d):
    return d[0] if isinstance(d, list) and d else d
c = first(load("ceilings.json"))
if c:
    print("ceilings:", json.dumps(c.get("metrics", c))[:900])
for name in ("train_gpt2xl.json", "train_small.json"):
    r = first(load(name))
    if r:
        m, p = r.get("metrics", {}), r.get("prediction") or {}
        print(f"{name}: {r.get('status')} {r.get('error') or ''} tokens/s {m.get('tokens_per_s')} mfu {m.get('mfu')} "
              f"peak_mem {m.get('peak_mem_bytes')}; predicted tokens/s {p.get('tokens_per_s')} "
              f"(error {p.get('tokens_per_s_error')}), peak_mem {p.get('peak_mem_bytes')}; "
              f"state: {json.dumps({k: v for k, v in p.items() if 'state' in k or k.endswith('_error')})[:500]}")
for name in ("stream_small.json", "stream_medium.json"):
    r = load(name)
    if r:
        print(f"{name}: {json.dumps(r)[:1200]}")
r = load("infer_gpt2xl.json")
if r:
    for x in (r if isinstance(r, list) else [r]):
        m = x.get("metrics", {})
        print(f"infer gpt2-xl batch {x.get('workload', {}).get('batch')}: {x.get('status')} decode tok/s/seq "
              f"{m.get('decode_tokens_per_s_per_seq')} prefill tok/s {m.get('prefill_tokens_per_s')} ttft {m.get('time_to_first_token_s')}")
KEYS = ("median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "request_throughput", "output_throughput")
for R in (8, 64):
    a, b = load(f"serve_rt_{R}.json"), load(f"serve_sim_{R}.json")
    if a and b:
        print(f"serving rate {R}/s, runtime vs simulator:")
        for k in KEYS:
            x, y = a.get(k), b.get(k)
            print(f"  {k:<20} runtime {x!s:>10.10}  simulator {y!s:>10.10}  sim/real {y / x:.2f}" if x and y else f"  {k}: {x} {y}")
PYEOF
echo "total $(( $(date +%s) - T0 ))s; results in $OUT_DIR"
