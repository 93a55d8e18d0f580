"""The command line: ``python -m course_utils.bench``, ``course bench``, ``make bench``."""

from __future__ import annotations

import argparse
import sys

import torch

from .. import env
from .decode import run_decode_benchmark
from .grids import make_grid, run_grid
from .methods import METHODS
from .results import default_results_dir, format_table, save_results

__all__ = ["GRIDS", "main"]

GRIDS = ("cpu", "gpu", "memory", "decode")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.bench",
        description="Attention benchmarks of chapter 12: time, TFLOP/s and peak memory of naive attention, "
        "PyTorch's SDPA backends and our FlashAttention; decoding with and without a KV cache.",
    )
    parser.add_argument(
        "--grid",
        choices=(*GRIDS, "all"),
        default="all",
        help="cpu: fp32 sweep on the CPU; gpu: bf16 sweep on CUDA; memory: n doubles; "
        "decode: KV cache on/off; all: every grid this machine can run (default)",
    )
    parser.add_argument(
        "--out",
        default=str(default_results_dir()),
        help="folder for <device>/<grid>.json, .md and .png (default: the repository's benchmarks/)",
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for tests (seconds)")
    parser.add_argument("--device", default=None, help="device of the memory and decode grids (default: GPU if any)")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for PyTorch (default: leave as is)")
    parser.add_argument(
        "--methods", default=None, help=f"comma-separated subset of the attention methods: {','.join(METHODS)}"
    )
    parser.add_argument("--no-plot", action="store_true", help="write json and md only")
    return parser


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``course bench`` / ``make bench``. Returns the process exit code."""
    args = _parser().parse_args(argv)
    if args.threads is not None:
        if args.threads < 1:
            return _error(f"--threads must be at least 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    methods = None
    if args.methods:
        methods = [m.strip() for m in args.methods.split(",") if m.strip()]
        unknown = [m for m in methods if m not in METHODS]
        if unknown:
            return _error(f"unknown method(s) {unknown}; choose from {list(METHODS)}")
    has_gpu = env.has_cuda()
    if args.grid == "all":
        grids = ["gpu", "memory", "decode"] if has_gpu else ["cpu", "memory", "decode"]
    else:
        grids = [args.grid]
    if "gpu" in grids and not has_gpu:
        return _error(
            "the gpu grid needs a CUDA GPU and none is visible here; run `--grid cpu` instead, "
            "or benchmarks/gpu_grid.sh on a GPU machine"
        )
    device = None
    if args.device is not None:
        try:
            device = torch.device(args.device)
        except RuntimeError:
            return _error(f"--device {args.device!r} is not a device name (cpu, cuda, cuda:1...)")
        if device.type == "cuda" and not torch.cuda.is_available():
            return _error(f"--device {args.device} was asked for but no CUDA GPU is visible")

    for name in grids:
        print(f"== grid {name}{' (quick)' if args.quick else ''} ==", flush=True)
        if name == "decode":
            results = run_decode_benchmark(device, quick=args.quick)
        else:
            grid = make_grid(name, device, quick=args.quick)
            if methods:
                grid.methods = methods
            results = run_grid(grid, checkpoint=lambda partial: save_results(partial, args.out, plot=False))
        paths = save_results(results, args.out, plot=not args.no_plot)
        print()
        print(format_table(results))
        print("wrote " + ", ".join(str(p) for p in paths.values()), flush=True)
    return 0
