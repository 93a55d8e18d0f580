#!/usr/bin/env bash
# Chapter 12's GPU measurements in one go, for a bare CUDA machine that has PyTorch (Triton optional)
# and no internet. Run from anywhere:
#
#     bash benchmarks/gpu_grid.sh [--grids-only] [--results DIR]
#
# It checks the kernels on the GPU (tests/test_flash.py; not with --grids-only), then runs the gpu,
# memory and decode grids of course_utils.bench, each under its own time limit (about 5 minutes in all
# on an H100/H200; the H200 took 58 s for gpu and 37 s for memory). Results:
# benchmarks/<gpu name>/{gpu,memory,decode}.{json,md,png}, or DIR/<gpu name>/... with --results; each
# grid saves its rows after every shape, so a grid cut off by its limit still leaves the rows it finished.
# `make gpu-check` (benchmarks/gpu_check.py) runs the notebooks and tests first, then this with
# --grids-only; if $GPU_GRID_STATUS names a file, each grid appends "name<TAB>exit code<TAB>seconds<TAB>limit".
#
# If $OUT is set (a runner that copies back only a few files), the results go to a scratch folder
# instead and $OUT receives three files: gpu_results.tar.gz (unpack with
# `tar -xzf gpu_results.tar.gz -C benchmarks/`), gpu_grid.log and summary.md (the three tables).
set -uo pipefail

cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1

GRIDS_ONLY=0
RESULTS_ARG=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --grids-only) GRIDS_ONLY=1; shift ;;
        --results) RESULTS_ARG=$2; shift 2 ;;
        *) echo "usage: bash benchmarks/gpu_grid.sh [--grids-only] [--results DIR]" >&2; exit 2 ;;
    esac
done

if [[ -n "$RESULTS_ARG" ]]; then
    RESULTS=$RESULTS_ARG
    mkdir -p "$RESULTS"
    LOG="$RESULTS/gpu_grid.log"
elif [[ -n "${OUT:-}" ]]; then
    RESULTS=$(mktemp -d)
    LOG="$OUT/gpu_grid.log"
else
    RESULTS=benchmarks
    LOG=benchmarks/gpu_grid.log
fi

run() {  # run NAME LIMIT_SECONDS COMMAND...: a step that fails or times out is reported, the rest go on
    local name=$1 limit=$2; shift 2
    echo; echo "### $* (limit ${limit}s)"
    local start=$SECONDS
    timeout --signal=INT --kill-after=15 "$limit" "$@"
    local code=$?
    echo "### exit code $code after $((SECONDS - start)) s"
    [[ $code -eq 124 ]] && echo "### TIME LIMIT REACHED: the results of this step are partial"
    if [[ -n "${GPU_GRID_STATUS:-}" ]]; then
        printf '%s\t%s\t%s\t%s\n' "$name" "$code" "$((SECONDS - start))" "$limit" >> "$GPU_GRID_STATUS"
    fi
    return 0
}

{
    echo "gpu_grid.sh started $(date -u '+%Y-%m-%d %H:%M:%S UTC') in $(pwd)"
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv || true
    if ! "$PY" -c "import torch; assert torch.cuda.is_available(), 'torch sees no CUDA GPU'; \
print('torch', torch.__version__, 'CUDA', torch.version.cuda, torch.cuda.get_device_name())"; then
        echo "no usable CUDA GPU: nothing measured"; exit 1
    fi
    "$PY" -c "import triton; print('triton', triton.__version__)" || echo "triton missing: flash-triton rows will say so"

    # Correctness first: our kernels against fp64 references on the GPU (and the CPU tests, among them
    # the sm_90/sm_80 compiles, 1-2 minutes on a laptop's CPU).
    if [[ $GRIDS_ONLY -eq 0 ]]; then
        run tests 240 "$PY" -m pytest -q -p no:cacheprovider --noconftest -o addopts="" tests/test_flash.py
    fi
    run gpu 150 "$PY" -m course_utils.bench --grid gpu --out "$RESULTS"
    run memory 90 "$PY" -m course_utils.bench --grid memory --out "$RESULTS"
    run decode 75 "$PY" -m course_utils.bench --grid decode --out "$RESULTS"
    echo; echo "gpu_grid.sh finished $(date -u '+%H:%M:%S UTC'), ${SECONDS} s in all"
} 2>&1 | tee "$LOG"
status=${PIPESTATUS[0]}

if [[ -n "${OUT:-}" && -z "$RESULTS_ARG" ]]; then
    tar -czf "$OUT/gpu_results.tar.gz" -C "$RESULTS" .
    cat "$RESULTS"/*/*.md > "$OUT/summary.md" 2>/dev/null || echo "no tables were written" > "$OUT/summary.md"
    echo "packed $(find "$RESULTS" -type f | wc -l) files into $OUT/gpu_results.tar.gz"
fi
exit "$status"
