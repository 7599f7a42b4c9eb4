#!/usr/bin/env bash
# FSDP2 + activation checkpointing at bf16 on CUDA (issue 13, step 6): GPT-2 XL and GPT-3 2.7B,
# tokens/s and MFU against the datasheet. Written for one H200 (at most 6 minutes: BUDGET_S=360
# caps the whole script, each step has its own timeout); NPROC=N runs the same on N GPUs of a node.
#
#   bash scripts/gpu_checks_parallel.sh [OUT_DIR]          # default: $OUT, else /tmp/llmbench-gpu-parallel
#   NPROC=8 bash scripts/gpu_checks_parallel.sh            # 8 GPUs: the global batch grows with NPROC
#   SMOKE=1 DEVICE=cpu bash scripts/gpu_checks_parallel.sh # the same steps on a tiny model, on the CPU
#
# Each step runs `torchrun -m llmbench measure train --layout fsdp ... --json` and writes OUT_DIR/NAME.json
# (the result with its workload, metrics, and the prediction of the same workload beside it):
#   gpt2xl_zero3_selective_bf16.json          GPT-2 XL, FSDP2 (zero 3), selective recompute, eager
#   gpt3-2.7b_zero3_full_bf16.json            GPT-3 2.7B, FSDP2, full recompute, eager
#   gpt2xl_zero3_selective_bf16_compile.json  GPT-2 XL as above with torch.compile per block
#   gpt3-2.7b_zero3_selective_bf16_compile.json  GPT-3 2.7B, selective, compile, 2 micro-batches of 4
#   gpt2xl_auto_bf16.json                     GPT-2 XL, --layout auto: the planner's layout for these GPUs
# Aims (issue 13): GPT-2 XL MFU >= 50%, the 2.7B FSDP2 + checkpointing run >= 45% (model FLOPs:
# recomputation not counted; `executed_tflops` in the JSON counts it). A failing step does not stop
# the others; the summary at the end prints one line per JSON: MFU against the datasheet and the
# measured tokens/s against the prediction.
set -u
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="${1:-${OUT:-${TMPDIR:-/tmp}/llmbench-gpu-parallel}}"
PY="${PYTHON:-python3}"
NPROC="${NPROC:-1}"
DEVICE="${DEVICE:-cuda}"
BUDGET_S="${BUDGET_S:-360}"
mkdir -p "$OUT_DIR"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export LLMBENCH_HOME="$OUT_DIR/llmbench-home"
cd "$REPO"
T0=$(date +%s)

# SMOKE=1: a 2-layer, width-64 GPT (a config.json written here) with a small batch; the options
# given last win.
SMOKE_ARGS=()
if [ "${SMOKE:-0}" = 1 ]; then
  echo '{"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 256, "n_positions": 2048}' \
    > "$OUT_DIR/tiny-config.json"
  SMOKE_ARGS=(--model "$OUT_DIR/tiny-config.json" --seq 32 --steps 2 --warmup-steps 1)
fi

step() {  # step NAME TIMEOUT_S MICRO_BATCH ARGS... : OUT_DIR/NAME.json, stderr to NAME.err (LAST_ARGS: options that win)
  local name="$1" limit="$2" mb="$3"; shift 3
  local t=$(date +%s)
  local left=$(( BUDGET_S - (t - T0) ))
  if [ "$left" -lt 30 ]; then echo "[$(( t - T0 ))s] $name: skipped (time budget spent)"; return 0; fi
  [ "$limit" -gt "$left" ] && limit=$left
  local batch=$(( mb * NPROC * ${GRAD_ACCUM:-1} ))
  [ "${SMOKE:-0}" = 1 ] && batch=$(( 2 * NPROC * ${GRAD_ACCUM:-1} )) && mb=2
  timeout "$limit" "$PY" -m torch.distributed.run --standalone --nproc-per-node "$NPROC" \
    -m llmbench measure train "$@" --device "$DEVICE" --precision bf16 --db "$OUT_DIR/results.db" \
    --batch "$batch" --micro-batch "$mb" "${SMOKE_ARGS[@]}" ${LAST_ARGS:-} --json > "$OUT_DIR/$name.json" 2> "$OUT_DIR/$name.err"
  local rc=$?
  echo "[$(( $(date +%s) - T0 ))s] $name: exit $rc in $(( $(date +%s) - t ))s"
  [ $rc -ne 0 ] && grep -v "^\*\|OMP_NUM_THREADS" "$OUT_DIR/$name.err" | tail -3
  return 0
}

{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1
  "$PY" -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])"
} > "$OUT_DIR/env_parallel.txt" 2>&1
cat "$OUT_DIR/env_parallel.txt"

step gpt2xl_zero3_selective_bf16 75 16 --model gpt2-xl --seq 1024 --layout fsdp --recompute selective \
  --steps 6 --warmup-steps 3
step gpt3-2.7b_zero3_full_bf16 75 8 --model gpt3-2.7b --seq 2048 --layout fsdp --recompute full \
  --steps 5 --warmup-steps 2
step gpt2xl_zero3_selective_bf16_compile 120 16 --model gpt2-xl --seq 1024 --layout fsdp --recompute selective \
  --steps 6 --warmup-steps 3 --compile
GRAD_ACCUM=2 step gpt3-2.7b_zero3_selective_bf16_compile 120 4 --model gpt3-2.7b --seq 2048 --layout fsdp \
  --recompute selective --steps 5 --warmup-steps 2 --compile
# the planner's fastest layout that fits these GPUs (--layout auto; micro-batch 16 given, the rest chosen);
# the planner needs the precision's peak: the CPU catalog entry has fp32 only
LAST_ARGS="$([ "$DEVICE" = cpu ] && echo --precision fp32)" step gpt2xl_auto_bf16 75 16 --model gpt2-xl --seq 1024 --layout auto --steps 5 --warmup-steps 2

"$PY" - "$OUT_DIR"/gpt*.json <<'PYEOF'
import json, sys, os
for path in sys.argv[1:]:
    try:
        r = json.loads(open(path).read())
        w, m, p = r["workload"], r["metrics"], r.get("prediction") or {}
        lay = w["layout"]
        mfu = "-" if m.get("mfu") is None else f"{m['mfu']:.1%}"
        pred = "-" if p.get("tokens_per_s_error") is None else f"{p['tokens_per_s']:,.0f} ({p['tokens_per_s_error']:+.0%})"
        if r.get("auto"):
            print(f"{os.path.basename(path)}: --layout auto chose {r['auto']['layout']}")
        print(f"{os.path.basename(path)}: {r['status']} {w['model']} tp{lay['tp']} zero{lay['zero']} "
              f"{lay['recompute']} micro {w['micro_batch']} x accum {w['grad_accum']} x {w['devices']}: "
              f"{m.get('tokens_per_s', 0):,.0f} tokens/s, MFU {mfu} (datasheet), predicted {pred}; "
              f"peak {m.get('peak_mem_bytes', 0) / 2**30:.1f} GiB {r.get('error') or ''}")
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"{os.path.basename(path)}: no result ({type(e).__name__}: {e})")
PYEOF
echo "total $(( $(date +%s) - T0 ))s; results in $OUT_DIR"
