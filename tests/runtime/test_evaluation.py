"""Greedy evaluation: cancelling, and evaluations in a thread beside training."""

import threading

import gymnasium as gym
import numpy as np
import pytest

from tfagents_vtrace.runtime.acting.evaluation import (
    BackgroundEvaluations,
    EvaluationCancelled,
    Evaluator,
    evaluation_seed,
)


class FirstAction:
    """A greedy-policy stand-in: always action 0; ``weights`` records set_weights."""

    def __init__(self):
        self.weights = None

    def set_weights(self, weights):
        self.weights = weights

    def initial_state(self, n):
        return ()

    def step(self, obs, first, prev_action, prev_reward, state):
        return np.zeros(len(obs), np.int64), {}, state


def _cartpoles(num_envs, seed):
    return gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * num_envs)


def test_a_cancelled_evaluation_raises_and_is_not_retried():
    calls = []

    def factory(num_envs, seed):
        calls.append(seed)
        return _cartpoles(num_envs, seed)

    evaluator = Evaluator(factory, FirstAction(), num_episodes=2)
    assert evaluator.run()["eval_length"] > 0
    evaluator.cancel()
    with pytest.raises(EvaluationCancelled):
        evaluator.run()
    assert len(calls) == 1  # not recreated and retried as a failing env would be
    evaluator.close()


class Gated:
    """An evaluator whose runs wait for ``gate`` and return the weights they were given."""

    def __init__(self):
        self.gate, self.weights = threading.Event(), None
        self.cancelled = False

    def set_weights(self, weights):
        self.weights = weights

    def run(self, key=None):
        assert self.gate.wait(10)
        return {"eval_return": float(self.weights[0]), "key": key}

    def cancel(self):
        self.cancelled = True
        self.gate.set()


def test_background_evaluations_finish_in_order_with_their_own_weights():
    evaluator = Gated()
    background = BackgroundEvaluations(evaluator, wall_time=lambda: 12.5)
    background.submit([np.array(1.0)], step=10)
    background.submit([np.array(2.0)], step=20)
    assert background.finished() == [] and len(background) == 2  # still playing
    evaluator.gate.set()
    done = background.finished(keep=0)
    rows = [(row["eval_return"], row["eval_step"], row["wall_time"], row["key"]) for row, _ in done]
    assert rows == [(1.0, 10, 12.5, 10), (2.0, 20, 12.5, 20)]  # keyed by the weights' step
    assert [float(w[0]) for _, w in done] == [1.0, 2.0] and len(background) == 0
    background.close()
    assert evaluator.cancelled


def test_keep_bounds_the_pending_evaluations():
    evaluator = Gated()
    background = BackgroundEvaluations(evaluator, wall_time=lambda: 0.0)
    for step in (1, 2, 3):
        background.submit([np.array(float(step))], step=step)
    timer = threading.Timer(0.2, evaluator.gate.set)
    timer.start()
    done = background.finished(keep=1)  # waits for the first two
    assert [row["eval_step"] for row, _ in done][:2] == [1, 2] and len(background) <= 1
    background.close()
    timer.join()


class FirstObservations(FirstAction):
    """Action 0; records the observations of each evaluation's first step."""

    def __init__(self):
        super().__init__()
        self.starts = []

    def step(self, obs, first, prev_action, prev_reward, state):
        if first.all():
            self.starts.append(np.array(obs))
        return super().step(obs, first, prev_action, prev_reward, state)


def _start_states(seed, keys, num_episodes=5):
    policy = FirstObservations()
    evaluator = Evaluator(make_cartpoles, policy, num_episodes=num_episodes, seed=seed)
    for key in keys:
        evaluator.run(key=key)
    evaluator.close()
    return policy.starts


def make_cartpoles(num_envs, seed):
    env = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * num_envs)
    env.reset(seed=seed)
    return env


def test_evaluations_of_a_run_and_of_neighbouring_seeds_start_from_their_own_states():
    # Consecutive integer reset seeds (the run's seed + k, as before) gave evaluation k of
    # seed S and evaluation k - 1 of seed S + 1 the same environments.
    starts = np.concatenate(_start_states(0, [0, 1, 2]) + _start_states(1, [0, 1, 2]))
    assert len(starts) == 30
    assert len(np.unique(starts.round(8), axis=0)) == 30


def test_an_evaluation_key_replays_the_same_start_states():
    first, again = _start_states(3, [7, 250_000]), _start_states(3, [250_000])
    np.testing.assert_array_equal(first[1], again[0])  # a resumed run evaluates as before
    assert not np.array_equal(first[0], first[1])
    numbered = _start_states(3, [None, None])
    np.testing.assert_array_equal(numbered[0], _start_states(3, [0])[0])
    assert evaluation_seed(3, 0) != evaluation_seed(3, 1) != evaluation_seed(4, 0)
    assert 0 <= evaluation_seed(2**31, 2**40) < 2**31
