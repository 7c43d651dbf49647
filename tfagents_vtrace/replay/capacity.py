"""Whether a replay of a given capacity fits in this machine's memory, checked before a run.

A replay grows to its capacity (ACER's episodic replay as episodes arrive; TAAC's ring
buffers are allocated whole when the run starts), so a capacity whose transitions cannot fit
in memory ends a run, hours in or at once, when memory runs out. :func:`check_fits` refuses
it up front, in one line naming the setting: the bytes one transition takes (from the
environment's observation and action spaces, as the replay stores them) times the capacity,
against the machine's physical memory (``os.sysconf("SC_PHYS_PAGES") *
os.sysconf("SC_PAGE_SIZE")``, or a container's lower cgroup limit). The estimate counts the
arrays only, so it is a lower bound: a refused capacity can never fit, an accepted one may
still need more than the machine has beside the rest of the run.
"""

from __future__ import annotations

import contextlib
import math
import os
from typing import Any

import numpy as np

# A container's memory limit: cgroup v2, then v1 ("max" or a huge number: no limit).
_CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def machine_memory() -> int | None:
    """Bytes of memory this process may use: the physical memory, or the cgroup's limit when
    lower; None when neither can be read."""
    total = None
    with contextlib.suppress(ValueError, OSError, AttributeError):
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    for path in _CGROUP_LIMITS:
        with contextlib.suppress(OSError, ValueError):
            with open(path) as f:
                limit = int(f.read().strip())
            if total is None or 0 < limit < total:
                total = limit
    return total if total and total > 0 else None


def space_bytes(space: Any) -> int:
    """Bytes of one value of a gymnasium ``space`` as numpy holds it: every leaf of a
    ``Dict`` / ``Tuple`` (its shape times its dtype's size; ``Discrete``: one int64)."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Dict):
        return sum(space_bytes(s) for s in space.spaces.values())
    if isinstance(space, gym.spaces.Tuple):
        return sum(space_bytes(s) for s in space.spaces)
    dtype = np.dtype(space.dtype if space.dtype is not None else np.int64)
    return int(math.prod(space.shape or ())) * dtype.itemsize


def human_bytes(n: float) -> str:
    """``n`` bytes as ``"12.3 GB"`` (powers of 1000)."""
    for unit in ("bytes", "KB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1000 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def check_fits(
    name: str,
    capacity: int,
    step_bytes: int,
    what: str,
    memory: int | None = None,
    unit: str = "transitions",
) -> None:
    """Raises ``ValueError("name: ...")`` (one line with the estimate) when ``capacity``
    transitions of ``step_bytes`` each need more than ``memory`` (default:
    :func:`machine_memory`; unknown: nothing is checked).

    Args:
      name: the setting (its flag's name), e.g. ``"replay_capacity"``.
      what: what one transition holds, for the message (e.g. ``"Pendulum-v1's observation,
        action, reward and policy"``).
      unit: what ``capacity`` counts, for the message.
    """
    memory = machine_memory() if memory is None else memory
    need = int(capacity) * int(step_bytes)
    if memory is None or step_bytes <= 0 or need <= memory:
        return
    fits = memory // step_bytes
    raise ValueError(
        f"{name}: {capacity} {unit} need at least {human_bytes(need)} ({step_bytes} "
        f"bytes each: {what}), more than this machine's memory ({human_bytes(memory)}); "
        f"expected at most {fits} {unit}"
    )


def env_spaces(env_id: str, env_kwargs: dict | None = None) -> tuple[Any, Any] | None:
    """``(observation_space, action_space)`` of one ``env_id`` environment, or None when it
    cannot be made (the run's own checks then report that environment's problem)."""
    from tfagents_vtrace.envs import env_spaces

    try:
        return tuple(env_spaces(env_id, env_kwargs))
    except Exception:  # noqa: BLE001 - reported where the environment is checked
        return None
