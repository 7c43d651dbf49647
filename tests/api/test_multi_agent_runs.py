"""A game of many agents sharing one policy trained from Python and from the command line:
its run resumes, its exported policy plays each agent, bad settings are refused in one line."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

import tfagents_vtrace as tv  # noqa: E402
from tests import games  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SMALL = dict(num_envs=4, unroll_length=8, hidden_sizes=(16,), eval_episodes=4, verbose=0)


def test_train_a_game_from_python_then_evaluate_its_policy(tmp_path):
    final = tv.train("impala", env=games.make_relay, logdir=str(tmp_path / "run"),
                     total_steps=512, seed=0, agent_ids=True, **SMALL)  # fmt: skip
    # evaluations count each agent's episode: a plays 6 steps, b 3
    assert final["eval_length"] == 4.5
    assert 0.0 <= final["eval_return_min"] <= final["eval_return"] <= 6.0
    rows = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    assert rows[-1]["step"] == final["step"]
    config = json.load(open(tmp_path / "run" / "config.json"))
    assert config["run_config"]["env_kwargs"] == {"agent_ids": True}
    policy = tv.load_policy(str(tmp_path / "run" / "policy"))
    result = tv.evaluate(policy, games.make_relay, episodes=6, env_kwargs={"agent_ids": True})
    assert result["episodes"] == 6 and sorted(set(result["returns"])) <= list(range(7))
    # the exported policy acts on each agent's own observation: [x, t / 6, id_a, id_b]
    obs = np.array([[1, 0, 1, 0], [0, 0, 0, 1]], np.float32)
    action, _ = policy.step(obs, policy.initial_state(2), greedy=True)
    assert np.asarray(action).shape == (2,)


def test_settings_a_game_refuses_are_one_line_errors(tmp_path):
    with pytest.raises(ValueError, match=r"^num_envs: expected a multiple of 2 "):
        tv.train("impala", env=games.make_relay, logdir=str(tmp_path / "a"), num_envs=3,
                 num_minibatches=1, total_steps=64)  # fmt: skip
    with pytest.raises(ValueError, match=r"^env: acer does not train games of many agents"):
        tv.train("acer", env=games.make_relay, logdir=str(tmp_path / "b"), total_steps=64)
    with pytest.raises(ValueError, match=r"^agent_ids: only games of many agents"):
        tv.train("impala", env="CartPole-v1", logdir=str(tmp_path / "c"), agent_ids=True,
                 total_steps=64)  # fmt: skip
    assert not any((tmp_path / name).exists() for name in "abc")


def _cli(*args, env=None):
    cmd = [sys.executable, "-m", "experiments.train", *args]
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)


@pytest.mark.slow  # three training subprocesses, each importing TensorFlow
def test_cli_trains_a_module_function_game_and_resumes_it(tmp_path):
    logdir = str(tmp_path / "run")
    flags = ["--agent=a2c", "--env=tests.games:make_relay", f"--logdir={logdir}",
             "--num_envs=4", "--unroll_length=8", "--hidden_sizes=16", "--eval_episodes=2",
             "--eval_every=256"]  # fmt: skip
    first = _cli(*flags, "--total_steps=256")
    assert first.returncode == 0, first.stderr[-2000:]
    again = _cli(*flags, "--total_steps=512")
    assert again.returncode == 0, again.stderr[-2000:]
    final = json.load(open(os.path.join(logdir, "final.json")))
    assert final["resumed"] is True and final["step"] >= 512
    assert os.path.isdir(os.path.join(logdir, "policy"))
    bad = _cli(*flags[:-1], "--num_envs=5", "--total_steps=64", f"--logdir={tmp_path / 'bad'}")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1].startswith("error: --num_envs: expected a multiple")


def connect_four_vs_random():
    from pettingzoo.classic import connect_four_v3

    from tfagents_vtrace.envs.turn_games import TurnGame

    return TurnGame(connect_four_v3.env, opponent="random")


def test_a_turn_game_trains_against_an_opponent_and_reports_its_win_rate(tmp_path):
    pytest.importorskip("pygame")  # Connect Four's module imports it
    final = tv.train("impala", env=connect_four_vs_random, logdir=str(tmp_path / "run"),
                     total_steps=1024, seed=0, **SMALL)  # fmt: skip
    rates = [final[f"eval_{k}_rate"] for k in ("win", "draw", "loss")]
    assert sum(rates) == pytest.approx(1.0)
    assert final["eval_return"] == pytest.approx(rates[0] - rates[2])  # +1 win, -1 loss
    result = tv.evaluate(str(tmp_path / "run" / "policy"), connect_four_vs_random, episodes=8)
    assert result["win_rate"] == np.mean(np.asarray(result["returns"]) > 0)
