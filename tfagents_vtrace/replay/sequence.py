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

__all__ = ["SequenceReplay", "StreamReplay"]


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
        out = {}
        for key, window in self.windows(env, offset, length).items():
            window = window.reshape(length, num, batch_size, *window.shape[2:])
            out[key] = np.swapaxes(window, 0, 1)
        return out

    def windows(self, env: np.ndarray, offset: np.ndarray, length: int) -> dict:
        """Fields ``[length, count, *shape]`` of the windows starting ``offset[i]`` steps after
        the oldest stored step of column ``env[i]``."""
        oldest = self.pos if self.size == self.per_env else 0
        # [length, count] buffer indices of each window, oldest step first.
        idx = (oldest + offset[None, :] + np.arange(length)[:, None]) % self.per_env
        return {key: array[env[None, :], idx] for key, array in self.data.items()}

    def cut(self) -> None:
        """Marks the newest stored step of every column as an episode's last (``is_last``):
        the next step written starts a new episode (its writer's environments restarted)."""
        if self.size and "is_last" in self.data:
            self.data["is_last"][:, (self.pos - 1) % self.per_env] = True

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


class StreamReplay:
    """One :class:`SequenceReplay` per writer (stream), each written at its own pace: the
    replay of TAAC's Ray collectors (:mod:`~tfagents_vtrace.agents.taac.ray_collectors`),
    whose vector steps arrive from several processes in any order.

    :meth:`sample` draws windows uniformly over all streams' stored windows, with the
    interface of :meth:`SequenceReplay.sample`; :meth:`save` and :meth:`load` keep every
    stream in one checksummed archive (fields ``"<stream>/<name>"``).

    Args:
      specs: field name -> ``(shape_of_one_step, dtype)``.
      num_streams: writers.
      num_envs: environments (columns) of each writer.
      capacity: total steps kept, split evenly over the streams.
    """

    def __init__(self, specs: dict, num_streams: int, num_envs: int, capacity: int):
        if num_streams < 1:
            raise ValueError(f"num_streams: expected >= 1, received {num_streams}")
        self.streams = [
            SequenceReplay(specs, num_envs, capacity // num_streams) for _ in range(num_streams)
        ]

    @property
    def num_steps(self) -> int:
        """Steps stored over all streams."""
        return sum(stream.num_steps for stream in self.streams)

    def __len__(self) -> int:
        return self.num_steps

    def add(self, step: dict, stream: int) -> None:
        """Writes one vector step of writer ``stream`` (fields ``[num_envs, *shape]``)."""
        self.streams[stream].add(step)

    def cut(self, stream: int) -> None:
        """:meth:`SequenceReplay.cut` of writer ``stream`` (its environments restarted)."""
        self.streams[stream].cut()

    def _counts(self, length: int) -> np.ndarray:
        """Windows of ``length`` steps stored per stream."""
        return np.array([s.num_envs * max(s.size - length + 1, 0) for s in self.streams], np.int64)

    def can_sample(self, length: int) -> bool:
        """Whether windows of ``length`` steps exist (in any stream)."""
        return bool(self._counts(length).sum() > 0)

    def sample(self, batch_size: int, length: int, rng: np.random.Generator, num: int = 1) -> dict:
        """``num`` batches of ``batch_size`` windows, fields ``[num, length, batch_size,
        *shape]``, drawn uniformly (with replacement) over the windows of every stream.

        Raises:
          ValueError: no stream holds ``length`` steps per environment.
        """
        counts = self._counts(length)
        if not counts.sum():
            raise ValueError(f"length: no stream holds {length} steps per environment")
        count = num * batch_size
        which = rng.choice(len(self.streams), count, p=counts / counts.sum())
        out = None
        for k in np.unique(which):
            stream, picked = self.streams[k], np.flatnonzero(which == k)
            env = rng.integers(0, stream.num_envs, len(picked))
            offset = rng.integers(0, stream.size - length + 1, len(picked))
            windows = stream.windows(env, offset, length)
            if out is None:
                out = {key: np.empty((length, count, *w.shape[2:]), w.dtype)
                       for key, w in windows.items()}  # fmt: skip
            for key, window in windows.items():
                out[key][:, picked] = window
        return {
            key: np.swapaxes(w.reshape(length, num, batch_size, *w.shape[2:]), 0, 1)
            for key, w in out.items()
        }

    def save(self, path: str) -> None:
        """Writes every stream's stored steps (oldest first) to the ``.npz`` archive ``path``."""
        arrays, meta = {}, {"num_streams": len(self.streams), "added": []}
        for k, stream in enumerate(self.streams):
            oldest = stream.pos if stream.size == stream.per_env else 0
            order = (oldest + np.arange(stream.size)) % stream.per_env
            arrays.update({f"{k}/{key}": a[:, order] for key, a in stream.data.items()})
            meta["added"].append(stream.added)
        save_arrays(path, arrays, meta)

    def load(self, path: str) -> None:
        """Replaces the contents with the archive ``path`` (written by :meth:`save`).

        Raises:
          ReplayCorruptError: the archive fails its checksum.
          ValueError: it holds another number of streams, or other fields or shapes.
        """
        arrays, meta = load_arrays(path)
        if meta.get("num_streams") != len(self.streams):
            raise ValueError(
                f"path: the archive holds {meta.get('num_streams')} replay streams, this run "
                f"{len(self.streams)} (num_actors)"
            )
        for k, stream in enumerate(self.streams):
            fields = {key: arrays.get(f"{k}/{key}") for key in stream.specs}
            missing = [key for key, array in fields.items() if array is None]
            if missing:
                raise ValueError(f"path: stream {k} lacks the fields {missing}")
            size = min(next(iter(fields.values())).shape[1], stream.per_env)
            for key, array in fields.items():
                shape = stream.specs[key][0]
                if array.shape[0] != stream.num_envs or array.shape[2:] != shape:
                    raise ValueError(
                        f"path: field {k}/{key} has shape {list(array.shape)}, expected "
                        f"[{stream.num_envs}, n, *{list(shape)}]"
                    )
                stream.data[key][:, :size] = array[:, array.shape[1] - size :]
            stream.size, stream.pos = size, size % stream.per_env
            stream.added = int(meta["added"][k])
