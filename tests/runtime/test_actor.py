"""Actors: unroll layout under NEXT_STEP autoreset, env failures, numpy policy parity."""

import gymnasium as gym
import numpy as np
import pytest

from tfagents_vtrace.networks import NetInputs, NetworkConfig
from tfagents_vtrace.runtime.actor import Actor, ActorSpec, build_network
from tfagents_vtrace.runtime.policies import NumpyMLPPolicy, TFPolicy, make_policy

T, B = 8, 4


def short_cartpole(num_envs, seed, max_episode_steps=6):
    """CartPole vector env (NEXT_STEP autoreset) whose episodes are truncated early."""
    env = gym.make_vec(
        "CartPole-v1",
        num_envs=num_envs,
        vectorization_mode="vector_entry_point",
        max_episode_steps=max_episode_steps,
    )
    env.reset(seed=seed)
    return env


class FailingVectorEnv(gym.vector.VectorWrapper):
    """Raises RuntimeError on every ``every``-th call to step() (counted across instances of
    a process), at most ``max_failures`` times in all (None: no limit)."""

    calls = 0
    failures = 0

    def __init__(self, env, every, max_failures=None):
        super().__init__(env)
        self.every, self.max_failures = every, max_failures

    def step(self, actions):
        FailingVectorEnv.calls += 1
        limited = self.max_failures is not None and FailingVectorEnv.failures >= self.max_failures
        if FailingVectorEnv.calls % self.every == 0 and not limited:
            FailingVectorEnv.failures += 1
            raise RuntimeError("simulated environment crash")
        return self.env.step(actions)


def _actor(env_factory, impl="auto", num_envs=B):
    spec = ActorSpec("CartPole-v1", NetworkConfig(hidden_sizes=(16,)), num_envs, T, seed=3,
                     policy_impl=impl)  # fmt: skip
    return Actor(spec, env_factory=env_factory)


@pytest.mark.parametrize("impl", ["tf", "numpy"])
def test_unroll_layout_follows_next_step_autoreset(impl):
    actor = _actor(lambda seed: short_cartpole(B, seed), impl)
    first_unroll, _ = actor.unroll()
    u, info = actor.unroll()
    # One-step overlap: the last entry of an unroll is the first of the next.
    for key in ("observation", "first", "reset", "prev_action", "prev_reward"):
        np.testing.assert_array_equal(u[key][0], first_unroll[key][T])
    assert u["observation"].shape == (T + 1, B, 4) and u["action"].shape == (T, B)
    assert u["policy"]["logits"].shape == (T, B, 2)
    ended = u["terminated"] | u["truncated"]
    assert u["truncated"].any(), "episodes of 6 steps must be truncated within 2 unrolls"
    np.testing.assert_array_equal(u["reset"][1:], ended)  # final observation after an end
    np.testing.assert_array_equal(u["first"][1:], u["reset"][:-1])  # new episode after reset
    assert np.all(u["reward"][u["reset"][:-1]] == 0.0)  # reset steps earn nothing
    assert not np.any(ended & u["reset"][:-1])  # a reset step never ends an episode
    assert np.all(u["prev_action"][u["first"]] == 0) and np.all(u["prev_reward"][u["first"]] == 0)
    keep = ~u["first"][1:]
    np.testing.assert_array_equal(u["prev_action"][1:][keep], u["action"][keep])
    assert np.all(info["episode_lengths"] == 6) and np.all(info["episode_returns"] == 6.0)


def test_env_failure_drops_the_unroll_and_recreates_the_env():
    FailingVectorEnv.calls = FailingVectorEnv.failures = 0
    actor = _actor(lambda seed: FailingVectorEnv(short_cartpole(B, seed), every=13))
    results = [actor.unroll() for _ in range(12)]
    dropped = sum(r is None for r in results)
    assert dropped >= 5 and actor.env_restarts == dropped
    kept = [r for r in results if r is not None]
    assert kept and kept[-1][1]["env_restarts"] <= actor.env_restarts
    for u, _ in kept:  # every kept unroll is complete and consistent
        assert np.isfinite(u["observation"]).all()
        np.testing.assert_array_equal(u["first"][1:], u["reset"][:-1])


