"""EpisodicReplay: episodes rebuilt from NEXT_STEP unrolls (crossing unroll boundaries),
windows in the unroll layout, eviction, and checksummed save / load (corruption reported)."""

import os
import threading

import numpy as np
import pytest

from tfagents_vtrace.agents.loss_inputs import episode_targets
from tfagents_vtrace.replay.episodic import EpisodicReplay
from tfagents_vtrace.replay.storage import ReplayCorruptError


def _stream(env: int, lengths: list[int], ends: list[str]) -> tuple[list[dict], list[dict]]:
    """One environment's NEXT_STEP entries and the episodes they hold.

    Observation ``env * 10_000 + episode * 100 + step`` identifies every entry.
    """
    entries, episodes = [], []
    for e, (length, end) in enumerate(zip(lengths, ends)):
        obs = [float(env * 10_000 + e * 100 + s) for s in range(length + 1)]
        ep = {
            "observation": np.array(obs, np.float32)[:, None],
            "action": np.array([(env + e + s) % 3 for s in range(length)], np.int32),
            "reward": np.array([obs[s] / 7.0 for s in range(length)], np.float32),
            "terminated": np.array([end == "term" and s == length - 1 for s in range(length)]),
            "truncated": np.array([end == "trunc" and s == length - 1 for s in range(length)]),
            "policy": {"logits": np.array([[obs[s], -obs[s], 1.0] for s in range(length)])},
        }
        for s in range(length):
            entries.append(
                {
                    "observation": ep["observation"][s],
                    "reset": False,
                    **{k: ep[k][s] for k in ("action", "reward", "terminated", "truncated")},
                    "logits": ep["policy"]["logits"][s].astype(np.float32),
                }
            )
        entries.append(  # the reset step: final observation, action ignored, reward 0
            {
                "observation": ep["observation"][length],
                "reset": True,
                "action": np.int32(0),
                "reward": np.float32(0.0),
                "terminated": False,
                "truncated": False,
                "logits": np.zeros(3, np.float32),
            }
        )
        episodes.append(ep)
    return entries, episodes


def _slice(streams: list[list[dict]], key: str, start: int, m: int) -> np.ndarray:
    return np.stack([np.stack([s[start + i][key] for s in streams]) for i in range(m)])


