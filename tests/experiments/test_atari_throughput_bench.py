"""benchmarks/atari_throughput.py: argument checks, and one tiny run of ours end to end."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "atari_throughput.py"


def _run(*args, timeout=600):
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def test_an_unknown_system_is_one_line_and_exit_code_2():
    out = _run("--systems=ours,dqn")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1].startswith("error: --systems: unknown ['dqn']")


@pytest.mark.slow  # trains 400 Pong steps through experiments.train
@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("ale_py", "cv2")), reason="atari extra"
)
def test_a_tiny_run_prints_the_table_and_a_json_line():
    out = _run("--systems=ours", "--steps=400", "--rounds=1", "--num_envs=4")
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["medians"]["ours"] > 0 and len(result["runs"]["ours"]) == 1
    assert "| ours |" in out.stdout


def test_an_env_count_that_does_not_split_over_the_actor_threads_is_refused():
    """Ours runs ``--num_envs`` in all, split over its flagfile's actor threads (2)."""
    out = _run("--systems=ours", "--num_envs=7")
    assert out.returncode == 2
    assert "--num_envs: 7 does not split over the ours config's 2 actor threads" in out.stderr