def test_unroll_info_reports_where_the_actor_time_went():
    actor = _actor(lambda seed: short_cartpole(B, seed))
    actor.set_weights(
        3, build_network(NetworkConfig(hidden_sizes=(16,)), "CartPole-v1").get_weights()
    )
    _, info = actor.unroll()
    assert info["env_time"] > 0 and info["inference_time"] > 0 and info["weights_time"] > 0
    _, info = actor.unroll()  # counted afresh for each unroll: no weights loaded since
    assert info["env_time"] > 0 and info["inference_time"] > 0 and info["weights_time"] == 0


def test_numpy_policy_matches_the_network():
    net = build_network(NetworkConfig(hidden_sizes=(16, 8)), "CartPole-v1")
    assert NumpyMLPPolicy.supports(net)
    policy = make_policy(net, "auto", greedy=True)
    assert isinstance(policy, NumpyMLPPolicy)
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    zeros = np.zeros(5, np.int32), np.zeros(5, np.float32)
    out = net(NetInputs(obs, np.zeros(5, bool), *zeros), ())
    np.testing.assert_allclose(policy.logits(obs), out.policy["logits"].numpy(), rtol=1e-5,
                               atol=1e-6)  # fmt: skip
    action, _, _ = policy.step(obs, np.zeros(5, bool), *zeros, ())
    np.testing.assert_array_equal(action, np.argmax(out.policy["logits"].numpy(), -1))
    timed = build_network(
        NetworkConfig(hidden_sizes=(8,), core="lstm", lstm_size=8, use_time_step=True),
        "CartPole-v1",
    )
    assert not NumpyMLPPolicy.supports(timed)
    assert isinstance(make_policy(timed, "auto"), TFPolicy)


def test_numpy_lstm_policy_matches_the_network_over_steps():
    cfg = NetworkConfig(hidden_sizes=(16,), core="lstm", lstm_size=8, use_prev_action=True,
                        use_prev_reward=True)  # fmt: skip
    net = build_network(cfg, "CartPole-v1")
    policy = make_policy(net, "auto")
    assert isinstance(policy, NumpyMLPPolicy)
    rng = np.random.default_rng(1)
    b = 5
    state_np, state_tf = policy.initial_state(b), net.initial_state(b)
    for t in range(6):
        obs = rng.normal(size=(b, 4)).astype(np.float32)
        first = rng.random(b) < (1.0 if t == 0 else 0.3)
        prev_action = rng.integers(0, 2, b).astype(np.int32)
        prev_reward = rng.normal(size=b).astype(np.float32)
        out = net(NetInputs(obs, first, prev_action, prev_reward), state_tf)
        logits, state_np = policy.logits(obs, first, prev_action, prev_reward, state_np)
        np.testing.assert_allclose(logits, out.policy["logits"].numpy(), rtol=1e-4, atol=1e-6)
        for a, s in zip(state_np, out.state):
            np.testing.assert_allclose(a, s.numpy(), rtol=1e-4, atol=1e-6)
        state_tf = out.state


@pytest.mark.parametrize("head", ["gaussian", "tanh_gaussian"])
def test_tf_policy_samples_continuous_actions_reproducibly(head):
    """Continuous heads sample through tfp, which needs an int32 seed (int64 used to fail)."""
    network = build_network(NetworkConfig(policy_head=head), "Pendulum-v1")
    obs = np.random.default_rng(0).normal(size=(3, 3)).astype(np.float32)
    args = (obs, np.ones(3, bool), np.zeros((3, 1), np.float32), np.zeros(3, np.float32), ())
    first, second = TFPolicy(network, seed=5), TFPolicy(network, seed=5)
    action, params, _ = first.step(*args)
    assert action.shape == (3, 1) and np.all(np.isfinite(action))
    np.testing.assert_array_equal(second.step(*args)[0], action)
    assert not np.array_equal(first.step(*args)[0], action)  # the call counter moves the seed
    assert set(params) == {"loc", "scale"}


