"""benchmarks/multi_agent.py's scripted player for MPE's simple_spread: positions read back
from an observation against the simulator's own state, the assignment against every
permutation's cost by hand, and the player far above random."""

import numpy as np
import pytest

from tests.bench_modules import load_benchmark

pytest.importorskip("mpe2")


def test_positions_from_each_agents_observation_are_the_simulators():
    from mpe2 import simple_spread_v3

    bench = load_benchmark("multi_agent")
    env = simple_spread_v3.parallel_env(N=3)
    obs, _ = env.reset(seed=4)
    for _ in range(3):
        obs, *_ = env.step({a: 4 for a in env.agents})  # move so velocities are not zero
    world = env.unwrapped.world
    truth_agents = np.array([a.state.p_pos for a in world.agents])
    truth_landmarks = np.array([lm.state.p_pos for lm in world.landmarks])
    for i, name in enumerate(env.possible_agents):
        vel, agents, landmarks = bench.spread_positions(np.asarray(obs[name], np.float64), i)
        np.testing.assert_allclose(vel, world.agents[i].state.p_vel, atol=1e-6)
        np.testing.assert_allclose(agents, truth_agents, atol=1e-6)
        np.testing.assert_allclose(landmarks, truth_landmarks, atol=1e-6)
    env.close()


def test_the_assignment_has_the_least_total_distance():
    bench = load_benchmark("multi_agent")
    agents = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    landmarks = np.array([[0.0, 1.1], [0.1, 0.0], [1.0, 0.2]])
    # by hand: agent 0 -> landmark 1 (0.1), agent 1 -> landmark 2 (0.2), agent 2 -> 0 (0.1)
    assert bench.best_assignment(agents, landmarks) == (1, 2, 0)


def test_the_scripted_player_is_far_above_random():
    bench = load_benchmark("multi_agent")
    scripted = bench.play_spread(lambda o, i, rng: bench.spread_action(o, i), 10, seed=1)
    random = bench.play_spread(lambda o, i, rng: int(rng.integers(5)), 10, seed=1)
    assert np.mean(scripted) > np.mean(random) + 10.0


def test_the_simpler_rules_fall_between_random_and_the_heuristic():
    """nearest landmark < own-index landmark < the assignment, all above random: the
    ladder a trained policy is placed on (docs/results/multi_agent.md)."""
    bench = load_benchmark("multi_agent")
    means = {
        target: np.mean(bench.play_spread(
            lambda o, i, rng, t=target: bench.spread_action(o, i, target=t), 20, seed=2))
        for target in ("nearest", "own", "assigned")
    }  # fmt: skip
    random = np.mean(bench.play_spread(lambda o, i, rng: int(rng.integers(5)), 20, seed=2))
    assert random + 5 < means["nearest"] < means["own"] < means["assigned"], (random, means)
