"""Run settings that become environment constructor arguments: ``num_trials`` (bandits) and
``screen_size`` (Atari), from RunConfig to the actors, the evaluator and config.json."""

import importlib.util
import json
import os

import pytest

import tfagents_vtrace.envs as envs
from tfagents_vtrace.agents import get_agent
from tfagents_vtrace.agents.a2c import A2CConfig
from tfagents_vtrace.networks import NetworkConfig
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.config_io import read_env_kwargs
from tfagents_vtrace.runtime.driver import make_driver

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
    with pytest.raises(ValueError, match=match):
        RunConfig(**kwargs)


def test_num_trials_sets_the_bandit_episode_length_in_training_and_evaluation(tmp_path):
    run = RunConfig(env_id="BanditIndependent-v0", num_trials=7, num_actors=0, num_envs=4,
                    unroll_length=5, total_steps=400, eval_episodes=3,
                    export_policy=False)  # fmt: skip
    net = NetworkConfig(hidden_sizes=(), core="lstm", lstm_size=8, use_prev_action=True,
                        use_prev_reward=True)  # fmt: skip
    final = make_driver(run, get_agent("a2c"), A2CConfig(), net, str(tmp_path)).run()
    assert final["eval_length"] == 7.0
    with open(os.path.join(tmp_path, "config.json")) as f:
        config = json.load(f)
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
    assert RunConfig(env_id="ALE/Pong-v5", screen_size=42).env_kwargs == {"screen_size": 42}
