"""benchmarks/acting_forward.py: argument checks and one tiny run."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "acting_forward.py"


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)  # fmt: skip


def test_an_unknown_network_is_one_line_and_exit_code_2():
    out = _run("--nets=mlp,transformer")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1].startswith("error: --nets: unknown ['transformer']")


def test_a_tiny_run_times_every_implementation_against_the_learners_forward_pass():
    out = _run("--nets=mlp", "--batches=2,8", "--seconds=0.05", "--rounds=1")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("machine: ")
    runs = json.loads(out.stdout.strip().splitlines()[-1])["results"]["mlp"]
    assert set(runs) == {"learner_forward", *(f"{i}@{b}" for i in ("numpy", "tf", "xla")
                                              for b in (2, 8))}  # fmt: skip
    assert all(r["wall"] > 0 and r["cpu"] > 0 for r in runs.values())
    assert "| 8 |" in out.stdout
