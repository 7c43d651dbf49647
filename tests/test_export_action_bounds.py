"""Box actions stay in the action space's bounds where they leave a policy (issue #54).

A Gaussian policy's draws, and its mean, are unbounded. The exported policy clips its
``action`` output to the Box in every format (SavedModel ``action``, ``greedy_action`` and
``action_from_noise``, the LiteRT and ONNX files) and reports the log-probability of the
unclipped draw; the training actor records the unclipped draw (the learner scores it) and
sends the clipped action to ``env.step``. The environment here, ``BoundedEnv`` (a [0, 3]
Box), refuses any action outside its bounds, and the policy has a large std (5) and, for
the greedy checks, a mean far below the box (-4), so that without the clip nearly every
action would leave it. The parity check of every format still passes.
"""

import importlib.util

import gymnasium as gym
import numpy as np
import pytest

from tfagents_vtrace.export import artefacts, parity
from tfagents_vtrace.networks import NetworkConfig, make_network

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
BOX = gym.spaces.Box(0.0, 3.0, (2,), np.float32)
FORMATS = {"tflite": ("ai_edge_litert",), "onnx": ("tf2onnx", "onnxruntime")}
N = 512


class BoundedEnv(gym.Env):
    """Random observations, episodes of 8 steps; ``step`` raises ValueError for an action
    outside the [0, 3] Box and keeps every action it took in ``taken``."""

    observation_space, action_space = OBS, BOX

    def __init__(self):
        self._rng, self._left, self.taken = np.random.default_rng(0), 0, []

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._left = 8
        return self._rng.uniform(-1, 1, 3).astype(np.float32), {}

    def step(self, action):
        action = np.asarray(action, np.float32)
        if not (np.all(action >= 0.0) and np.all(action <= 3.0)):
            raise ValueError(f"action {action} outside [0, 3]")
        self.taken.append(action.copy())
        self._left -= 1
        obs = self._rng.uniform(-1, 1, 3).astype(np.float32)
        return obs, float(action.sum()), self._left <= 0, False, {}


def _installed(fmt):
    return all(importlib.util.find_spec(m) is not None for m in FORMATS[fmt])


def _network(loc=None, head="gaussian"):
    """A Gaussian policy of std 5 on the [0, 3] Box; ``loc``: its mean made this constant
    (the loc layer's kernel zeroed, its bias set)."""
    import keras

    keras.utils.set_random_seed(0)
    config = NetworkConfig(hidden_sizes=(8,), policy_head=head, init_std=5.0)
    net = make_network(config, OBS, BOX)
    if loc is not None:
        layer = net.policy_head.loc
        layer.kernel.assign(np.zeros(layer.kernel.shape, np.float32))
        layer.bias.assign(np.full(layer.bias.shape, loc, np.float32))
    return net


def _inputs(batch, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "observation": rng.uniform(-1, 1, (batch, 3)).astype(np.float32),
        "first": np.ones(batch, bool),
        "prev_action": np.zeros((batch, 2), np.float32),
        "prev_reward": np.zeros(batch, np.float32),
        "state_0": np.zeros((batch, 1), np.float32),
    }


def _in_bounds(actions):
    actions = np.asarray(actions)
    return bool(np.all(actions >= BOX.low) and np.all(actions <= BOX.high))


def test_saved_model_actions_are_clipped_and_log_prob_is_the_draws(tmp_path):
    import tensorflow as tf

    import tfagents_vtrace as tv
    from tfagents_vtrace.export.saved_model import export_policy

    path = export_policy(_network(), tmp_path / "policy")
    policy = tv.load_policy(path)
    obs = _inputs(N)["observation"]
    sampled, _ = policy.step(obs, greedy=False)
    assert sampled.shape == (N, 2) and _in_bounds(sampled)
    # The draws left the box (std 5 around a mean near 0): both bounds are reached.
    assert (sampled == 0.0).mean() > 0.2 and (sampled == 3.0).mean() > 0.1
    # The raw SavedModel: action, greedy_action and action_from_noise.
    loaded = tf.saved_model.load(str(path))
    kw = {k: v for k, v in _inputs(N).items() if k != "state_0"}
    kw["state"] = (tf.zeros([N, 1]),)
    noise = np.random.default_rng(1).standard_normal((N, 2)).astype(np.float32)
    out = loaded.action_from_noise(**kw, noise=noise)
    draw = out["loc"].numpy() + out["scale"].numpy() * noise
    np.testing.assert_allclose(out["action"].numpy(), np.clip(draw, 0.0, 3.0), atol=1e-6)
    # log_prob is the unclipped draw's: N(draw; loc, scale) in numpy.
    scale = out["scale"].numpy().astype(np.float64)
    want = (-0.5 * noise.astype(np.float64) ** 2 - np.log(scale) - 0.5 * np.log(2 * np.pi)).sum(-1)
    np.testing.assert_allclose(out["log_prob"].numpy(), want, atol=1e-4)
    assert _in_bounds(loaded.action(**kw)["action"].numpy())