class NanObservations(gym.vector.VectorWrapper):
    """Returns a NaN observation on every ``every``-th step() of this instance."""

    def __init__(self, env, every):
        super().__init__(env)
        self.every, self.calls = every, 0

    def step(self, actions):
        out = list(self.env.step(actions))
        self.calls += 1
        if self.calls % self.every == 0:
            out[0] = np.full_like(out[0], np.nan)
        return tuple(out)


def test_a_nan_observation_never_reaches_the_policy(monkeypatch):
    from tfagents_vtrace.runtime import env_failures

    monkeypatch.setattr(env_failures, "BACKOFF_S", 0.0)
    actor = _actor(lambda seed: NanObservations(short_cartpole(B, seed), every=11), impl="tf")
    seen = []
    step = actor.policy.step

    def recording_step(obs, *args):
        seen.append(np.array(obs))
        return step(obs, *args)

    actor.policy.step = recording_step
    results = [actor.unroll() for _ in range(8)]  # each new env fails in its 2nd unroll
    assert sum(r is None for r in results) == 4 and actor.env_restarts == 4
    assert all(np.isfinite(obs).all() for obs in seen)
    for r in results:
        if r is not None:
            assert np.isfinite(r[0]["observation"]).all()


def test_an_always_failing_env_raises_env_failure_after_the_cap(monkeypatch):
    from tfagents_vtrace.runtime import env_failures

    monkeypatch.setattr(env_failures, "BACKOFF_S", 0.0)
    FailingVectorEnv.calls = FailingVectorEnv.failures = 0
    actor = _actor(lambda seed: FailingVectorEnv(short_cartpole(B, seed), every=1))
    with pytest.raises(env_failures.EnvFailure, match="failed again after 5 restarts in a row; "
                       "last error: RuntimeError: simulated environment crash"):  # fmt: skip
        for _ in range(10):
            assert actor.unroll() is None
    assert actor.env_restarts == env_failures.MAX_CONSECUTIVE


def test_the_restart_backoff_doubles_and_is_capped(monkeypatch):
    from tfagents_vtrace.runtime import env_failures

    waits = []
    monkeypatch.setattr(env_failures.time, "sleep", waits.append)
    policy = env_failures.RestartPolicy(max_consecutive=6, backoff_s=0.5, max_backoff_s=4.0)
    for _ in range(6):
        policy.failed(RuntimeError("x"), "env")
    assert waits == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    policy.succeeded()
    policy.failed(RuntimeError("x"), "env")
    assert waits[-1] == 0.5  # a success resets the count


@pytest.mark.parametrize("impl", ["tf", "numpy"])
def test_an_action_outside_the_space_stops_the_actor(impl):
    from tfagents_vtrace.runtime import env_failures

    actor = _actor(lambda seed: short_cartpole(B, seed), impl)
    step = actor.policy.step

    def broken_step(*args):  # what NaN logits can make a categorical sampler return
        action, params, state = step(*args)
        return np.full_like(action, 2), params, state

    actor.policy.step = broken_step
    with pytest.raises(env_failures.InvalidAction, match=r"chose \[2, 2, 2, 2\] outside"):
        actor.unroll()


def test_a_replacement_actor_draws_new_seeds():
    seeds = []

    def factory(seed):
        seeds.append(seed)
        return short_cartpole(B, seed)

    spec = ActorSpec("CartPole-v1", NetworkConfig(hidden_sizes=(16,)), B, T, seed=3)
    first = Actor(spec, 1, env_factory=factory)
    replacement = Actor(spec, 1, env_factory=factory, env_restarts=1)  # e.g. a new Ray actor
    assert seeds[0] != seeds[1] and replacement.env_restarts == 1
    a = first.unroll()[0]["action"]
    b = replacement.unroll()[0]["action"]
    assert not np.array_equal(a, b)  # its sampling does not replay the predecessor's
