"""Sequence replay for TAAC: per-environment ring buffers, uniform windows of T steps.

Yu et al., "TAAC: Temporally Abstract Actor-Critic for Continuous Control", 2021,
https://arxiv.org/abs/2104.06521 trains on windows of consecutive steps so that the
compare-through return can run until the rollout or the current policy switches. Each
environment's column is a ring buffer of ``capacity // num_envs`` steps holding named fields
(observation, reward, step flags, rollout b and trajectories, ...), written one vector step
at a time with :meth:`SequenceReplay.add`. :meth:`SequenceReplay.sample` draws windows
uniformly over all ``(env, start)`` pairs whose ``length`` steps are stored contiguously
(a window may cross an episode boundary: the step flags inside it tell the learner where).
The buffer saves to and loads from a checksummed numpy archive
(:mod:`tfagents_vtrace.replay.storage`, no pickle).
"""

from __future__ import annotations

import numpy as np

from tfagents_vtrace.replay.storage import load_arrays, save_arrays

__all__ = ["SequenceReplay"]


class SequenceReplay:
    """Ring buffers ``[num_envs, capacity // num_envs, ...]`` of named fields.

    Args:
      specs: field name -> ``(shape_of_one_step, dtype)``.
      num_envs: B of the vector environment writing to the buffer.
      capacity: total steps kept (rounded down to a multiple of ``num_envs``).
    """

    def __init__(self, specs: dict, num_envs: int, capacity: int):
        if num_envs < 1:
            raise ValueError(f"num_envs: expected >= 1, received {num_envs}")
        if capacity < num_envs:
            raise ValueError(f"capacity: expected >= num_envs={num_envs}, received {capacity}")
        self.specs = {k: (tuple(int(d) for d in s), np.dtype(t)) for k, (s, t) in specs.items()}
        self.num_envs = int(num_envs)
        self.per_env = int(capacity) // self.num_envs
        self.data = {
            k: np.zeros((self.num_envs, self.per_env, *s), t) for k, (s, t) in self.specs.items()
        }
        self.pos = 0  # next write index (the same in every column)
        self.size = 0  # steps stored per column
        self.added = 0  # vector steps ever added

    @property
    def num_steps(self) -> int:
        """Steps stored over all environments."""
        return self.size * self.num_envs

    def __len__(self) -> int:
        return self.num_steps

    def add(self, step: dict) -> None:
        """Writes one vector step: each field ``[num_envs, *shape]``."""
        for key, (shape, _) in self.specs.items():
            value = np.asarray(step[key])
            if value.shape != (self.num_envs, *shape):
                raise ValueError(
                    f"step[{key!r}]: expected shape {[self.num_envs, *shape]}, received "
                    f"{list(value.shape)}"
                )
            self.data[key][:, self.pos] = value
        self.pos = (self.pos + 1) % self.per_env
        self.size = min(self.size + 1, self.per_env)
        self.added += 1

    def can_sample(self, length: int) -> bool:
        """Whether windows of ``length`` steps exist."""
        return self.size >= length

    def sample(self, batch_size: int, length: int, rng: np.random.Generator, num: int = 1) -> dict:
        """``num`` batches of ``batch_size`` windows, time-major: fields ``[num, length,
        batch_size, *shape]``, drawn uniformly (with replacement) over the stored windows.

        Raises:
          ValueError: fewer than ``length`` steps are stored per environment.
        """
        if not self.can_sample(length):
            raise ValueError(
                f"length: expected <= {self.size} stored steps per environment, received {length}"
            )
        count = num * batch_size
        env = rng.integers(0, self.num_envs, count)
        offset = rng.integers(0, self.size - length + 1, count)
        oldest = self.pos if self.size == self.per_env else 0
        # [length, count] buffer indices of each window, oldest step first.
        idx = (oldest + offset[None, :] + np.arange(length)[:, None]) % self.per_env
        out = {}
        for key, array in self.data.items():
            window = array[env[None, :], idx]  # [length, count, *shape]
            window = window.reshape(length, num, batch_size, *window.shape[2:])
            out[key] = np.swapaxes(window, 0, 1)
        return out

    def save(self, path: str) -> None:
        """Writes the stored steps (oldest first) to the ``.npz`` archive ``path``."""
        oldest = self.pos if self.size == self.per_env else 0
        order = (oldest + np.arange(self.size)) % self.per_env
        arrays = {key: array[:, order] for key, array in self.data.items()}
        meta = {"num_envs": self.num_envs, "per_env": self.per_env, "added": self.added}
        save_arrays(path, arrays, meta)

    def load(self, path: str) -> None:
        """Replaces the contents with the archive ``path`` (written by :meth:`save`).

        Raises:
          ReplayCorruptError: the archive fails its checksum.
          ValueError: its fields or shapes differ from this buffer's specs.
        """
        arrays, meta = load_arrays(path)
        if set(arrays) != set(self.specs):
            raise ValueError(f"path: fields {sorted(arrays)} differ from {sorted(self.specs)}")
        size = None
        for key, array in arrays.items():
            shape, dtype = self.specs[key]
            if array.shape[0] != self.num_envs or array.shape[2:] != shape:
                raise ValueError(
                    f"path: field {key!r} has shape {list(array.shape)}, expected "
                    f"[{self.num_envs}, n, *{list(shape)}]"
                )
            size = array.shape[1] if size is None else size
        size = min(int(size or 0), self.per_env)
        for key, array in arrays.items():
            self.data[key][:, :size] = array[:, array.shape[1] - size :]
        self.size = size
        self.pos = size % self.per_env
        self.added = int(meta.get("added", size))
