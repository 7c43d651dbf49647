"""The Python API (tfagents_vtrace.train / load_policy / evaluate) on a user's own environment:
a class, a function returning a wrapped one, gymnasium's module:Env-v0 id, and the refusals."""

import json
import os
import sys

import gymnasium as gym
import numpy as np
import pytest

import tfagents_vtrace as tv
import tfagents_vtrace.api

# A module of the user's own, outside the package: the examples' (registers Corridor-v0).
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "examples")
CORRIDOR = open(os.path.join(EXAMPLES, "my_envs.py")).read()
FAST = dict(total_steps=3000, num_envs=8, unroll_length=5, eval_episodes=2, seed=0)


@pytest.fixture
def mygame(tmp_path, monkeypatch):
    """A module of the user's own, outside the project."""
    (tmp_path / "mygame_api.py").write_text(CORRIDOR.replace("Corridor-v0", "ApiCorridor-v0"))
    monkeypatch.syspath_prepend(str(tmp_path))
    import mygame_api

    yield mygame_api
    sys.modules.pop("mygame_api", None)


def test_train_an_env_class_load_and_evaluate_the_policy(tmp_path, mygame):
    logdir = str(tmp_path / "run")
    final = tv.train("impala", env=mygame.Corridor, logdir=logdir, **FAST)
    assert final["final"] and final["step"] >= FAST["total_steps"]
    assert final["policy"] == os.path.join(logdir, "policy")
    config = json.load(open(os.path.join(logdir, "config.json")))
    assert config["env_id"] == "user/mygame_api.Corridor-v0"
    policy = tv.load_policy(final["policy"])
    result = tv.evaluate(policy, mygame.Corridor, episodes=3)
    assert result["episodes"] == 3 and len(result["returns"]) == 3
    # Returns lie between a time-out (40 steps of -0.01) and reaching the end at once.
    assert -0.4 - 1e-6 <= result["min_return"] <= result["max_return"] <= 1.0
    # One step of one observation, with the bookkeeping kept by the policy.
    env = mygame.Corridor()
    obs, _ = env.reset(seed=0)
    action, state = policy.step(obs)
    assert np.shape(action) == () and env.action_space.contains(int(action))
    obs, reward, *_ = env.step(int(action))
    action, state = policy.step(obs, state, reward=reward, greedy=True)
    assert state.prev_reward[0] == np.float32(reward) and not state.first[0]


def test_the_same_call_resumes_and_an_ended_run_is_not_trained_again(tmp_path, mygame):
    logdir = str(tmp_path / "run")
    tv.train("impala", env=mygame.Corridor, logdir=logdir, **FAST)
    again = tv.train("impala", env=mygame.Corridor, logdir=logdir, **FAST)
    assert again["already_finished"]
    longer = tv.train("impala", env=mygame.Corridor, logdir=logdir, **{**FAST, "total_steps": 5000})
    assert longer["resumed"] and longer["step"] >= 5000


def test_a_function_returning_a_wrapped_env_builds_the_network_for_its_spaces(tmp_path, mygame):
    def stacked():
        return gym.wrappers.FrameStackObservation(mygame.Corridor(), 3)

    final = tv.train("a2c", env=stacked, logdir=str(tmp_path / "run"), **FAST)
    policy = tv.load_policy(final["policy"])
    assert tuple(policy.observation_spec.shape[1:]) == (3, 2)


def test_a_module_env_id_imports_the_module_named(tmp_path, mygame):
    sys.modules.pop("mygame_api", None)
    final = tv.train("impala", env="mygame_api:ApiCorridor-v0", logdir=str(tmp_path / "r"), **FAST)
    assert final["final"]
    config = json.load(open(os.path.join(tmp_path / "r", "config.json")))
    assert config["env_id"] == "ApiCorridor-v0"  # data: resolving it again imports nothing


@pytest.mark.parametrize(
    "call, message",
    [
        (dict(env="CartPole-v1", learning_rat=0.1), r"^learning_rat: not a setting"),
        (dict(env="CartPole-v1", num_workers=2), r"^num_workers: not a setting of agent 'impala'"),
        (dict(env="CartPole-v1", total_steps="abc"), r"^total_steps: expected int"),
        (dict(env="CartPole-v1", discount=2.0), r"^discount: "),
        (dict(env="CartPole-v1", agent="dqn"), r"^agent: expected one of"),
        (dict(env="NoSuchEnv-v0"), r"^env: "),
        (dict(env="no_such_module_xyz:Env-v0"), r"^env: cannot import 'no_such_module_xyz'"),
        (dict(env=gym.make("CartPole-v1")), r"^env: received an environment instance"),
        (dict(env="CartPole-v1", agent="taac"), r"^env: taac does not take Discrete actions"),
    ],
)
def test_bad_calls_raise_one_line_naming_the_setting(tmp_path, call, message):
    call = {"agent": "impala", **call}
    logdir = tmp_path / "run"
    with pytest.raises(ValueError, match=message) as raised:
        tv.train(logdir=str(logdir), **call)
    assert "\n" not in str(raised.value)
    assert not logdir.exists()  # nothing written


def test_a_shipped_config_by_name_and_settings_over_it():
    configs = tv.make_configs(flagfile="impala_cartpole", total_steps=1234)
    assert configs.agent == "impala" and configs.run_config.env_id == "CartPole-v1"
    assert configs.run_config.total_steps == 1234
    assert configs.network_config.hidden_sizes == (64, 64)  # from the file
    with pytest.raises(ValueError, match=r"^config: no file 'nope'"):
        tv.make_configs(flagfile="nope")


@pytest.mark.parametrize("name", ["impala_minatar_breakout", "impala_atari_pong", "acer_cartpole"])
def test_every_kind_of_flagfile_line_reads(name):
    from tfagents_vtrace.settings import read_flagfile

    values = read_flagfile(tv.config_path(name))
    assert "rmalize_advantages" not in values and "agent" in values


@pytest.mark.parametrize(
    "name", sorted(n[:-4] for n in os.listdir(tv.api.CONFIG_DIR) if n.endswith(".cfg"))
)
def test_every_shipped_config_builds_from_python(name):
    configs = tv.make_configs(flagfile=name)
    assert configs.run_config.env_id
