"""Environment settings that become constructor arguments: ``num_trials`` (bandits),
``screen_size`` and ``repeat_action_probability`` (Atari), from the environment layer's
EnvFamilyConfig through ``RunConfig.env_kwargs`` to the actors, the evaluator and
config.json (an older config.json's run config held them as fields of its own)."""

import dataclasses
import importlib.util
import json
import os

import numpy as np
import pytest

import tfagents_vtrace.envs as envs
from tfagents_vtrace.agents import get_agent
from tfagents_vtrace.agents.a2c import A2CConfig
from tfagents_vtrace.envs.family import EnvFamilyConfig
from tfagents_vtrace.networks import NetworkConfig
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.driver import make_driver
from tfagents_vtrace.runtime.rundir.config_io import read_env_kwargs, upgrade_config
from tfagents_vtrace.settings import build_configs

has = lambda m: importlib.util.find_spec(m) is not None  # noqa: E731


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"env_id": "CartPole-v1", "num_trials": 10}, "num_trials: only the bandit ids"),
        ({"env_id": "BanditIndependent-v0", "num_trials": 0}, "num_trials: expected"),
        ({"env_id": "CartPole-v1", "screen_size": 42}, "screen_size: only Atari ids"),
        ({"env_id": "ALE/Pong-v5", "screen_size": True}, "screen_size: expected"),
    ],
)
def test_misplaced_or_bad_env_settings_name_the_flag(kwargs, match):
    env_id = kwargs.pop("env_id")
    with pytest.raises(ValueError, match=match):
        EnvFamilyConfig(**kwargs).env_kwargs(env_id)
    with pytest.raises(ValueError, match=match):  # as tv.train / the flags read them
        build_configs("a2c", {"env": env_id, **kwargs})


def test_num_trials_sets_the_bandit_episode_length_in_training_and_evaluation(tmp_path):
    run = RunConfig(env_id="BanditIndependent-v0", env_kwargs={"num_trials": 7}, num_envs=4,
                    unroll_length=5, total_steps=400, eval_episodes=3,
                    export_policy=False)  # fmt: skip
    net = NetworkConfig(hidden_sizes=(), core="lstm", lstm_size=8, use_prev_action=True,
                        use_prev_reward=True)  # fmt: skip
    final = make_driver(run, get_agent("a2c"), A2CConfig(), net, str(tmp_path)).run()
    assert final["eval_length"] == 7.0
    with open(os.path.join(tmp_path, "config.json")) as f:
        config = json.load(f)
    assert config["run_config"]["env_kwargs"] == {"num_trials": 7}
    assert read_env_kwargs(config, "BanditIndependent-v0") == {"num_trials": 7}
    with open(os.path.join(tmp_path, "metrics.jsonl")) as f:
        lengths = [json.loads(line).get("episode_length") for line in f]
    assert {x for x in lengths if x is not None} == {7.0}


@pytest.mark.skipif(not (has("ale_py") and has("cv2")), reason="atari extra")
@pytest.mark.parametrize("mode", ["auto", "sync"])
def test_screen_size_gives_42x42_atari_frames(mode):
    env = envs.make_vector_env("ALE/Pong-v5", 2, seed=0, mode=mode, screen_size=42)
    try:
        obs, _ = env.reset(seed=1)
        assert obs.shape == (2, 42, 42, 4) and env.single_observation_space.shape == (42, 42, 4)
    finally:
        env.close()
    assert EnvFamilyConfig(screen_size=42).env_kwargs("ALE/Pong-v5") == {"screen_size": 42}


def _paddle_rows(frames: np.ndarray) -> np.ndarray:
    """Mean row of our (right-hand) paddle in each 84x84 Pong frame ``[N, 84, 84]``: the
    non-background pixels of columns 73-76 between the top and bottom walls."""
    rows = []
    for frame in frames:
        band = frame[14:78, 73:77].astype(np.int32)
        hit = np.nonzero((band != np.bincount(band.ravel()).argmax()).any(axis=1))[0]
        rows.append(hit.mean() if hit.size else np.nan)
    return np.array(rows)


@pytest.mark.skipif(not (has("ale_py") and has("cv2")), reason="atari extra")
@pytest.mark.parametrize("mode", ["auto", "sync"])
def test_repeat_action_probability_sets_sticky_actions(mode):
    """With sticky actions at 1, ALE keeps repeating the no-op it reset with, so pressing
    DOWN never moves our paddle; at 0 six DOWNs move it ~30 of the frame's 84 rows."""
    moves = {}
    for p in (0.0, 1.0):
        kwargs = EnvFamilyConfig(repeat_action_probability=p).env_kwargs("ALE/Pong-v5")
        assert kwargs == {"repeat_action_probability": p}
        env = envs.make_vector_env("ALE/Pong-v5", 2, seed=0, mode=mode, **kwargs)
        try:
            obs, _ = env.reset(seed=3)
            start = _paddle_rows(obs[..., -1])
            for _ in range(6):
                obs, *_ = env.step(np.full(2, 3))  # DOWN
            moves[p] = _paddle_rows(obs[..., -1]) - start
        finally:
            env.close()
    assert np.all(moves[0.0] > 4.0), moves
    assert np.all(np.abs(moves[1.0]) < 1.0), moves


@pytest.mark.parametrize("value", [-0.1, 1.5, True, "0.25"])
def test_repeat_action_probability_out_of_range_names_the_flag(value):
    with pytest.raises(ValueError, match="repeat_action_probability: expected"):
        EnvFamilyConfig(repeat_action_probability=value)


def test_repeat_action_probability_is_for_atari_only():
    with pytest.raises(ValueError, match="repeat_action_probability: only Atari ids"):
        EnvFamilyConfig(repeat_action_probability=0.0).env_kwargs("CartPole-v1")
    config = {"run_config": {"env_kwargs": {"repeat_action_probability": 0.0}}}
    assert read_env_kwargs(config, "ALE/Pong-v5") == {"repeat_action_probability": 0.0}
    with pytest.raises(ValueError, match="repeat_action_probability: only Atari ids"):
        read_env_kwargs(config, "CartPole-v1")


def test_an_older_config_json_with_env_settings_in_its_run_config_still_reads():
    old = {"run_config": {"repeat_action_probability": 0.0, "screen_size": None, "seed": 1}}
    assert read_env_kwargs(old, "ALE/Pong-v5") == {"repeat_action_probability": 0.0}
    assert upgrade_config(old)["run_config"] == {
        "env_kwargs": {"repeat_action_probability": 0.0},
        "seed": 1,
    }
    assert read_env_kwargs({"run_config": {"seed": 1}}, "CartPole-v1") == {}
    with pytest.raises(ValueError, match="bogus: not an environment setting"):
        read_env_kwargs({"run_config": {"env_kwargs": {"bogus": 1}}}, "CartPole-v1")


def test_run_config_no_longer_carries_env_family_settings():
    names = {f.name for f in dataclasses.fields(RunConfig)}
    assert not names & {"num_trials", "screen_size", "repeat_action_probability"}
    configs = build_configs("a2c", {"env": "BanditIndependent-v0", "num_trials": "5"})
    assert configs.run_config.env_kwargs == {"num_trials": 5}
    assert build_configs("a2c", {}).run_config.env_kwargs == {}
    with pytest.raises(ValueError, match="env_kwargs: not a setting"):
        build_configs("a2c", {"env_kwargs": {}})
