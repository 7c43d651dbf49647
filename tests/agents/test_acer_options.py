"""ACER against chainerrl's ``ACER``
(https://github.com/chainer/chainerrl/blob/master/chainerrl/agents/acer.py), issue #16: the config
defaults, V = sum_a pi Q on a real network, the per-step statistics, the unshared models, the
worker's on-policy update, the Poisson replay count and the flags.

Ground truth is numpy written in the reference's notation (``tests/agents/test_acer_loss``'s
``reference_discrete`` for the update; explicit loops for the statistics and the forward
passes), never this package's own output.
"""

import dataclasses
import json
import os
import subprocess
import sys
import threading
import types
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tests.agents.test_acer_loss import episode_parts, make_batch, reference_discrete, softmax
from tfagents_vtrace.agents.acer import AcerAgent, AcerConfig, AcerLearner, AcerWorker, acer_loss
from tfagents_vtrace.networks import NetInputs, NetworkConfig, make_network
from tfagents_vtrace.runtime.acting.actor import build_network

ROOT = Path(__file__).resolve().parents[2]
OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
DISCRETE = gym.spaces.Discrete(3)
BOX = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)


def test_config_defaults_are_the_references():
    """chainerrl ``ACER.__init__`` defaults (item 2); t_max and gamma have none there."""
    cfg = AcerConfig()
    reference = dict(
        entropy_cost=1e-2, pi_loss_coef=1.0, q_loss_coef=0.5, use_trust_region=True,
        trust_region_alpha=0.99, trust_region_delta=1.0, truncation_threshold=10.0,
        disable_online_update=False, n_times_replay=8, replay_start_size=10**4,
        normalize_loss_by_steps=True, use_q_opc=False, stats_decay=0.999,
        trust_region_params="mean_var", on_policy_importance_weights=False,
        replay_poisson=False,
    )  # fmt: skip
    assert {k: getattr(cfg, k) for k in reference} == reference


def _numpy_mlp(layers, x, last_linear=True):
    for i, layer in enumerate(layers):
        x = x @ layer.kernel.numpy() + layer.bias.numpy()
        if not (last_linear and i == len(layers) - 1):
            x = np.tanh(x)
    return x


def _inputs(rng, t, b, obs_dim=4):
    batch = make_batch(rng, t, b, DISCRETE.n)
    batch["observation"] = rng.normal(size=(t + 1, b, obs_dim)).astype(np.float32)
    return batch


