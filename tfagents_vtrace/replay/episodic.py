"""ACER's episodic replay: whole episodes in, sequences of up to ``t_max`` steps out.

Wang et al. 2016, "Sample Efficient Actor-Critic with Experience Replay",
https://arxiv.org/abs/1611.01224 (Section 3, Algorithm 1: replay sampled trajectories with
their behaviour policies ``mu``). Each stored episode keeps its observations (``L + 1``,
the final observation included), actions, rewards, ``terminated`` / ``truncated`` flags and
the behaviour policy parameters ``mu`` (``[L, ...]`` per key). Episodes are assembled from
the runtime's unrolls (:mod:`tfagents_vtrace.runtime.acting.actor`, NEXT_STEP layout) per
environment and enter the buffer when they end; the oldest whole episodes are evicted
beyond ``capacity`` transitions.

:meth:`EpisodicReplay.sample` draws episodes uniformly and a uniform window of ``t_max``
steps inside each (the whole episode when shorter) and returns them in the actor's unroll
layout, so one learner step serves both on-policy and replayed data. A window shorter than
``t_max`` is padded with reset steps (``reset = True``: masked, zero discount); a window
that reaches the episode's end has ``reset`` on the final observation, as an unroll does.
Sequences start from the zero recurrent state (``state`` argument), as chainerrl's ACER does.

:meth:`EpisodicReplay.save` / :meth:`EpisodicReplay.load` go through
:mod:`tfagents_vtrace.replay.storage` (checksummed npz, no pickle); a damaged archive
raises :class:`~tfagents_vtrace.replay.storage.ReplayCorruptError`.
"""

from __future__ import annotations

import collections
import threading

import numpy as np

from tfagents_vtrace.replay import storage

_STEP_KEYS = ("action", "reward", "terminated", "truncated")


class EpisodicReplay:
    """Episodes of an actor's unrolls, sampled as ``[T+1, B]`` sequences (module docstring).

    Args:
      capacity: maximum transitions kept (whole oldest episodes are evicted; the newest
        episode is always kept even if longer).
    """

    def __init__(self, capacity: int):
        if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
            raise ValueError(f"capacity: expected an int >= 1, received {capacity!r}")
        self.capacity = capacity
        self.episodes: collections.deque = collections.deque()
        self._size = 0
        self._open: dict[int, dict[str, list]] = {}
        self.lock = threading.Lock()

    def __len__(self) -> int:
        """Transitions stored in complete episodes."""
        return self._size

    @property
    def num_episodes(self) -> int:
        return len(self.episodes)

    # --------------------------------------------------------------------------- adding
    def add_episode(self, episode: dict) -> None:
        """Adds one complete episode: ``observation [L+1, ...]``, ``action [L, ...]``,
        ``reward``/``terminated``/``truncated`` ``[L]``, ``policy`` dict of ``[L, ...]``."""
        length = len(episode["reward"])
        if length < 1 or len(episode["observation"]) != length + 1:
            raise ValueError(
                f"episode: expected observation [L+1] with L = len(reward) >= 1, received "
                f"observation {len(episode['observation'])} and reward {length}"
            )
        with self.lock:
            self.episodes.append(episode)
            self._size += length
            while self._size > self.capacity and len(self.episodes) > 1:
                self._size -= len(self.episodes.popleft()["reward"])

    def add_unroll(self, unroll: dict, stream: int = 0) -> int:
        """Splits an actor unroll into per-environment episode pieces; finished episodes
        enter the buffer. ``stream`` distinguishes actors (their open episodes are kept
        apart). Returns the number of episodes completed."""
        reset, obs = np.asarray(unroll["reset"]), np.asarray(unroll["observation"])
        steps = {key: np.asarray(unroll[key]) for key in _STEP_KEYS}
        policy = {k: np.asarray(v) for k, v in unroll["policy"].items()}
        ended = np.logical_or(steps["terminated"], steps["truncated"])
        t_len, batch = steps["reward"].shape
        done = 0
        for b in range(batch):
            # A reset step holds the final observation of an episode closed at t - 1: skip it;
            # the kept steps split into episode pieces after every ended step.
            kept = np.flatnonzero(~reset[:t_len, b])
            for seg in np.split(kept, np.flatnonzero(ended[kept, b]) + 1):
                if not len(seg):
                    continue
                if unroll["first"][seg[0], b]:  # an open piece was cut (env failure): drop it
                    self._open.pop((stream, b), None)
                piece = self._open.setdefault((stream, b), _empty())
                piece["observation"].append(obs[seg, b])
                for key in _STEP_KEYS:
                    piece[key].append(steps[key][seg, b])
                for k, v in policy.items():
                    piece["policy"].setdefault(k, []).append(v[seg, b])
                last = seg[-1]
                if ended[last, b]:
                    piece["observation"].append(obs[last + 1 : last + 2, b])
                    self.add_episode(_stack(piece))
                    del self._open[(stream, b)]
                    done += 1
        return done

    def discard_open(self, stream: int) -> None:
        """Drops ``stream``'s unfinished episode pieces (its actor restarted its environments:
        the next unroll starts new episodes)."""
        with self.lock:
            for key in [key for key in self._open if key[0] == stream]:
                del self._open[key]

    # ------------------------------------------------------------------------- sampling
    def sample(
        self, batch_size: int, t_max: int, rng: np.random.Generator, state: tuple = ()
    ) -> dict:
        """``batch_size`` sequences of ``t_max`` steps in the runtime unroll layout.

        Returns a dict with ``observation/first/reset/prev_action/prev_reward [T+1, B, ...]``,
        ``action/reward/terminated/truncated [T, B]``, ``policy`` (dict of ``[T, B, ...]``)
        and ``state`` (the given initial state, e.g. zeros ``[B, k]``).
        """
        if self.num_episodes == 0:
            raise ValueError("sample: the replay holds no complete episode yet")
        with self.lock:
            picks = [self.episodes[i] for i in rng.integers(0, len(self.episodes), batch_size)]
        windows = []
        for ep in picks:
            length = len(ep["reward"])
            start = int(rng.integers(0, length - t_max + 1)) if length > t_max else 0
            windows.append(_window(ep, start, t_max))
        out = {
            key: np.stack([w[key] for w in windows], axis=1)
            for key in windows[0]
            if key != "policy"
        }
        out["policy"] = {
            k: np.stack([w["policy"][k] for w in windows], axis=1) for k in picks[0]["policy"]
        }
        out["state"] = tuple(state)
        return out

    # ----------------------------------------------------------------------- save / load
    def arrays(self) -> tuple[dict[str, np.ndarray], dict]:
        """The stored episodes as flat arrays plus ``lengths`` (open pieces are not saved)."""
        with self.lock:  # the episodes and their size together (workers add concurrently)
            eps, size = list(self.episodes), int(self._size)
        if not eps:
            return {"lengths": np.zeros([0], np.int64)}, {"capacity": self.capacity, "size": 0}
        arrays = {
            "lengths": np.asarray([len(e["reward"]) for e in eps], np.int64),
            "observation": np.concatenate([e["observation"] for e in eps]),
        }
        for key in _STEP_KEYS:
            arrays[key] = np.concatenate([e[key] for e in eps])
        for key in eps[0]["policy"]:
            arrays["policy/" + key] = np.concatenate([e["policy"][key] for e in eps])
        return arrays, {"capacity": self.capacity, "size": size}

    def save(self, path: str) -> None:
        """Writes the episodes to ``path`` (``.npz``, checksummed, atomic)."""
        arrays, meta = self.arrays()
        storage.save_arrays(path, arrays, meta)

    def load(self, path: str) -> None:
        """Replaces the content with the archive at ``path``.

        Raises:
          ReplayCorruptError: the archive is damaged or inconsistent.
        """
        arrays, meta = storage.load_arrays(path)
        lengths = arrays.get("lengths")
        if lengths is None or int(lengths.sum()) != int(meta.get("size", -1)):
            raise storage.ReplayCorruptError(
                f"replay archive {path!r}: lengths do not match the recorded size"
            )
        episodes, t0, o0 = [], 0, 0
        for length in lengths.tolist():
            ep = {"observation": arrays["observation"][o0 : o0 + length + 1]}
            for key in _STEP_KEYS:
                ep[key] = arrays[key][t0 : t0 + length]
            ep["policy"] = {
                k[len("policy/") :]: v[t0 : t0 + length]
                for k, v in arrays.items()
                if k.startswith("policy/")
            }
            episodes.append(ep)
            t0, o0 = t0 + length, o0 + length + 1
        with self.lock:
            self.episodes = collections.deque(episodes)
            self._size = t0
            self._open = {}


