"""End to end: short runs of IMPALA, A2C and A3C on tiny environments with Dict / Tuple
observations and MultiDiscrete / MultiBinary actions, and the exported SavedModel acting on
a dict observation after ``tf.saved_model.load``."""

import json
import os

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tests.agents._dict_env import DICT_ENV_ID, TUPLE_ENV_ID, TinyDictEnv, register
from tfagents_vtrace.agents import get_agent
from tfagents_vtrace.agents.spaces import check_spaces
from tfagents_vtrace.networks import NetworkConfig
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.driver import train

register()
NET = NetworkConfig(torso="nature_cnn", hidden_sizes=(16,), cnn_dense_size=8)


def _rows(logdir):
    with open(os.path.join(logdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def _config(agent: str, **agent_kw):
    module = get_agent(agent)
    if agent == "a3c":
        return module, module.Config(num_workers=2, t_max=5, **agent_kw)
    return module, module.Config(**agent_kw)


def _train(agent, env_id, logdir, total_steps=400, agent_kw=None, **run_kw):
    module, config = _config(agent, **(agent_kw or {}))
    env = gym.make(env_id)
    check_spaces(agent, env.observation_space, env.action_space)
    env.close()
    kw = dict(env_id=env_id, total_steps=total_steps, num_envs=4, unroll_length=5,
              num_actors=0, eval_every=200, eval_episodes=2, log_every_s=0.01)  # fmt: skip
    kw.update(run_kw)
    return train(RunConfig(**kw), module, config, NET, str(logdir))


def test_impala_trains_on_dict_observations_and_exports(tmp_path):
    final = _train("impala", DICT_ENV_ID, tmp_path, num_actors=1, batch_unrolls=2,
                   export_policy=True)  # fmt: skip
    assert final["step"] >= 400
    rows = _rows(str(tmp_path))
    losses = [r["loss"] for r in rows if r.get("loss") is not None]
    assert losses and all(np.isfinite(losses))
    assert any(r.get("eval_return") is not None for r in rows)

    policy = tf.saved_model.load(str(tmp_path / "policy"))
    b = 3
    env = TinyDictEnv()
    obs = [env.reset(seed=i)[0] for i in range(b)]
    observation = {
        "image": tf.constant(np.stack([o["image"] for o in obs])),
        "pos": tf.constant(np.stack([o["pos"] for o in obs])),
        "mode": tf.constant([o["mode"] for o in obs], tf.int32),
    }
    inputs = dict(observation=observation, first=tf.ones([b], tf.bool),
                  prev_action=tf.zeros([b, 2], tf.int32), prev_reward=tf.zeros([b]))  # fmt: skip
    state = policy.get_initial_state(batch_size=tf.constant(b))
    for step in (policy.action, policy.greedy_action):
        out = step(**inputs, state=state)
        action = out["action"].numpy()
        assert action.shape == (b, 2) and action.dtype == np.int32
        assert np.all((action >= 0) & (action < [3, 2]))
        assert out["log_prob"].shape == (b,) and np.all(np.isfinite(out["log_prob"]))
        assert out["multi_logits"].shape == (b, 5)
    for a in action:
        env.step(a)  # the environment takes the policy's actions
    flat = {f"observation_{k}": v for k, v in observation.items()}
    flat.update({k: v for k, v in inputs.items() if k != "observation"})
    flat.update(policy.signatures["get_initial_state"](batch_size=tf.constant(b)))
    served = policy.signatures["serving_default"](**flat)
    assert served["action"].shape == (b, 2)
    meta = json.loads(policy.metadata.numpy())
    assert meta["policy_kind"] == "multi_categorical" and meta["nvec"] == [3, 2]
    assert meta["observation_shape"]["observation_image"] == [5, 5, 1]


@pytest.mark.parametrize("agent", ["a2c", "a3c"])
def test_a2c_and_a3c_train_on_dict_observations(tmp_path, agent):
    final = _train(agent, DICT_ENV_ID, tmp_path, export_policy=False)
    assert final["step"] >= 400
    losses = [r["loss"] for r in _rows(str(tmp_path)) if r.get("loss") is not None]
    assert losses and all(np.isfinite(losses))


def test_impala_replays_tuple_observations_with_multi_binary_actions(tmp_path):
    final = _train("impala", TUPLE_ENV_ID, tmp_path, export_policy=False, batch_unrolls=2,
                   agent_kw={"replay_ratio": 0.5})  # fmt: skip
    assert final["step"] >= 400
    assert np.isfinite(final["eval_return"])
