"""evaluate --env_kwargs that the environment refuses: one line naming --env_kwargs (exit 2),
not a TypeError traceback."""

import os
import subprocess
import sys

import pytest

from tfagents_vtrace.commands import evaluate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_env_spaces_names_env_kwargs():
    with pytest.raises(evaluate.FlagError, match=r"^--env_kwargs: CartPole-v1 does not accept "
                                                 r"\{\"bogus\": 1\}: .*'bogus'"):  # fmt: skip
        evaluate.env_spaces("CartPole-v1", {"bogus": 1})
    with pytest.raises(evaluate.FlagError, match=r"^--env_kwargs: .*num_trials"):
        evaluate.env_spaces("BanditIndependent-v0", {"num_trials": "x"})
    obs, act = evaluate.env_spaces("BanditIndependent-v0", {"num_trials": 5})
    assert act.n == 2


def test_cli_bogus_env_kwargs_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "saved_model.pb").write_bytes(b"")  # refused before the policy is loaded
    cmd = [sys.executable, "-m", "experiments.evaluate", f"--policy={tmp_path}",
           "--env=CartPole-v1", '--env_kwargs={"bogus": 1}']  # fmt: skip
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith('error: --env_kwargs: CartPole-v1 does not accept {"bogus": 1}: ')
