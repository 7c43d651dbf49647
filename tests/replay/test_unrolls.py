"""IMPALA's unroll replay: batch composition, recency, and each unroll's own behaviour data."""

import numpy as np
import pytest

from tfagents_vtrace.replay.unrolls import UnrollReplay, replayed_per_batch


def _unroll(i: int) -> dict:
    return {
        "reward": np.full((4, 2), float(i), np.float32),
        "policy": {"logits": np.full((4, 2, 3), float(i), np.float32)},
        "state": (np.full((2, 5), float(i), np.float32),),
    }


def test_mix_keeps_fresh_first_then_replays_older_unrolls_with_their_own_data():
    replay = UnrollReplay(capacity=3, replayed=2, seed=0)
    first = replay.mix([_unroll(0)])  # empty buffer: the draws come from the fresh unroll
    assert [u["reward"][0, 0] for u in first] == [0.0, 0.0, 0.0]
    seen = set()
    for i in range(1, 30):
        batch = replay.mix([_unroll(i)])
        assert len(batch) == 3 and batch[0]["reward"][0, 0] == i
        for u in batch[1:]:
            tag = u["reward"][0, 0]
            assert i - 3 <= tag < i  # only the 3 most recent earlier unrolls
            # the replayed unroll carries its own behaviour policy and start state
            assert u["policy"]["logits"][0, 0, 0] == tag and u["state"][0][0, 0] == tag
            seen.add(i - tag)
        if i >= 3:  # without replacement once the buffer holds enough
            assert batch[1] is not batch[2]
    assert seen == {1, 2, 3}
    assert len(replay) == 3


def test_no_replay_returns_the_fresh_unrolls():
    replay = UnrollReplay(capacity=0, replayed=0)
    fresh = [_unroll(1), _unroll(2)]
    assert replay.mix(fresh) == fresh and len(replay) == 0


def test_replayed_per_batch_needs_a_whole_number():
    assert replayed_per_batch(1.0, 2) == 2 and replayed_per_batch(0.5, 2) == 1
    with pytest.raises(ValueError, match="replay_ratio"):
        replayed_per_batch(0.5, 1)
    assert UnrollReplay(0, 3).capacity == 24