@pytest.mark.parametrize("q_hidden_sizes", [None, (6,)], ids=["shared", "separate"])
def test_discrete_network_gradient_is_the_references(q_hidden_sizes):
    """Item 1 (and 6): the network's V is sum_a pi Q with no V head, and the ACER loss moves
    the weights only through the reference's d loss/d logits and d loss/d Q (numpy),
    backpropagated through the network; with ``q_hidden_sizes`` (ACERSeparateModel) the
    policy MLP and the Q MLP are separate numpy MLPs."""
    cfg_net = NetworkConfig(hidden_sizes=(8,), q_head="discrete", q_hidden_sizes=q_hidden_sizes)
    net, avg = make_network(cfg_net, OBS, DISCRETE), make_network(cfg_net, OBS, DISCRETE)
    for v in avg.weights:
        v.assign(v + tf.random.stateless_normal(v.shape, [1, 2], stddev=0.3))
    assert net.value_head is None
    rng = np.random.default_rng(2)
    batch = _inputs(rng, 5, 3)
    inputs = NetInputs(*(batch[k] for k in ("observation", "first", "prev_action", "prev_reward")))
    obs = batch["observation"]
    if q_hidden_sizes is None:
        feats = _numpy_mlp(net.torso.dense_layers, obs, last_linear=False)
        q_feats = feats
    else:  # pi(obs) and q(obs), each its own MLP
        feats = _numpy_mlp(net.torso.dense_layers, obs, last_linear=False)
        q_feats = _numpy_mlp(net.q_torso.dense_layers, obs, last_linear=False)
    logits_np = _numpy_mlp([net.policy_head.logits], feats)
    q_np = _numpy_mlp([net.q_head.q], q_feats)
    cfg = AcerConfig(truncation_threshold=1.0, trust_region_delta=0.05, entropy_cost=0.1)
    with tf.GradientTape(persistent=True) as tape:
        out = net.unroll(inputs)
        loss, _ = acer_loss(net, avg, cfg, batch)
    np.testing.assert_allclose(out.policy["logits"].numpy(), logits_np, atol=1e-5)
    np.testing.assert_allclose(out.q.numpy(), q_np, atol=1e-5)
    np.testing.assert_allclose(  # the value output is the reference's V
        out.value.numpy(), (softmax(logits_np) * q_np).sum(-1), atol=1e-5
    )
    avg_logits = avg.unroll(inputs).policy["logits"].numpy()
    d_logits, d_q, _ = reference_discrete(batch, logits_np, q_np, avg_logits, cfg)
    variables = net.trainable_variables
    got = tape.gradient(loss, variables)
    want = tape.gradient(
        [out.policy["logits"], out.q], variables,
        output_gradients=[tf.constant(d_logits, tf.float32), tf.constant(d_q, tf.float32)],
    )  # fmt: skip
    for v, g, w in zip(variables, got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-3, atol=1e-6, err_msg=v.path)
    if q_hidden_sizes is not None:  # the policy's loss never reaches Q's MLP, and vice versa
        pi_only = dataclasses.replace(cfg, q_loss_coef=0.0)
        q_only = dataclasses.replace(cfg, pi_loss_coef=0.0)
        for config, untouched in ((pi_only, net.q_torso), (q_only, net.torso)):
            with tf.GradientTape() as tape:
                loss, _ = acer_loss(net, avg, config, batch)
            grads = tape.gradient(loss, untouched.trainable_variables)
            assert all(g is None or not np.any(g.numpy()) for g in grads)


def test_sdn_separate_model_is_the_references():
    """Item 6, ACERSDNSeparateModel(pi, v, adv): V(obs) its own MLP, A on [obs, a], the
    policy on the torso; Q(a) = V + A(a) - mean_i A(a'_i) (numpy, a'_i ~ pi with a tiny
    std, so a'_i = mean to 1e-5)."""
    cfg_net = NetworkConfig(
        hidden_sizes=(8,), q_head="stochastic_dueling", q_hidden_sizes=(6,),
        sdn_hidden_sizes=(5,), gaussian_std="global", init_std=2e-6, min_std=1e-6,
    )  # fmt: skip
    net = make_network(cfg_net, OBS, BOX)
    rng = np.random.default_rng(3)
    obs = rng.normal(size=(7, 4)).astype(np.float32)
    actions = rng.normal(size=(7, 2)).astype(np.float32)
    inputs = net.dummy_inputs(7)._replace(observation=obs)
    out = net(inputs, (), actions=actions)
    loc = _numpy_mlp([net.policy_head.loc], _numpy_mlp(net.torso.dense_layers, obs, False))
    v = _numpy_mlp([net.q_head.value_head.value], _numpy_mlp(net.q_torso.dense_layers, obs, False))
    adv_layers = [*net.q_head.adv_hidden, net.q_head.adv_out]
    adv = lambda a: _numpy_mlp(adv_layers, np.concatenate([obs, a], -1))[:, 0]
    np.testing.assert_allclose(out.policy["loc"].numpy(), loc, atol=1e-5)
    np.testing.assert_allclose(out.value.numpy(), v[:, 0], atol=1e-5)
    np.testing.assert_allclose(out.q.numpy(), v[:, 0] + adv(actions) - adv(loc), atol=1e-4)


def test_unshared_model_needs_a_feed_forward_q_network():
    with pytest.raises(ValueError, match="q_hidden_sizes.*core='lstm'"):
        NetworkConfig(q_hidden_sizes=(8,), core="lstm")
    with pytest.raises(ValueError, match="q_hidden_sizes needs a Q head"):
        make_network(NetworkConfig(q_hidden_sizes=(8,)), OBS, DISCRETE)


