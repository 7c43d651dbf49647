"""benchmarks/own_envs_acceptance.py's harness: a short CLI run on the held-out Dict-observation
env of a module outside the project, played through the exported SavedModel's named inputs
by a process that imports only TensorFlow, numpy and the env module (no learning asserted)."""

import os
import subprocess
from pathlib import Path

import pytest

from tests.bench_modules import load_benchmark

ROOT = Path(__file__).resolve().parents[1]
SMALL = ("--num_envs=4", "--unroll_length=8", "--hidden_sizes=16", "--eval_episodes=2")


def _bench():
    return load_benchmark("own_envs_acceptance")


def test_reference_returns_bracket_the_target(tmp_path):
    bench = _bench()
    bench.write_module(str(tmp_path))
    for name in bench.ENV_IDS:
        low, best = bench.reference_returns(str(tmp_path), name, episodes=20)
        assert best > low + 1.0, name  # the scripted policy is far above random


@pytest.mark.slow  # a training subprocess and a playback subprocess, each importing TF
def test_cli_run_plays_through_plain_tensorflow(tmp_path):
    bench = _bench()
    module_dir = str(tmp_path / "user_code")
    bench.write_module(module_dir)
    assert os.path.commonpath([module_dir, str(ROOT)]) != str(ROOT)
    logdir = str(tmp_path / "run")
    cmd = bench.train_command("cli", "grid", logdir, 0, 512, SMALL)
    assert "--env=heldout_envs:Grid-v0" in cmd
    proc = subprocess.run(cmd, capture_output=True, text=True, env=bench.child_env(module_dir))
    assert proc.returncode == 0, proc.stderr[-2000:]
    evals, final = bench.read_evals(logdir)
    assert evals and isinstance(final, float)
    report = bench.play_subprocess(module_dir, os.path.join(logdir, "policy"), "grid", 4)
    assert len(report["returns"]) == 4 and report["mismatches"] == 0
    assert {"observation_image", "observation_vector", "state_0"} <= set(report["inputs"])
    assert 1 <= report["steps"] <= 25  # every episode ended within the time limit
