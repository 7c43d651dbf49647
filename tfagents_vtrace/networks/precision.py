"""The conv torsos' arithmetic: ``cnn_compute_dtype`` "auto", "float32" or "bfloat16".

"auto" (the default) picks bfloat16 only where the hardware computes it natively, float32
elsewhere (:func:`bf16_native`): on a CPU without AVX-512 BF16 or AMX, oneDNN emulates
bfloat16 and the shipped Pong configs ran several times slower than in float32
(docs/results/pong.md, "The configs' ``--cnn_compute_dtype=auto``"). The choice is made where
a network is built, never stored: a run directory moved to another machine resolves again.

:func:`cpu_learner_warnings`: the settings of a conv torso's learner that made the Pong
config's update several times slower per agent step on a CPU than the defaults
(``benchmarks/learner_cost.py``; docs/results/pong.md, "The learner on AVX2-only CPUs"),
which a run names when it starts.
"""

from __future__ import annotations

CNN_COMPUTE_DTYPES = ("auto", "float32", "bfloat16")
# CPU flags (as /proc/cpuinfo names them) with native bfloat16 arithmetic.
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
# The ISA flags that decide the conv torsos' speed, as the benchmarks print them.
ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
# Lowest GPU compute capability with native bfloat16 (NVIDIA Ampere).
BF16_GPU_CAPABILITY = (8, 0)
# TF_ENABLE_ONEDNN_OPTS values that turn TensorFlow's oneDNN kernels off (it reads a bool).
ONEDNN_OFF = ("0", "false")


def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str] | None:
    """The CPU's feature flags from the first ``flags`` line of ``path``; None when the file
    is unreadable or has none (macOS, Windows: no /proc/cpuinfo)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        return None
    return None


def gpu_compute_capabilities() -> list[tuple[int, int]]:
    """Compute capability ``(major, minor)`` of each GPU TensorFlow sees (``(0, 0)`` when
    the device does not report one)."""
    import tensorflow as tf

    out = []
    for device in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(device)
        out.append(tuple(details.get("compute_capability") or (0, 0)))
    return out


def bf16_native(flags=None, gpus=None) -> tuple[bool, str]:
    """Whether this machine computes bfloat16 natively, and why (one short phrase).

    A visible GPU of compute capability >= 8.0 does; else a CPU whose flags hold
    ``avx512_bf16`` or ``amx_bf16``. ``flags`` and ``gpus``: callables returning the CPU
    flags (None: unknown) and the GPUs' compute capabilities; None: :func:`cpu_flags` and
    :func:`gpu_compute_capabilities`, looked up when called (tests inject or monkeypatch).
    """
    capabilities = list((gpus or gpu_compute_capabilities)())
    for cc in capabilities:
        if tuple(cc) >= BF16_GPU_CAPABILITY:
            return True, f"GPU of compute capability {cc[0]}.{cc[1]}"
    gpu = ""
    if capabilities:
        major, minor = max(capabilities)
        gpu = f"GPU of compute capability {major}.{minor} (< 8.0), "
    found = (flags or cpu_flags)()
    if found is None:
        return False, f"{gpu}CPU flags unknown (no readable /proc/cpuinfo)"
    native = [f for f in BF16_CPU_FLAGS if f in found]
    if native:
        return True, f"CPU has {native[-1]}"
    return False, f"{gpu}CPU has neither {' nor '.join(BF16_CPU_FLAGS)}"


def compute_dtype_choice(value: str, flags=None, gpus=None) -> tuple[str, str]:
    """``(dtype, reason)``: "float32" or "bfloat16" for ``cnn_compute_dtype`` ``value``, and
    the reason ("auto: CPU has amx_bf16", "set explicitly"); ``flags``, ``gpus``: as
    :func:`bf16_native`'s."""
    if value not in CNN_COMPUTE_DTYPES:
        raise ValueError(
            f"cnn_compute_dtype: expected one of {CNN_COMPUTE_DTYPES}, received {value!r}"
        )
    if value != "auto":
        return value, "set explicitly"
    native, why = bf16_native(flags, gpus)
    return ("bfloat16" if native else "float32"), f"auto: {why}"


def resolve_compute_dtype(value: str, flags=None, gpus=None) -> str:
    """ "float32" or "bfloat16" for ``cnn_compute_dtype`` ``value`` ("auto": bfloat16 where
    :func:`bf16_native`, else float32; the others pass through).

    Raises:
      ValueError: naming cnn_compute_dtype, for any other value.
    """
    return compute_dtype_choice(value, flags, gpus)[0]


def cpu_learner_warnings(
    value: str, jit_compile: bool, flags=None, gpus=None, environ=None
) -> list[str]:
    """One line for each setting of a conv torso's learner on a CPU that the measurements
    found several times slower per agent step than the defaults (the Pong config's update,
    docs/results/pong.md, "The learner on AVX2-only CPUs"): XLA (``jit_compile``), oneDNN
    turned off (``TF_ENABLE_ONEDNN_OPTS`` in ``environ``, default ``os.environ``), and
    bfloat16 forced (``value``, the ``cnn_compute_dtype`` setting) where the CPU does not
    compute it natively. None where a GPU is visible (not measured). ``flags``, ``gpus``: as
    :func:`bf16_native`'s."""
    import os

    if list((gpus or gpu_compute_capabilities)()):
        return []
    environ = os.environ if environ is None else environ
    lines = []
    if jit_compile:
        lines.append(
            "warning: jit_compile on a CPU: XLA's CPU convolutions made the Pong learner's "
            "update 20x slower per agent step than TensorFlow's oneDNN kernels "
            "(docs/results/pong.md); --nojit_compile runs it without XLA"
        )
    if environ.get("TF_ENABLE_ONEDNN_OPTS", "").strip().lower() in ONEDNN_OFF:
        lines.append(
            "warning: TF_ENABLE_ONEDNN_OPTS=0: TensorFlow's own convolution kernels made the "
            "Pong learner's update 2.2x slower per agent step than oneDNN's "
            "(docs/results/pong.md); unset it"
        )
    if value == "bfloat16" and not bf16_native(flags, gpus)[0]:
        lines.append(
            "warning: cnn_compute_dtype=bfloat16 on a CPU without avx512_bf16 or amx_bf16: "
            "the Pong learner's update took 1.8x (AVX-512) to 7.3x (AVX2) the time of "
            "float32 per agent step (docs/results/pong.md); --cnn_compute_dtype=auto picks "
            "float32 here"
        )
    return lines
