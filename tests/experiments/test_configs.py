"""Every shipped flagfile parses and trains a few updates through `experiments.train`.

The run length, batch and evaluation flags are shrunk on the command line (flags after
--flagfile override it); everything else - environment, torso, core, optimizer, XLA - is
the config's own. Learning results for the configs are in their headers and BUILD.md.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "experiments" / "configs").glob("*.cfg"))
SHRINK = [
    "--total_steps=200",
    "--num_envs=4",  # divisible by the configs' num_minibatches
    "--unroll_length=4",
    "--batch_unrolls=1",
    "--eval_every=0",
    "--eval_episodes=1",
    "--stop_return=1e9",
    "--export=false",
    "--log_every_s=1",
]
NEEDS = {"atari": ("ale_py", "cv2"), "minatar": ("minatar",)}


def _missing(config: Path) -> list[str]:
    extra = "atari" if "atari" in config.name else "minatar" if "minatar" in config.name else ""
    return [m for m in NEEDS.get(extra, ()) if importlib.util.find_spec(m) is None]


def test_every_agent_has_a_config():
    names = {c.name.split("_")[0] for c in CONFIGS}
    assert {"impala", "a2c", "a3c", "acer", "taac"} <= names


@pytest.mark.parametrize("config", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_config_smoke_run(tmp_path, config):
    missing = _missing(config)
    if missing:
        pytest.skip(f"needs {missing}")
    extra = ["--t_max=4", "--num_workers=2"] if config.name.startswith("a3c") else []
    if config.name.startswith("taac"):  # collect less at random so a few updates run
        extra = ["--initial_collect_steps=150"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.train", f"--flagfile={config}",
         f"--logdir={tmp_path / 'run'}", *SHRINK, *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    final = json.loads(proc.stdout.strip().splitlines()[-1])
    assert final["final"] is True
    assert final["step"] >= 200
    assert final.get("updates", 1) > 0
    assert (tmp_path / "run" / "metrics.jsonl").exists()