def test_sdn_draws_sdn_num_samples_actions():
    """Item 6: n of the stochastic dueling network is NetworkConfig.sdn_num_samples."""
    cfg_net = NetworkConfig(hidden_sizes=(8,), q_head="stochastic_dueling", sdn_num_samples=7)
    net = make_network(cfg_net, OBS, BOX)
    shapes, advantage = [], net.q_head.advantage

    def recorder(features, actions):
        shapes.append(tuple(actions.shape))
        return advantage(features, actions)

    net.q_head.advantage = recorder
    net(net.dummy_inputs(3), (), actions=tf.zeros([3, 2]))
    assert shapes == [(3, 2), (7, 3, 2)]


def _ema(xs, decay, avg=0.0):
    for x in xs:  # chainerrl: avg += (1 - decay) * (x - avg), one step at a time
        avg += (1 - decay) * (x - avg)
    return avg


def test_statistics_decay_per_step_in_the_references_order():
    """Item 2: average_value / average_entropy follow each acted step (time-major), and
    average_kl each trust-region step of every update (column by column, each episode part
    from its last step back), one decay per step (0.95 here, so that the order shows)."""
    net_cfg = NetworkConfig(hidden_sizes=(8,), q_head="discrete")
    cfg = AcerConfig(stats_decay=0.95, learning_rate=1e-2)
    learner = AcerLearner(cfg, lambda: build_network(net_cfg, "CartPole-v1"))
    for v in learner.average_network.weights:
        v.assign(v + tf.random.stateless_normal(v.shape, [3, 4], stddev=0.3))
    rng = np.random.default_rng(4)
    want = {"average_value": 0.0, "average_entropy": 0.0, "average_kl": 0.0}
    for on_policy in (True, False, True):
        batch = _inputs(rng, 6, 3)
        batch["action"] = rng.integers(0, 2, (6, 3)).astype(np.int32)
        batch["policy"]["logits"] = batch["policy"]["logits"][..., :2]
        inputs = NetInputs(*(batch[k] for k in ("observation", "first", "prev_action",
                                                 "prev_reward")))  # fmt: skip
        out = learner.network.unroll(inputs)
        logits, values = out.policy["logits"].numpy(), out.value.numpy()
        avg_logits = learner.average_network.unroll(inputs).policy["logits"].numpy()
        pi, avg = softmax(logits), softmax(avg_logits)
        entropy = -(pi * np.log(pi)).sum(-1)
        kl = (avg * (np.log(avg) - np.log(pi))).sum(-1)
        if on_policy:  # act_and_train order: step by step, the environments in turn
            acted = [(t, b) for t in range(6) for b in range(3) if not batch["reset"][t, b]]
            want["average_value"] = _ema([values[s] for s in acted], 0.95,
                                         want["average_value"])  # fmt: skip
            want["average_entropy"] = _ema([entropy[s] for s in acted], 0.95,
                                           want["average_entropy"])  # fmt: skip
        backward = [(t, b) for b in range(3) for part in episode_parts(batch, b)
                    for t in reversed(part)]  # fmt: skip
        want["average_kl"] = _ema([kl[s] for s in backward], 0.95, want["average_kl"])
        metrics = learner.train_step(batch, on_policy=on_policy)
        for key, value in want.items():
            np.testing.assert_allclose(metrics[key], value, rtol=1e-4, err_msg=key)
        assert not any(k.startswith("ema/") for k in metrics)


class _FakeLearner:
    def __init__(self, config):
        self.config, self.lock, self.syncs, self.calls = config, threading.Lock(), 0, []

    def get_weights(self):
        self.syncs += 1
        return []

    def gradients_fn(self, network):
        def grads(batch, on_policy=False):  # records (syncs so far, on_policy)
            self.calls.append((self.syncs, on_policy))
            return [], {}

        return grads

    def apply_gradients(self, grads, metrics):
        return metrics


