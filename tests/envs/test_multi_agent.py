"""Games of many agents as vectors of one policy (:mod:`tfagents_vtrace.envs.multi_agent`):
the columns' layout, absent agents' columns reported and zeroed, NEXT_STEP resets of whole
games, and what a training run refuses."""

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from tests import games  # noqa: E402
from tfagents_vtrace.envs import make_vector_env  # noqa: E402
from tfagents_vtrace.envs.multi_agent import (  # noqa: E402
    INACTIVE,
    ParallelVectorEnv,
    check_game_run,
    game_agents,
)
from tfagents_vtrace.envs.user_envs import resolve_env  # noqa: E402


def _script(length, b_leaves, b_arrives, steps, a_truncated):
    """The expected ``(inactive after the step, reward mask, terminated, truncated)`` of one
    game's columns ``[a, b]`` over ``steps`` steps, played by hand from the game's rules
    (the module docstring of examples/relay_game.py), with NEXT_STEP resets."""
    out, t, present, reset_next = [], 0, {"a": True, "b": b_arrives == 0}, False
    for _ in range(steps):
        if reset_next:  # the reset step: no outcome, a new game
            t, present, reset_next = 0, {"a": True, "b": b_arrives == 0}, False
            out.append(([not present["a"], not present["b"]], [0, 0], [0, 0], [0, 0]))
            continue
        took = dict(present)
        t += 1
        a_ends = int(took["a"] and t >= length)
        term = [0 if a_truncated else a_ends, int(took["b"] and t >= b_leaves)]
        trunc = [a_ends if a_truncated else 0, 0]
        present = {"a": took["a"] and not a_ends, "b": took["b"] and not term[1]}
        if present["a"] and t == b_arrives and not took["b"]:
            present["b"] = True
        if not present["a"] and not present["b"]:
            reset_next = True
        inactive = [not present["a"], not present["b"]]
        out.append((inactive, [int(took["a"]), int(took["b"])], term, trunc))
    return out


@pytest.mark.parametrize("b_leaves,b_arrives,a_truncated", [(3, 0, False), (6, 2, True)])
def test_columns_follow_the_game_and_absent_agents_are_inactive_zeros(b_leaves, b_arrives,
                                                                      a_truncated):  # fmt: skip
    length, steps, g = 6, 20, 3
    env = ParallelVectorEnv(games.make_relay, 2 * g, length=length, b_leaves=b_leaves,
                            b_arrives=b_arrives, a_truncated=a_truncated)  # fmt: skip
    assert env.num_envs == 2 * g and env.single_action_space == gym.spaces.Discrete(2)
    obs, info = env.reset(seed=5)
    assert obs.shape == (2 * g, 2)
    np.testing.assert_array_equal(info[INACTIVE], [False, b_arrives > 0] * g)
    script = _script(length, b_leaves, b_arrives, steps, a_truncated)
    prev_inactive = info[INACTIVE]
    for k in range(steps):
        # the right action for every live column: the bit it observes (x = obs[0])
        actions = obs[:, 0].astype(np.int64)
        obs, reward, term, trunc, info = env.step(actions)
        inactive, live, want_term, want_trunc = (np.tile(x, g) for x in script[k])
        np.testing.assert_array_equal(info[INACTIVE], inactive.astype(bool), err_msg=f"{k}")
        np.testing.assert_array_equal(term, want_term.astype(bool), err_msg=f"step {k}")
        np.testing.assert_array_equal(trunc, want_trunc.astype(bool), err_msg=f"step {k}")
        # every column that took part earned its 1; the others 0
        np.testing.assert_array_equal(reward, live.astype(np.float32), err_msg=f"step {k}")
        # an absent agent's observation is zeros, not its last one
        gone = inactive.astype(bool) & prev_inactive
        assert np.all(obs[gone] == 0.0)
        prev_inactive = info[INACTIVE]
    env.close()


def test_agent_ids_append_a_one_hot_per_agent():
    env = ParallelVectorEnv(games.make_relay, 4, agent_ids=True)
    obs, _ = env.reset(seed=0)
    assert env.single_observation_space.shape == (4,)
    np.testing.assert_array_equal(obs[:, 2:], np.tile(np.eye(2, dtype=np.float32), (2, 1)))


def test_a_callable_game_is_registered_with_its_vector_and_checked():
    env_id = resolve_env(games.make_relay)
    assert env_id == resolve_env(games.make_relay)  # the same callable, the same id
    assert game_agents(env_id) == ["a", "b"]
    vec = make_vector_env(env_id, 4, seed=1, length=4)
    assert vec.num_envs == 4 and isinstance(vec.unwrapped, ParallelVectorEnv)
    vec.close()
    with pytest.raises(ValueError, match=r"^num_envs: expected a multiple of 2 .* received 3$"):
        check_game_run(env_id, 3)
    with pytest.raises(ValueError, match=r"^env_mode: a game of many agents"):
        check_game_run(env_id, 4, "sync")
    with pytest.raises(ValueError, match=r"^env_mode: "):
        make_vector_env(env_id, 4, seed=1, mode="async")
    with pytest.raises(TypeError, match="vector of games"):
        gym.make(env_id).reset()


