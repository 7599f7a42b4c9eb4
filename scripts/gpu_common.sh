# Sourced by scripts/gpu_checks.sh and scripts/gpu_checks_quick.sh after they set OUT_DIR and
# BUDGET_S: the environment both run in, the timed `step` both use, and env.txt.
#   RESERVE_S   seconds of BUDGET_S kept for what runs after the steps (default 0)
#   MIN_STEP_S  a step is skipped when less than this is left (default 20)
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
mkdir -p "$OUT_DIR"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export LLMBENCH_HOME="$OUT_DIR/llmbench-home"
export LLMBENCH_DB="$OUT_DIR/results.db"
cd "$REPO"
T0=$(date +%s)

step() {  # step NAME TIMEOUT_S COMMAND... : stdout to NAME, stderr to NAME.err, a summary line
  local name="$1" limit="$2"; shift 2
  local t=$(date +%s)
  local left=$(( BUDGET_S - ${RESERVE_S:-0} - (t - T0) ))
  if [ "$left" -lt "${MIN_STEP_S:-20}" ]; then echo "[$(( t - T0 ))s] $name: skipped (time budget spent)"; return 0; fi
  [ "$limit" -gt "$left" ] && limit=$left
  timeout "$limit" "$@" > "$OUT_DIR/$name" 2> "$OUT_DIR/$name.err"
  local rc=$?
  echo "[$(( $(date +%s) - T0 ))s] $name: exit $rc in $(( $(date +%s) - t ))s"
  [ $rc -ne 0 ] && tail -3 "$OUT_DIR/$name.err"
  return 0
}

{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv 2>&1
  $PY -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0]); print(torch.cuda.get_device_name(0))"
} > "$OUT_DIR/env.txt" 2>&1
cat "$OUT_DIR/env.txt"
