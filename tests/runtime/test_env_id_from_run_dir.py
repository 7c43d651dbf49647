"""An env id read from a run directory's config.json is data, never code: a ``module:``
prefix (which ``gym.make`` imports) or an unregistered id is refused before any env is made."""

import json
import os
import subprocess
import sys

import pytest

from tfagents_vtrace.envs.factory import check_registered_id
from tfagents_vtrace.runtime.rundir import checkpointing

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULE = "planted_env_module"


def _planted_run(tmp_path, agent="impala"):
    """A run directory whose config.json names ``planted_env_module:CartPole-v1``; importing
    that module (on ``sys.path`` through ``tmp_path``) writes ``tmp_path/imported``."""
    (tmp_path / f"{MODULE}.py").write_text(f"open({str(tmp_path / 'imported')!r}, 'w').close()\n")
    logdir = tmp_path / "run"
    os.makedirs(logdir / "checkpoints")
    for name in (
        "checkpoint",
        "ckpt-1.index",
        "ckpt-1.data-00000-of-00001",
    ):  # stand-ins: enough for experiments.export
        (logdir / "checkpoints" / name).write_text("")
    config = {"agent": agent, "env_id": f"{MODULE}:CartPole-v1", "agent_config": {},
              "network_config": {"hidden_sizes": [8]}, "run_config": {}}  # fmt: skip
    (logdir / "config.json").write_text(json.dumps(config))
    return str(logdir)


def test_check_registered_id():
    for env_id in ("CartPole-v1", "CartPoleNoVel-v1", "BanditIndependent-v0", "Pendulum-v1"):
        assert check_registered_id(env_id) == env_id
    with pytest.raises(ValueError, match=r"^env_id: 'os:CartPole-v1' has a 'module:' prefix"):
        check_registered_id("os:CartPole-v1")
    with pytest.raises(ValueError, match=r"^env_id: 'NoSuchEnv-v0' is not a registered"):
        check_registered_id("NoSuchEnv-v0")
    with pytest.raises(ValueError, match=r"^env: expected a registered gymnasium id, received 3"):
        check_registered_id(3, "env")


def test_restore_network_refuses_a_module_prefix_without_importing_it(tmp_path, monkeypatch):
    logdir = _planted_run(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"^env_id: .*'module:' prefix.*run/config\.json\)$"):
        checkpointing.restore_network(logdir)
    assert not (tmp_path / "imported").exists() and MODULE not in sys.modules


def test_taac_restore_policy_refuses_a_module_prefix_without_importing_it(tmp_path, monkeypatch):
    from tfagents_vtrace.agents.taac import restore_policy

    logdir = _planted_run(tmp_path, agent="taac")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"^env_id: .*'module:' prefix"):
        restore_policy(logdir)
    assert not (tmp_path / "imported").exists() and MODULE not in sys.modules


def test_export_cli_refuses_a_module_prefix_in_one_line(tmp_path):
    logdir = _planted_run(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, str(tmp_path)])}
    cmd = [sys.executable, "-m", "experiments.export", f"--logdir={logdir}"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]  # after TensorFlow's start-up log lines
    assert line.startswith("error: --logdir: env_id: 'planted_env_module:CartPole-v1' has a ")
    assert not (tmp_path / "imported").exists()
