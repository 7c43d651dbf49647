"""An actor's environment groups (``env_groups``): vectors of ``num_envs / G`` stepped in
turn, one group's environments stepping while the policy acts for another."""

import threading

import numpy as np
import pytest

from tests.runtime.test_actor import FailingVectorEnv, check_layout, short_cartpole
from tfagents_vtrace.networks import NetInputs, NetworkConfig
from tfagents_vtrace.runtime.acting.actor import Actor, ActorSpec, build_network
from tfagents_vtrace.runtime.config import RunConfig

T, B = 8, 4


def _actor(env_factory, groups=2, impl="numpy", network=None):
    spec = ActorSpec("CartPole-v1", NetworkConfig(hidden_sizes=(16,)), B, T, seed=3,
                     policy_impl=impl, env_groups=groups)  # fmt: skip
    return Actor(spec, network=network, env_factory=env_factory)


@pytest.mark.parametrize("impl", ["tf", "numpy"])
def test_two_groups_fill_one_unroll_with_the_layout_of_one(impl):
    made = []

    def factory(seed):
        made.append(seed)
        return short_cartpole(B // 2, seed)

    net = build_network(NetworkConfig(hidden_sizes=(16,)), "CartPole-v1")
    actor = _actor(factory, impl=impl, network=net)
    first_unroll, _ = actor.unroll()
    u, info = actor.unroll()
    assert len(made) == 2 and made[0] != made[1]  # one vector per group, seeded apart
    for key in ("observation", "first", "reset", "prev_action", "prev_reward"):
        np.testing.assert_array_equal(u[key][0], first_unroll[key][T])
    assert u["observation"].shape == (T + 1, B, 4) and u["policy"]["logits"].shape == (T, B, 2)
    check_layout(u)
    keep = ~u["first"][1:]
    np.testing.assert_array_equal(u["prev_action"][1:][keep], u["action"][keep])
    # each column's observations follow from its own environment: CartPole's state moves
    # by less than a step's worth between two steps of one episode
    same_episode = ~u["first"][1:] & ~u["reset"][:-1]
    moved = np.abs(u["observation"][1:] - u["observation"][:-1]).max(-1)
    assert np.all(moved[same_episode] < 0.5)
    assert np.all(info["episode_lengths"] == 6) and np.all(info["episode_returns"] == 6.0)
    # the behaviour logits are the network's on each column's own observation
    for t in range(T):
        out = net(NetInputs(u["observation"][t], u["first"][t], u["prev_action"][t],
                            u["prev_reward"][t]), ())  # fmt: skip
        np.testing.assert_allclose(u["policy"]["logits"][t], out.policy["logits"], atol=1e-5)


def test_one_groups_environments_step_while_the_policy_acts_for_the_other():
    """Group 0's environment step k waits until the policy has acted for group 1 at step k
    (its call 2k + 2, the calls taking turns 0, 1, 0, 1, ...): with the steps overlapped it
    goes on at once, run one after the other it would time out."""
    calls = threading.Condition()
    count, overlapped, steps = [0], [0], [0]

    class WaitsForThePolicy(FailingVectorEnv):
        def step(self, actions):
            k, steps[0] = steps[0], steps[0] + 1
            with calls:
                if calls.wait_for(lambda: count[0] >= 2 * k + 2, timeout=5.0):
                    overlapped[0] += 1
            return self.env.step(actions)

    made = []

    def factory(seed):
        env = short_cartpole(B // 2, seed)
        made.append(env)
        return WaitsForThePolicy(env, every=10**9) if len(made) == 1 else env

    actor = _actor(factory)
    step = actor.policy.step

    def acting(obs, *args):
        out = step(obs, *args)
        with calls:
            count[0] += 1
            calls.notify_all()
        return out

    actor.policy.step = acting
    actor.unroll()
    assert overlapped[0] == T


def test_a_whole_vector_failure_cuts_only_its_groups_columns():
    FailingVectorEnv.calls = FailingVectorEnv.failures = 0
    vectors = []

    def factory(seed):
        vectors.append(seed)
        env = short_cartpole(B // 2, seed, max_episode_steps=500)
        return FailingVectorEnv(env, every=5, max_failures=1) if len(vectors) == 2 else env

    actor = _actor(factory)
    u, info = actor.unroll()
    assert info["env_restarts"] == 1 and len(vectors) == 3  # group 1's vector made again
    t = 4  # group 1's fifth step failed
    assert u["reset"][t, 2:].all() and not u["reset"][t, :2].any()
    assert u["truncated"][t - 1, 2:].all() and not u["truncated"][t - 1, :2].any()
    assert u["first"][t + 1, 2:].all() and not u["first"][1:, :2].any()  # group 0 goes on
    check_layout(u)


def test_groups_must_divide_the_environments():
    with pytest.raises(ValueError, match=r"^env_groups: expected a divisor of num_envs \(4\)"):
        ActorSpec("CartPole-v1", NetworkConfig(), 4, T, env_groups=3)
    with pytest.raises(ValueError, match=r"^env_groups: expected a divisor of num_envs \(16\)"):
        RunConfig(num_envs=16, env_groups=5)
    with pytest.raises(ValueError, match="env_groups"):
        RunConfig(env_groups=0)


def test_taac_refuses_groups_in_one_line():
    import tfagents_vtrace as tv

    with pytest.raises(ValueError, match=r"^env_groups: TAAC's rollout steps"):
        tv.make_configs("taac", env="Pendulum-v1", env_groups=2, num_envs=2)