def _unrolls(streams: list[list[dict]], t: int) -> list[dict]:
    n = min(len(s) for s in streams)
    out = []
    for k in range((n - 1) // t):
        sl = lambda key, m, k=k: _slice(streams, key, k * t, m)  # noqa: E731
        reset = sl("reset", t + 1)
        first = np.concatenate([np.zeros((1, len(streams)), bool), reset[:-1]])
        out.append(
            {
                "observation": sl("observation", t + 1),
                "reset": reset,
                "first": first,
                "action": sl("action", t),
                "reward": sl("reward", t),
                "terminated": sl("terminated", t),
                "truncated": sl("truncated", t),
                "policy": {"logits": sl("logits", t)},
            }
        )
    return out


@pytest.fixture
def filled():
    s0, eps0 = _stream(0, [3, 7, 2, 9], ["term", "trunc", "term", "term"])
    s1, eps1 = _stream(1, [12, 1, 4, 6], ["trunc", "term", "term", "trunc"])
    replay = EpisodicReplay(capacity=1000)
    for u in _unrolls([s0, s1], t=4):
        replay.add_unroll(u)
    return replay, eps0 + eps1


def _key(ep):
    return float(ep["observation"][0, 0])


def test_episodes_are_rebuilt_across_unroll_boundaries(filled):
    replay, episodes = filled
    want = {_key(e): e for e in episodes}
    got = {_key(e): e for e in replay.episodes}
    assert len(got) >= 6 and set(got) <= set(want)  # every complete episode, no partial one
    for k, ep in got.items():
        for field in ("observation", "action", "reward", "terminated", "truncated"):
            np.testing.assert_array_equal(ep[field], want[k][field])
        np.testing.assert_allclose(ep["policy"]["logits"], want[k]["policy"]["logits"])
    assert len(replay) == sum(len(e["reward"]) for e in got.values())


def test_sampled_windows_are_slices_in_the_unroll_layout(filled):
    replay, episodes = filled
    by_key = {_key(e): e for e in episodes}
    t_max = 5
    batch = replay.sample(64, t_max, np.random.default_rng(0), state=(np.zeros((64, 2)),))
    assert batch["observation"].shape == (t_max + 1, 64, 1)
    assert batch["state"][0].shape == (64, 2)
    _, discounts, mask = episode_targets(batch, np.zeros((t_max + 1, 64), np.float32), 0.9, "none")
    for b in range(64):
        obs0 = float(batch["observation"][0, b, 0])
        ep = by_key[obs0 - obs0 % 100]
        start = int(obs0 % 100)
        length = len(ep["reward"])
        n = min(t_max, length - start)
        np.testing.assert_array_equal(
            batch["observation"][: n + 1, b], ep["observation"][start : start + n + 1]
        )
        np.testing.assert_array_equal(batch["action"][:n, b], ep["action"][start : start + n])
        np.testing.assert_array_equal(batch["reward"][:n, b], ep["reward"][start : start + n])
        assert batch["first"][0, b] == (start == 0)
        np.testing.assert_array_equal(batch["prev_action"][1 : n + 1, b], batch["action"][:n, b])
        if start > 0:
            assert batch["prev_action"][0, b] == ep["action"][start - 1]
        # Real steps are unmasked; padding is masked with zero discount and zero reward.
        np.testing.assert_array_equal(mask.numpy()[:, b], np.arange(t_max) < n)
        assert np.all(discounts.numpy()[n:, b] == 0.0)
        assert np.all(batch["reward"][n:, b] == 0.0)
        if start + n == length:  # the window reaches the end: reset on the final observation
            assert batch["reset"][n, b]
            assert discounts.numpy()[n - 1, b] == 0.0
        else:
            assert not batch["reset"][:, b].any()
            assert n == t_max


def _episode(length):
    return {
        "observation": np.zeros((length + 1, 1)),
        "action": np.zeros(length, np.int32),
        "reward": np.full(length, float(length)),
        "terminated": np.zeros(length, bool),
        "truncated": np.zeros(length, bool),
        "policy": {"logits": np.zeros((length, 2))},
    }


def test_capacity_evicts_whole_oldest_episodes():
    replay = EpisodicReplay(capacity=10)
    for length in (4, 4, 4):
        replay.add_episode(_episode(length))
    assert len(replay) == 8 and replay.num_episodes == 2


class _AddWhenReleased:
    """The replay's lock; once armed, another worker's episode lands right after a release."""

    def __init__(self, replay):
        self.replay, self.inner, self.armed = replay, threading.Lock(), False

    def __enter__(self):
        self.inner.acquire()

    def __exit__(self, *exc):
        self.inner.release()
        if self.armed:
            self.armed = False
            self.replay.add_episode(_episode(5))


def test_an_archive_is_consistent_while_workers_add_episodes(tmp_path):
    """arrays() read the size after releasing its lock: an episode added meanwhile made the
    archive fail its own check on resume."""
    replay = EpisodicReplay(capacity=100)
    replay.add_episode(_episode(4))
    replay.lock = _AddWhenReleased(replay)
    replay.lock.armed = True
    path = str(tmp_path / "replay-4.npz")
    replay.save(path)
    restored = EpisodicReplay(capacity=100)
    restored.load(path)  # was: ReplayCorruptError (lengths do not match the recorded size)
    assert len(restored) == 4 and len(replay) == 9


def test_sampling_an_empty_replay_raises():
    with pytest.raises(ValueError, match="no complete episode"):
        EpisodicReplay(5).sample(2, 3, np.random.default_rng(0))


def test_save_load_round_trip(tmp_path, filled):
    replay, _ = filled
    path = str(tmp_path / "replay-10.npz")
    replay.save(path)
    restored = EpisodicReplay(capacity=1000)
    restored.load(path)
    assert len(restored) == len(replay) and restored.num_episodes == replay.num_episodes
    a = replay.sample(8, 4, np.random.default_rng(5))
    b = restored.sample(8, 4, np.random.default_rng(5))
    for key in ("observation", "action", "reward", "reset", "first", "prev_action"):
        np.testing.assert_array_equal(a[key], b[key])
    np.testing.assert_array_equal(a["policy"]["logits"], b["policy"]["logits"])


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_corrupted_archive_raises(tmp_path, filled, damage):
    replay, _ = filled
    path = str(tmp_path / "replay-10.npz")
    replay.save(path)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        if damage == "flip":
            f.seek(size // 2)
            byte = f.read(1)
            f.seek(size // 2)
            f.write(bytes([byte[0] ^ 0xFF]))
        else:
            f.truncate(size // 3)
    fresh = EpisodicReplay(capacity=1000)
    with pytest.raises(ReplayCorruptError, match="replay-10.npz"):
        fresh.load(path)
    assert len(fresh) == 0  # nothing was loaded


def test_discard_open_drops_only_that_streams_unfinished_pieces():
    """A Ray worker process replaced mid-episode: its stream's open pieces go, so the next
    unroll's steps do not join an episode the dead process never finished."""
    s0, _ = _stream(0, [9], ["term"])
    replay = EpisodicReplay(capacity=100)
    first = _unrolls([s0, s0], t=4)[0]  # steps 0-3 of an episode of 9: open in both streams
    replay.add_unroll(first, stream=1)
    replay.add_unroll(first, stream=2)
    replay.discard_open(1)
    assert sorted(replay._open) == [(2, 0), (2, 1)] and len(replay) == 0
