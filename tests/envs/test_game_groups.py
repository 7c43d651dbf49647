"""Groups of agents in one game (:mod:`tfagents_vtrace.envs.multi_agent`): the default groups
by spaces and a given mapping, each group's columns of games stepped together, one thread per
group meeting at each call, and the joint vector an evaluation plays."""

import threading

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from tests import games  # noqa: E402
from tfagents_vtrace.envs.multi_agent import (  # noqa: E402
    INACTIVE,
    GameHub,
    GameHubBroken,
    JointVectorEnv,
    agent_groups,
    group_vectors,
)


def _best(name, obs):
    """The action that earns 1 in every live column of group ``name`` (a: its bit; b of the
    uneven game: the sum of its two bits)."""
    if obs.shape[-1] == 2 or (obs.shape[-1] == 4 and name == "a"):
        return obs[:, 0].astype(np.int64)
    return (obs[:, 0] + obs[:, 1]).astype(np.int64)


def test_groups_by_spaces_by_default_or_as_mapped():
    uneven, relay = games.make_uneven(), games.make_relay()
    assert agent_groups(uneven) == {"a": ["a"], "b": ["b"]}
    assert agent_groups(relay) == {"a": ["a", "b"]}
    assert agent_groups(relay, {"a": "red", "b": "blue"}) == {"red": ["a"], "blue": ["b"]}
    with pytest.raises(ValueError, match=r"^policy_for_agent: no group for agents \['b'\]"):
        agent_groups(relay, {"a": "red"})
    with pytest.raises(ValueError, match=r"^policy_for_agent: agents 'a' and 'b' of group 'x' "):
        agent_groups(uneven, {"a": "x", "b": "x"})


@pytest.mark.parametrize("a_truncated", [False, True])
def test_a_hub_steps_each_groups_columns_with_their_own_spaces(a_truncated):
    hub = GameHub(games.make_uneven, 3, a_truncated=a_truncated)
    assert {n: g.observation_space.shape for n, g in hub.groups.items()} == {"a": (2,), "b": (3,)}
    assert hub.groups["b"].action_space == gym.spaces.Discrete(3)
    out = hub.reset(seed=0)
    obs = {name: o for name, (o, _) in out.items()}
    for k in range(8):
        out = hub.step({name: _best(name, o) for name, o in obs.items()})
        obs = {name: o[0] for name, o in out.items()}
        _, ra, ta, ua, ia = out["a"]
        _, rb, tb, ub, ib = out["b"]
        # a's 6 steps, b's 3, then the reset step (k = 6) and a new game
        assert np.all(ra == (k != 6)) and np.all(rb == (k < 3 or k == 7)), k
        assert np.all(ta == (k == 5 and not a_truncated)) and np.all(ua == (k == 5 and a_truncated))
        assert np.all(tb == (k == 2)) and not ub.any()
        assert np.all(ib[INACTIVE] == (2 <= k <= 5)) and np.all(ia[INACTIVE] == (k == 5))


def test_one_thread_per_group_meets_at_each_call_and_a_failure_breaks_every_group():
    hub = GameHub(games.make_uneven, 2)
    views = group_vectors(hub, timeout_s=10)
    earned = {name: 0.0 for name in views}
    errors = []

    def play(name, steps):
        try:
            obs, _ = views[name].reset(seed=1)
            for _ in range(steps):
                obs, reward, *_ = views[name].step(_best(name, obs))
                earned[name] += reward.sum()
        except Exception as e:  # noqa: BLE001 - the test reads it
            errors.append((name, e))

    threads = [threading.Thread(target=play, args=(name, 14)) for name in views]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    # two games of 7 steps each (6 + the reset step): a earns 6 and b 3 per game
    assert earned == {"a": 2 * 2 * 6.0, "b": 2 * 2 * 3.0}
    # a failing step reaches every group as one error
    hub.games[0].step = lambda actions: 1 / 0
    threads = [threading.Thread(target=play, args=(name, 1)) for name in views]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert {name for name, _ in errors} == {"a", "b"}
    assert all(isinstance(e, GameHubBroken) for _, e in errors)
    assert any("ZeroDivisionError" in str(e) for _, e in errors)


def test_the_joint_vector_plays_every_agents_episodes_for_an_evaluation():
    from tfagents_vtrace.export.playing import play

    env = JointVectorEnv(GameHub(games.make_uneven, 2))
    assert env.num_envs == 4
    obs, info = env.reset(seed=3)

    def act(obs, first, reward, running):
        return {name: _best(name, o) for name, o in obs.items()}

    returns, lengths = play(env, obs, act, np.full(4, 2), reset_info=info)
    assert sorted(lengths) == [3, 3, 3, 3, 6, 6, 6, 6]
    np.testing.assert_array_equal(returns, np.asarray(lengths, float))
