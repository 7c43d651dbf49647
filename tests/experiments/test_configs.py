"""Every shipped flagfile parses and trains a few updates.

The runs go through ``tfagents_vtrace.train(flagfile=...)`` in this process (the command line
is a shell over it, and reads flagfiles with the same ``settings.read_flagfile``; one run
through ``experiments.train`` checks that shell). The run length, batch and evaluation
settings are shrunk (settings given override the flagfile's); everything else -
environment, torso, core, optimizer, XLA - is the config's own. Learning results for the
configs are in docs/results (each file's header links its page).
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
SHRINK = {
    "total_steps": 200,
    "num_envs": 8,  # a batch that splits into every config's --num_minibatches
    "unroll_length": 4,
    "batch_unrolls": 1,
    "eval_every": 0,
    "eval_episodes": 1,
    "stop_return": 1e9,
    "export": False,
    "log_every_s": 1,
}
# an extra: the modules its configs' environments import
NEEDS = {"atari": ("ale_py", "cv2"), "minatar": ("minatar",),
         "pettingzoo": ("pettingzoo", "pygame"), "mpe": ("mpe2", "pygame")}  # fmt: skip
EXTRAS = {"atari": "atari", "minatar": "minatar", "connect_four": "pettingzoo",
          "simple_spread": "mpe"}  # fmt: skip
"""A part of a config's name: the extra its environment needs."""


def _extra_of(config: Path) -> str:
    return next((extra for part, extra in EXTRAS.items() if part in config.name), "")


def _missing(config: Path) -> list[str]:
    return [m for m in NEEDS.get(_extra_of(config), ()) if importlib.util.find_spec(m) is None]


def test_every_agent_has_a_config():
    names = {c.name.split("_")[0] for c in CONFIGS}
    assert {"impala", "a2c", "a3c", "acer", "taac"} <= names


def _extra(config: Path) -> dict:
    if "simple_spread" in config.name:  # a column per agent of each 3-agent game
        return {"num_envs": 12}
    if config.name.startswith("a3c"):
        return {"t_max": 4, "num_workers": 2}
    if config.name.startswith("taac"):  # collect less at random so a few updates run
        return {"initial_collect_steps": 150}
    return {}


# Files that differ from another's smoke-tested code path only in numbers (the MinAtar MLP
# files run Breakout's path; TaacL / TaacQ / MountainCar the TAAC paths of taac_pendulum and
# tests/agents): in make test-long, as the suite is at its time budget.
# The two other Pong files differ from impala_atari_pong in the torso only, which
# tests/networks builds and runs.
SAME_PATH = {"impala_minatar_freeway", "impala_minatar_seaquest", "impala_minatar_space_invaders",
             "taacl_pendulum", "taacq_pendulum", "taac_mountaincar",
             "impala_atari_pong_nature_cnn", "impala_atari_pong_resnet_lstm_gpu"}  # fmt: skip


@pytest.mark.parametrize(
    "config",
    [pytest.param(c, marks=pytest.mark.long) if c.stem in SAME_PATH else c for c in CONFIGS],
    ids=[c.stem for c in CONFIGS],
)
def test_config_smoke_run(tmp_path, config):
    import tfagents_vtrace as tv

    missing = _missing(config)
    if missing:
        pytest.skip(f"needs {missing} (pip install 'tfagents_vtrace[{_extra_of(config)}]')")
    final = tv.train(flagfile=str(config), logdir=tmp_path / "run", **{**SHRINK, **_extra(config)})
    assert final["final"] is True
    assert final["step"] >= 200
    assert final.get("updates", 1) > 0
    assert (tmp_path / "run" / "metrics.jsonl").exists()


def test_a_config_through_the_command_line(tmp_path):
    config = ROOT / "experiments" / "configs" / "a2c_cartpole.cfg"
    shrink = [f"--{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in SHRINK.items()]
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.train", f"--flagfile={config}",
         f"--logdir={tmp_path / 'run'}", *shrink],
        cwd=ROOT, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), capture_output=True,
        text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    final = json.loads(proc.stdout.strip().splitlines()[-1])
    assert final["final"] is True and final["step"] >= 200
    assert json.loads((tmp_path / "run" / "config.json").read_text())["agent"] == "a2c"