@pytest.mark.parametrize("importance_weights", [False, True])
def test_worker_takes_the_on_policy_gradient_on_the_weights_that_acted(importance_weights):
    """Item 5 with workers: chainerrl computes the on-policy gradient on the local model
    that acted and syncs after; replay updates run on freshly synced weights."""
    learner = _FakeLearner(AcerConfig(on_policy_importance_weights=importance_weights))
    agent = types.SimpleNamespace(
        learner=learner,
        build_network=lambda: types.SimpleNamespace(set_weights=lambda w: None),
        actor=lambda worker, network: None,
    )
    worker = AcerWorker(agent, 1)
    worker.update({}, on_policy=True)
    worker.update({}, on_policy=False)
    assert learner.calls == [(int(importance_weights), True), (1 + importance_weights, False)]


def _iterating_agent(config, seed):
    """An AcerAgent shell whose iterate() runs on fakes: it counts the updates."""
    agent = object.__new__(AcerAgent)
    agent.config, agent.lock, agent.steps = config, threading.Lock(), 1
    agent.rng = np.random.default_rng(seed)
    agent.run_config = types.SimpleNamespace(num_envs=1)
    agent.replay_size, agent.zero_state = 1, ()
    agent.normalizes, agent.returns = False, None  # no normalize_observations / _rewards
    agent.extra_state = types.SimpleNamespace(add_unroll=lambda unroll, stream: None)
    agent.counters = types.SimpleNamespace(add=lambda **kw: None)
    agent._replay_batch = lambda: {}  # the replay is always ready
    return agent


@pytest.mark.parametrize("poisson", [False, True])
def test_replay_updates_per_iteration(poisson):
    """Item 6: n_times_replay replay updates (chainerrl), or n ~ Poisson(n_times_replay)
    (the paper's Algorithm 1), drawn from the agent's generator."""
    cfg = AcerConfig(n_times_replay=3, replay_poisson=poisson)
    agent = _iterating_agent(cfg, seed=11)
    actor = types.SimpleNamespace(unroll=lambda: ({}, {}))
    counts, calls = [], []

    def update(batch, on_policy=False):
        calls.append(on_policy)
        return {}

    for _ in range(400):
        calls.clear()
        agent.iterate(actor, 0, update)
        assert calls[:1] == [True]  # the on-policy update first
        counts.append(len(calls) - 1)
    if not poisson:
        assert counts == [3] * 400
    else:
        want = np.random.default_rng(11).poisson(3, size=400)
        assert counts == want.tolist()
        assert abs(np.mean(counts) - 3) < 0.3 and abs(np.var(counts) - 3) < 0.8


@pytest.mark.slow  # a subprocess importing TensorFlow
def test_flags_reach_the_configs_and_train(tmp_path):
    """Item 6: the unshared model, SDN n and sizes, Poisson replay and the trust-region
    parametrisation are flags; a short Pendulum run with them trains and records them."""
    logdir = tmp_path / "run"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.train", "--agent=acer", "--env=Pendulum-v1",
         f"--logdir={logdir}", "--total_steps=400", "--num_envs=2", "--t_max=10",
         "--hidden_sizes=8", "--q_hidden_sizes=8,8", "--sdn_num_samples=3",
         "--sdn_hidden_sizes=4", "--replay_poisson", "--trust_region_params=loc_scale",
         "--on_policy_importance_weights", "--replay_start_size=50", "--n_times_replay=2",
         "--eval_episodes=1", "--export=false"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    final = json.loads(proc.stdout.strip().splitlines()[-1])
    assert final["final"] and final["step"] >= 400 and final["replay_size"] > 0
    config = json.loads((logdir / "config.json").read_text())
    network, agent = config["network_config"], config["agent_config"]
    assert network["q_hidden_sizes"] == [8, 8] and network["sdn_num_samples"] == 3
    assert network["sdn_hidden_sizes"] == [4]
    assert agent["replay_poisson"] is True and agent["trust_region_params"] == "loc_scale"
    assert agent["on_policy_importance_weights"] is True
