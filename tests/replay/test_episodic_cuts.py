"""EpisodicReplay and episodes cut by an environment failure at an unroll's first step: the
open piece of the cut episode is dropped, not joined to the next episode."""

import numpy as np

from tfagents_vtrace.replay.episodic import EpisodicReplay


def unroll(obs, reset, first, terminated):
    t = len(obs) - 1
    col = lambda values, dtype: np.asarray(values, dtype)[:, None]  # noqa: E731
    return {
        "observation": col(obs, np.float32)[..., None],
        "reset": col(reset, bool),
        "first": col(first, bool),
        "action": np.zeros((t, 1), np.int32),
        "reward": np.ones((t, 1), np.float32),
        "terminated": col(terminated, bool),
        "truncated": np.zeros((t, 1), bool),
        "policy": {"logits": np.zeros((t, 1, 2), np.float32)},
    }


def test_an_episode_cut_at_an_unrolls_first_step_is_not_joined_to_the_next():
    replay = EpisodicReplay(100)
    # steps 0-2 of an episode (observations 0, 1, 2), still open at the unroll's end
    replay.add_unroll(unroll([0, 1, 2, 3], [0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0]))
    # the environment failed at step 0: a reset step; the new episode 10, 11, 12 ends
    replay.add_unroll(unroll([3, 10, 11, 12], [1, 0, 0, 1], [0, 1, 0, 0], [0, 0, 1]))
    assert replay.num_episodes == 1
    np.testing.assert_array_equal(replay.episodes[0]["observation"][:, 0], [10, 11, 12])
