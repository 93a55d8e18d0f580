"""The machine a measurement ran on: its name, a folder name for its results, its datasheet peak."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import re

import torch

from .. import env

__all__ = [
    "device_name",
    "slugify",
    "peak_tflops",
    "half_dtype",
    "math_sdp_reduced_precision",
    "machine_info",
    "load_average",
    "default_device",
]

_BF16_FP16 = (torch.bfloat16, torch.float16)
# Dense (no sparsity) 16-bit tensor-core peaks from NVIDIA's datasheets, TFLOP/s, and the dtypes they
# hold for. The first name contained in the device name wins, so the more specific names come first
# ("NVIDIA H100 NVL" must not fall through to "H100"; its dense bf16 peak is half of the 1,671 with
# sparsity). Pre-Ampere GPUs (V100, T4) have fp16 tensor cores and no bf16 ones.
_PEAK_TFLOPS_16BIT = (
    ("H200", 989.0, _BF16_FP16),
    ("H100 NVL", 835.0, _BF16_FP16),
    ("H100 PCIe", 756.0, _BF16_FP16),
    ("H100", 989.0, _BF16_FP16),
    ("A100", 312.0, _BF16_FP16),
    ("V100-PCIE", 112.0, (torch.float16,)),
    ("V100", 125.0, (torch.float16,)),
    ("Tesla T4", 65.0, (torch.float16,)),
)


def default_device() -> torch.device:
    """The device of the memory and decode grids when none is named: the course's choice (a GPU if any)."""
    return env.get_device()


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return _cpu_name()


def slugify(name: str, is_gpu: bool) -> str:
    """Folder name for a device's results: ``"AMD EPYC 7B13 64-Core Processor"`` -> ``cpu-amd-epyc-7b13``,
    ``"NVIDIA H200"`` -> ``nvidia-h200``."""
    name = re.sub(r"\((R|TM|tm|r)\)|\bCPU\b|\bProcessor\b|@.*$|\d+-Core", " ", name)
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown"
    return slug if is_gpu else f"cpu-{slug}"


def peak_tflops(device: torch.device, dtype: torch.dtype) -> float | None:
    """The datasheet's dense bf16/fp16 peak of a known GPU, else ``None`` (CPU, fp32, unknown GPU)."""
    if device.type != "cuda" or dtype not in _BF16_FP16:
        return None
    name = device_name(device)
    for key, tflops, dtypes in _PEAK_TFLOPS_16BIT:
        if key in name:
            return tflops if dtype in dtypes else None
    return None


def half_dtype(device: torch.device | str) -> torch.dtype:
    """The 16-bit dtype to measure a GPU in: bf16 where its tensor cores have it (Ampere, sm80, and newer),
    else fp16 (V100, T4: there bf16 is emulated, and no fused SDPA kernel takes it). bf16 on a CPU."""
    device = torch.device(device)
    if (
        device.type == "cuda"
        and torch.cuda.is_available()
        and not torch.cuda.is_bf16_supported(including_emulation=False)
    ):
        return torch.float16
    return torch.bfloat16


def math_sdp_reduced_precision() -> bool:
    """Whether SDPA's math backend may compute fp16/bf16 inputs in their own precision.

    False by default (PyTorch 2.5 and newer): the math backend then upcasts fp16/bf16 to fp32, computes
    and stores its scores in fp32 and casts the output back, on CUDA and on the CPU alike.
    ``torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(True)`` turns it on.
    """
    return bool(torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed())


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (how busy the machine was), where the OS reports them."""
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def machine_info(device: torch.device) -> dict:
    """The facts stored next to every table: device, versions, threads, date, load at the start."""
    info = {
        "device": str(device),
        "device_name": device_name(device),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu": _cpu_name(),
        "cpu_threads": torch.get_num_threads(),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    if load_average() is not None:
        info["load_average_start"] = load_average()
    if device.type == "cuda":
        info["cuda"] = torch.version.cuda
        info["gpu_memory_gib"] = round(torch.cuda.get_device_properties(device).total_memory / 2**30, 1)
        major, minor = torch.cuda.get_device_capability(device)
        info["compute_capability"] = f"sm{major}{minor}"
        # False (the default): the sdpa-math rows computed bf16/fp16 inputs in fp32 (see math_sdp_reduced_precision).
        info["fp16_bf16_reduction_math_sdp_allowed"] = math_sdp_reduced_precision()
    try:
        import triton

        info["triton"] = triton.__version__
    except Exception:
        info["triton"] = None
    return info
