"""The machine a benchmark ran on, printed first by every benchmark that quotes a speed.

The conv torsos' speed depends on the CPU's ISA more than on its clock: bfloat16 is native
with AVX-512 BF16 or AMX and emulated (several times slower than float32) on an AVX2-only
CPU (issue #35). ``machine_line()``::

    machine: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz, 2 cores (2 usable); avx2 yes,
    avx512f yes, avx512_bf16 yes, amx_bf16 yes; cnn_compute_dtype auto -> bfloat16
    (auto: CPU has amx_bf16)

(one line). ``tfagents_vtrace.networks.precision`` is loaded from its file, so a benchmark
that runs its systems in subprocesses does not import TensorFlow for it; GPUs are queried
only when TensorFlow is already imported.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _precision():
    name = "tfagents_vtrace.networks.precision"
    if name in sys.modules:
        return sys.modules[name]
    path = os.path.join(ROOT, "tfagents_vtrace", "networks", "precision.py")
    spec = importlib.util.spec_from_file_location("_bench_precision", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cpu_model(path: str = "/proc/cpuinfo") -> str:
    """The first ``model name`` of ``path``; ``platform.processor()`` (or "unknown CPU")
    without one."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine_info() -> dict:
    """CPU model, core counts, the ISA flags that decide the conv torsos' speed (None:
    unknown, no readable /proc/cpuinfo) and what ``cnn_compute_dtype="auto"`` resolves to."""
    precision = _precision()
    flags = precision.cpu_flags()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    gpus = None if "tensorflow" in sys.modules else list  # no TF import for the line
    dtype, why = precision.compute_dtype_choice("auto", gpus=gpus)
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "isa": {f: None if flags is None else f in flags for f in precision.ISA_FLAGS},
        "cnn_compute_dtype_auto": dtype,
        "cnn_compute_dtype_reason": why,
    }


def machine_line(info: dict | None = None) -> str:
    """``info`` (default :func:`machine_info`) as the one line the module docstring shows."""
    info = info or machine_info()
    usable = f" ({info['usable_cores']} usable)" if info["usable_cores"] else ""
    word = {True: "yes", False: "no", None: "unknown"}
    isa = ", ".join(f"{f} {word[v]}" for f, v in info["isa"].items())
    return (
        f"machine: {info['cpu']}, {info['cores']} cores{usable}; {isa}; cnn_compute_dtype "
        f"auto -> {info['cnn_compute_dtype_auto']} ({info['cnn_compute_dtype_reason']})"
    )


if __name__ == "__main__":
    print(machine_line())
