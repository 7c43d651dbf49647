"""A run's counters: environment steps, updates, episodes, environment restarts and wall time.

As Acme's ``Counter`` (``acme/utils/counting.py``), one object counts for the whole run and
is shared by whoever acts: the driver's thread, actor threads or asynchronous workers report
to it (thread-safe) and the driver reads it for rows and checkpoints. The four counts and the
wall time are restored from and saved with every checkpoint, so they continue across resumes;
the episode statistics (the last 100 returns and lengths) and the policy lag are kept only
between two metrics rows of one process.
"""

from __future__ import annotations

import collections
import threading
import time

import numpy as np

COUNTS = ("env_steps", "updates", "episodes", "env_restarts")
"""The checkpointed counts (with ``wall_time``)."""


class Counters:
    """The run's counts, episode statistics and wall clock (module docstring).

    Args:
      restored: values of :data:`COUNTS` and ``wall_time`` from a checkpoint (missing: 0).
      start_time: ``time.time()`` when the process started (wall time counts from it).
    """

    def __init__(self, restored: dict | None = None, start_time: float | None = None):
        restored = restored or {}
        self.lock = threading.Lock()
        self.env_steps, self.updates, self.episodes, self._restarts_base = (
            int(restored.get(name, 0)) for name in COUNTS
        )
        self.wall_offset = float(restored.get("wall_time", 0.0))
        self.start_time = time.time() if start_time is None else start_time
        self.returns: collections.deque = collections.deque(maxlen=100)
        self.lengths: collections.deque = collections.deque(maxlen=100)
        self.actor_restarts: dict = {}  # actor id -> restarts it reported in this process
        self._lag: list = []

    def add(self, steps: int = 0, updates: int = 0, info: dict | None = None, lag=None) -> None:
        """Counts ``steps`` and ``updates``; ``info`` is an actor's unroll info (finished
        episodes' ``episode_returns`` / ``episode_lengths``, and its ``actor_id`` with its
        ``env_restarts`` so far); ``lag`` the policy lag of the data of one update."""
        with self.lock:
            self.env_steps += int(steps)
            self.updates += int(updates)
            if info is not None:
                self.returns.extend(np.asarray(info["episode_returns"]).tolist())
                self.lengths.extend(np.asarray(info["episode_lengths"]).tolist())
                self.episodes += len(info["episode_returns"])
                # The maximum: a Ray pool counts a replaced process at once, while unrolls
                # its predecessor sent (with the lower count) may still be queued.
                actor_id = info.get("actor_id", 0)
                restarts = int(info.get("env_restarts", 0))
                self.actor_restarts[actor_id] = max(self.actor_restarts.get(actor_id, 0), restarts)
            if lag is not None:
                self._lag.append(float(lag))

    @property
    def env_restarts(self) -> int:
        return self._restarts_base + sum(self.actor_restarts.values())

    def wall_time(self) -> float:
        """Seconds since the run's first start (imports included), across resumes."""
        return self.wall_offset + time.time() - self.start_time

    def snapshot(self) -> dict:
        """The checkpointed values, read together: :data:`COUNTS` and ``wall_time``."""
        with self.lock:
            values = {name: int(getattr(self, name)) for name in COUNTS}
        return {**values, "wall_time": self.wall_time()}

    def row(self) -> dict:
        """A metrics row's counting fields; the policy lag restarts with the next row."""
        with self.lock:
            row = {
                "episode_return": _mean(self.returns),
                "episode_length": _mean(self.lengths),
                "episodes": int(self.episodes),
                "updates": int(self.updates),
                "env_restarts": int(self.env_restarts),
                "policy_lag": _mean(self._lag) or 0.0,
                **_lag_quantiles(self._lag),
            }
            self._lag = []
        return row


def _lag_quantiles(lags: list) -> dict:
    """``policy_lag_p50/_p95/_max`` of the row's updates (updates between the weights that
    acted and the update that learns from the data; None without updates in the row)."""
    if not lags:
        return {"policy_lag_p50": None, "policy_lag_p95": None, "policy_lag_max": None}
    p50, p95 = np.percentile(lags, [50, 95])
    return {
        "policy_lag_p50": float(p50),
        "policy_lag_p95": float(p95),
        "policy_lag_max": float(np.max(lags)),
    }


def _mean(values) -> float | None:
    return float(np.mean(values)) if len(values) else None
