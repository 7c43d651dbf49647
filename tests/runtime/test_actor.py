"""Actors: unroll layout under NEXT_STEP autoreset, env failures (whole vectors and single
sub-environments, cut where they fail), numpy policy parity."""

import gymnasium as gym
import numpy as np
import pytest

from tfagents_vtrace.networks import NetInputs, NetworkConfig
from tfagents_vtrace.runtime.acting.actor import Actor, ActorSpec, build_network
from tfagents_vtrace.runtime.acting.policies import NumpyMLPPolicy, TFPolicy, make_policy

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


def check_layout(u):
    """The NEXT_STEP layout's invariants that hold with cut episodes too."""
    ended = u["terminated"] | u["truncated"]
    np.testing.assert_array_equal(u["first"][1:], u["reset"][:-1])  # new episode after reset
    assert np.all(u["reward"][u["reset"][:-1]] == 0.0)  # reset steps earn nothing
    assert not np.any(ended & u["reset"][:-1])  # a reset step never ends an episode
    assert np.all(u["prev_action"][u["first"]] == 0) and np.all(u["prev_reward"][u["first"]] == 0)
    assert np.all(u["reset"][1:][ended])  # an ended episode's final observation follows
    assert np.isfinite(u["observation"]).all()


def test_a_whole_vector_failure_keeps_the_unroll_and_cuts_every_episode_there():
    FailingVectorEnv.calls = FailingVectorEnv.failures = 0
    actor = _actor(lambda seed: FailingVectorEnv(short_cartpole(B, seed), every=13))
    results = [actor.unroll() for _ in range(12)]  # 96 steps: failures at calls 13, 26...
    assert FailingVectorEnv.failures == 7 and actor.env_restarts == 7
    assert results[-1][1]["env_restarts"] == 7
    failures = [call - 1 for call in range(13, 97, 13)]  # steps: one call per step
    for step in failures:
        u, _ = results[step // T]
        t = step % T
        was = u["first"][t]  # cut at its first observation: nothing to truncate
        assert u["reset"][t].all() and np.all(u["reward"][t] == 0)
        if t > 0:
            np.testing.assert_array_equal(u["truncated"][t - 1] | u["terminated"][t - 1], ~was)
        assert u["first"][t + 1].all()
    for u, _ in results:
        check_layout(u)


def test_a_failing_sub_environment_is_cut_alone(monkeypatch):
    from tfagents_vtrace.envs.resilient import ResilientSyncVectorEnv

    def vector(fail_at):
        calls = [0]  # of sub-environment 0 and its replacements

        def make():
            env = gym.make("CartPole-v1", max_episode_steps=6)
            step = env.step

            def flaky(action):
                calls[0] += 1
                if calls[0] == fail_at:
                    raise RuntimeError("crash")
                return step(action)

            env.step = flaky
            return env

        def factory(seed):
            plain = lambda: gym.make("CartPole-v1", max_episode_steps=6)  # noqa: E731
            env = ResilientSyncVectorEnv([make] + [plain] * (B - 1), name="Flaky-v0")
            env.reset(seed=seed)
            return env

        return _actor(factory, impl="numpy")

    clean, flaky = vector(None), vector(11)  # sub-environment 0's 11th step: vector step 11
    for k in range(3):
        a, _ = clean.unroll()
        b, info = flaky.unroll()
        for key in ("observation", "action", "reward", "first", "reset", "truncated"):
            np.testing.assert_array_equal(a[key][:, 1:], b[key][:, 1:])  # the others as if
        check_layout(b)
        cut = b["reset"][:-1, 0] & ~a["reset"][:-1, 0]  # column 0 differs after the cut
        if k < 2:  # (the reset step 6 makes no call: the 11th call is step 11 = 8 + 3)
            assert np.flatnonzero(cut).tolist() == ([3] if k == 1 else [])
        if k == 1:
            assert b["truncated"][2, 0] and not a["truncated"][2, 0] and b["first"][4, 0]
    assert flaky.env_restarts == 1 and info["env_restarts"] == 1
    assert flaky.env.label == "actor 0: environment CartPole-v1"


def test_a_simulator_failing_on_five_percent_of_its_steps_runs_on_with_the_defaults():
    import tests.user_envs  # noqa: F401 - registers FlakyCartPole-v0

    spec = ActorSpec("FlakyCartPole-v0", NetworkConfig(hidden_sizes=(16,)), 16, T, seed=3,
                     env_kwargs={"failure_rate": 0.05})  # fmt: skip
    actor = Actor(spec)
    episodes = 0
    for _ in range(100):  # 12,800 sub-environment steps, about 640 failures
        u, info = actor.unroll()
        check_layout(u)
        episodes += len(info["episode_returns"])
    assert 400 < actor.env_restarts < 900 and episodes > 0


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


def test_a_nan_observation_never_reaches_the_policy():
    actor = _actor(lambda seed: NanObservations(short_cartpole(B, seed), every=11), impl="tf")
    seen = []
    step = actor.policy.step

    def recording_step(obs, *args):
        seen.append(np.array(obs))
        return step(obs, *args)

    actor.policy.step = recording_step
    results = [actor.unroll() for _ in range(8)]  # 64 steps: each new vector fails at its 11th
    assert actor.env_restarts == 5
    assert all(np.isfinite(obs).all() for obs in seen) and len(seen) == 64
    for u, _ in results:
        check_layout(u)


def test_an_always_failing_env_raises_env_failure_after_the_cap(monkeypatch):
    from tfagents_vtrace.envs import failures as env_failures

    monkeypatch.setattr(env_failures.time, "sleep", lambda s: None)
    FailingVectorEnv.calls = FailingVectorEnv.failures = 0
    actor = _actor(lambda seed: FailingVectorEnv(short_cartpole(B, seed), every=1))
    with pytest.raises(env_failures.EnvFailure) as error:
        for _ in range(2):  # eight steps of the first unroll fail, then the ninth
            actor.unroll()
    assert str(error.value) == (
        "actor 0: environment CartPole-v1 failed 9 times in a row (without one successful step; "
        "the limit is 8); last error: RuntimeError: simulated environment crash"
    )
    assert actor.env_restarts == env_failures.MAX_CONSECUTIVE


@pytest.mark.parametrize("impl", ["tf", "numpy"])
def test_an_action_outside_the_space_stops_the_actor(impl):
    from tfagents_vtrace.envs import failures as env_failures

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
