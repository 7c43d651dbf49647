"""The shipped games' torsos (:mod:`tfagents_vtrace.networks.games`)."""

import numpy as np
import pytest

from tfagents_vtrace.networks.games import SpreadRelations, landmark_relations


def test_the_spread_torso_reads_every_agent_to_landmark_offset_of_the_game():
    """``landmark_relations`` against mpe2's own world state: for each agent's
    observation, each landmark's offset from that agent and from each other agent (in the
    observation's order) and their lengths."""
    pytest.importorskip("mpe2", reason="mpe2 is not installed (pip install .[mpe])")
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env(N=3)
    obs, _ = env.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(4):  # moving agents: velocities and positions away from the start
        obs, *_ = env.step({a: int(rng.integers(5)) for a in env.agents})
    world = env.unwrapped.world
    x = np.stack([obs[a.name] for a in world.agents]).astype(np.float32)
    relations = np.asarray(landmark_relations(x))
    assert relations.shape == (3, 3, 9)
    for i, agent in enumerate(world.agents):
        seen_from = [agent, *(a for a in world.agents if a is not agent)]
        for k, landmark in enumerate(world.landmarks):
            for j, other in enumerate(seen_from):
                offset = landmark.state.p_pos - other.state.p_pos
                np.testing.assert_allclose(relations[i, k, 3 * j : 3 * j + 2], offset, atol=1e-5)
                np.testing.assert_allclose(relations[i, k, 3 * j + 2], np.hypot(*offset),
                                           atol=1e-4)  # fmt: skip
    ids = np.eye(3, dtype=np.float32)
    assert tuple(SpreadRelations()(np.concatenate([x, ids], 1)).shape) == (3, 128)


def test_the_spread_torso_refuses_a_game_of_other_widths():
    """A game of 4 agents (24 numbers, 28 with agent_ids) is not read as one of 3."""
    import gymnasium as gym

    for width in (18, 21):
        SpreadRelations(observation_space=gym.spaces.Box(-1, 1, (width,)))
    for width in (24, 28):
        with pytest.raises(ValueError, match=rf"^torso: SpreadRelations .* shape \({width},\)$"):
            SpreadRelations(observation_space=gym.spaces.Box(-1, 1, (width,)))
    SpreadRelations(n=4, observation_space=gym.spaces.Box(-1, 1, (28,)))