def test_agents_of_different_spaces_are_refused_in_one_line():
    from pettingzoo.utils.env import ParallelEnv

    class Uneven(ParallelEnv):
        possible_agents = ["p", "q"]

        def observation_space(self, agent):
            return gym.spaces.Box(0, 1, (2 if agent == "p" else 3,))

        def action_space(self, agent):
            return gym.spaces.Discrete(2)

    with pytest.raises(ValueError, match=r"^env: agents 'p' and 'q' have different spaces"):
        ParallelVectorEnv(Uneven, 2)


def test_an_actor_masks_absent_agents_steps_and_counts_each_agents_episode():
    """The actor's unroll of a game vector: a column's step is a reset step (masked) exactly
    when the step before reported its agent out of the game, and each agent's episode ends
    with its own return and length."""
    from tfagents_vtrace.networks import NetworkConfig
    from tfagents_vtrace.runtime.acting.actor import Actor, ActorSpec

    env_id = resolve_env(games.make_relay)
    seen = []

    def factory(seed):
        env = make_vector_env(env_id, 4, seed, b_arrives=1, b_leaves=4)
        step = env.step

        def recording(actions):
            out = step(actions)
            seen.append(out[4][INACTIVE].copy())
            return out

        env.step = recording
        return env

    spec = ActorSpec(env_id, NetworkConfig(hidden_sizes=(8,)), 4, 20, seed=3, policy_impl="numpy")
    actor = Actor(spec, env_factory=factory)
    u, info = actor.unroll()
    reset = u["reset"]
    # b (columns 1 and 3) is absent at the start: its first step is masked
    np.testing.assert_array_equal(reset[0], [False, True, False, True])
    for t in range(1, 21):
        terminal = u["terminated"][t - 1] | u["truncated"][t - 1]
        np.testing.assert_array_equal(reset[t], seen[t - 1] | terminal, err_msg=f"step {t}")
    np.testing.assert_array_equal(u["first"][1:], reset[:-1])
    # the unmasked steps' rewards are each agent's own: 1 for the action that is its bit
    live = ~reset[:-1]
    bits = u["observation"][:-1, :, 0].astype(np.int64)
    np.testing.assert_array_equal(u["reward"][live], (u["action"] == bits)[live].astype(np.float32))
    # episodes: a plays 6 steps, b the 3 from its arrival to its leaving
    assert sorted(set(info["episode_lengths"].tolist())) == [3, 6]
    assert np.all(info["episode_returns"] <= info["episode_lengths"])
    actor.close()


def test_an_inactive_report_of_another_shape_ends_acting_in_one_line():
    """A vector reporting tfv_inactive for fewer columns than it has: EnvFailure naming
    the info key and both shapes, not a report silently ignored."""
    from tfagents_vtrace.envs.failures import EnvFailure
    from tfagents_vtrace.networks import NetworkConfig
    from tfagents_vtrace.runtime.acting.actor import Actor, ActorSpec

    env_id = resolve_env(games.make_relay)

    def factory(seed):
        env = make_vector_env(env_id, 4, seed)
        step = env.step

        def short(actions):
            obs, reward, terminated, truncated, infos = step(actions)
            return obs, reward, terminated, truncated, {**infos, INACTIVE: np.zeros(3, bool)}

        env.step = short
        return env

    spec = ActorSpec(env_id, NetworkConfig(hidden_sizes=(8,)), 4, 4, seed=3, policy_impl="numpy")
    actor = Actor(spec, env_factory=factory)
    try:
        with pytest.raises(EnvFailure, match=r"^infos\['tfv_inactive'\]: .* shape \(4,\), "
                                             r"received shape \(3,\)$"):  # fmt: skip
            actor.unroll()
    finally:
        actor.close()


def test_an_evaluation_counts_each_agents_episode_and_no_absent_step():
    """``play`` over a game vector: a's episodes are 6 steps, b's 3 (from its arrival at step 1
    to its leaving at step 4), the steps in between out of every episode."""
    from tfagents_vtrace.export.playing import play

    env = ParallelVectorEnv(games.make_relay, 4, b_arrives=1, b_leaves=4)
    obs, info = env.reset(seed=2)

    def act(obs, first, reward, running):
        return obs[:, 0].astype(np.int64)  # the best action: every step earns 1

    returns, lengths = play(env, obs, act, np.full(4, 2), reset_info=info)
    assert sorted(lengths) == [3, 3, 3, 3, 6, 6, 6, 6]
    np.testing.assert_array_equal(returns, np.asarray(lengths, float))


def test_a_turn_by_turn_aec_game_is_refused_in_one_line_and_a_parallel_one_converted():
    pytest.importorskip("pygame")  # Connect Four's module imports it
    from pettingzoo.classic import connect_four_v3
    from pettingzoo.utils.conversions import parallel_to_aec

    with pytest.raises(ValueError, match=r"^env: connect_four_v3 is an AEC game whose agents"):
        ParallelVectorEnv(connect_four_v3.env, 2)
    # an AEC game whose agents can act at once comes back as a parallel one
    env = ParallelVectorEnv(lambda: parallel_to_aec(games.make_relay()), 4)
    obs, _ = env.reset(seed=0)
    _, reward, *_ = env.step(obs[:, 0].astype(np.int64))
    np.testing.assert_array_equal(reward, np.ones(4, np.float32))