def _empty() -> dict:
    """An open episode piece: per key a list of ``[n, ...]`` chunks (policy: per policy key)."""
    return {"observation": [], "policy": {}, **{k: [] for k in _STEP_KEYS}}


def _stack(piece: dict) -> dict:
    ep = {key: np.concatenate(piece[key]) for key in ("observation", *_STEP_KEYS)}
    ep["policy"] = {k: np.concatenate(v) for k, v in piece["policy"].items()}
    return ep


def _window(ep: dict, start: int, t_max: int) -> dict:
    """One ``[T(+1), ...]`` sequence of ``ep`` from ``start`` in the unroll layout."""
    length = len(ep["reward"])
    n = min(t_max, length - start)  # real steps
    end_reached = start + n == length
    pad = t_max - n

    def steps(x, fill_last=False):
        part = x[start : start + n]
        filler = part[-1:] if fill_last else np.zeros_like(part[:1])
        return np.concatenate([part, np.repeat(filler, pad, axis=0)]) if pad else part

    obs = ep["observation"][start : start + n + 1]
    obs = np.concatenate([obs, np.repeat(obs[-1:], pad, axis=0)]) if pad else obs
    out = {"observation": obs}
    for key in _STEP_KEYS:
        out[key] = steps(ep[key])
    out["policy"] = {k: steps(v, fill_last=True) for k, v in ep["policy"].items()}
    reset = np.zeros(t_max + 1, bool)
    if end_reached:
        reset[n:] = True
    first = np.zeros(t_max + 1, bool)
    first[0] = start == 0
    first[1:] = reset[:-1]
    actions, rewards = ep["action"], ep["reward"]
    prev_action = np.zeros((t_max + 1, *actions.shape[1:]), actions.dtype)
    prev_reward = np.zeros(t_max + 1, np.float32)
    if start > 0:
        prev_action[0], prev_reward[0] = actions[start - 1], rewards[start - 1]
    prev_action[1 : n + 1] = actions[start : start + n]
    prev_reward[1 : n + 1] = rewards[start : start + n]
    keep = ~first
    prev_action *= keep.reshape((-1,) + (1,) * (prev_action.ndim - 1)).astype(prev_action.dtype)
    prev_reward *= keep
    out.update(first=first, reset=reset, prev_action=prev_action, prev_reward=prev_reward)
    return out