def test_greedy_actions_outside_the_box_are_clipped(tmp_path):
    import tfagents_vtrace as tv
    from tfagents_vtrace.export.saved_model import export_policy

    low = tv.load_policy(export_policy(_network(loc=-4.0), tmp_path / "low"))
    high = tv.load_policy(export_policy(_network(loc=7.0), tmp_path / "high"))
    obs = _inputs(16)["observation"]
    np.testing.assert_array_equal(low.step(obs, greedy=True)[0], np.zeros((16, 2), np.float32))
    np.testing.assert_array_equal(high.step(obs, greedy=True)[0], np.full((16, 2), 3.0))


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_litert_and_onnx_actions_in_bounds_and_parity_passes(tmp_path, fmt):
    if not _installed(fmt):
        pytest.skip(f"the {fmt} extra is not installed")
    for loc in (None, -4.0):
        net = _network(loc=loc)
        path = artefacts.write(net, tmp_path / f"p{loc}.{fmt}", fmt)
        runner = parity.open_runner(path)
        inputs = _inputs(N)
        noise = np.random.default_rng(2).standard_normal((N, 2)).astype(np.float32)
        sample, greedy = runner.sample(inputs, noise)["action"], runner.greedy(inputs)["action"]
        assert _in_bounds(sample) and _in_bounds(greedy)
        assert (sample == 0.0).any() and (sample == 3.0).any()
        if loc is not None:
            np.testing.assert_array_equal(greedy, np.zeros((N, 2), np.float32))
        report = artefacts.check(net, path, fmt, BoundedEnv(), steps=60)
        assert report.passed, report.failures


def test_saved_model_parity_passes(tmp_path):
    net = _network()
    path = artefacts.write(net, tmp_path / "policy")
    report = artefacts.check(net, path, "saved_model", BoundedEnv(), steps=60)
    assert report.passed and report.episodes >= 5, report.failures


def test_evaluate_samples_in_bounds(tmp_path):
    """tv.evaluate of a sampling policy on an env that refuses out-of-bounds actions."""
    import tfagents_vtrace as tv
    from tfagents_vtrace.export.saved_model import export_policy

    path = export_policy(_network(), tmp_path / "policy")
    result = tv.evaluate(path, BoundedEnv, episodes=4, greedy=False)
    assert result["episodes"] == 4 and result["mean_length"] == 8


def test_actor_records_the_draw_and_steps_the_env_with_it_clipped():
    """The unroll keeps the unclipped draw (what the learner scores); the env took it
    clipped to the Box."""
    from tfagents_vtrace.runtime.acting.actor import Actor, ActorSpec

    envs = []

    def factory(seed):
        vector = gym.vector.SyncVectorEnv([BoundedEnv] * 4)
        vector.reset(seed=seed)
        envs.append(vector)
        return vector

    net = _network()
    spec = ActorSpec("BoundedEnv", net.config, num_envs=4, unroll_length=6, seed=0)
    actor = Actor(spec, network=net, env_factory=factory)
    u, _ = actor.unroll()
    drawn = u["action"]  # [T, B, 2]
    assert not _in_bounds(drawn)  # the draws left the box ...
    taken = np.stack([np.stack(env.taken) for env in envs[-1].envs], axis=1)  # [T, B, 2]
    np.testing.assert_array_equal(taken, np.clip(drawn, 0.0, 3.0))  # ... the env got them clipped
    keep = ~u["first"][1:]
    np.testing.assert_array_equal(u["prev_action"][1:][keep], drawn[keep])  # the draw, fed back


def test_taac_actions_stay_in_bounds_at_saturation():
    """TAAC maps its [-1, 1] action affinely to the Box: float rounding puts the top one ulp
    past these bounds (numpy: -8.639602 + 2 * 0.5 * (9.318981 + 8.639602) = 9.318982); the
    exported action is clipped to them."""
    import tensorflow as tf

    from tfagents_vtrace.agents.taac import TaacConfig, TaacLearner
    from tfagents_vtrace.agents.taac.export import TaacPolicyModule

    low, high = np.float32(-8.639602), np.float32(9.318981)
    one = np.float32(1.0)
    assert low + (one + one) * np.float32(0.5) * (high - low) > high  # the rounding exists
    box = gym.spaces.Box(low, high, (1,), np.float32)
    config = TaacConfig(trajectory="constant", actor_hidden_sizes=(8,),
                        critic_hidden_sizes=(8,), jit_compile=False)  # fmt: skip
    module = TaacPolicyModule(TaacLearner(config, OBS.shape, 1, seed=0), box)
    n = 4
    state = module.get_initial_state(tf.constant(n))
    args = (_inputs(n)["observation"], np.ones(n, bool), np.zeros((n, 1), np.float32),
            np.zeros(n, np.float32), state)  # fmt: skip
    for sign in (1.0, -1.0):  # tanh saturates at +-1 exactly; b_noise 0: a new trajectory
        noise = np.full((n, 1), 100.0 * sign, np.float32)
        out = module.action_from_noise(*args, noise, np.zeros(n, np.float32))
        np.testing.assert_array_equal(out["unit_action"].numpy(), np.full((n, 1), sign))
        action = out["action"].numpy()
        assert np.all(action >= low) and np.all(action <= high)
        np.testing.assert_array_equal(action, np.full((n, 1), high if sign > 0 else low))
