"""experiments.benchmark lists the benchmarks, runs one by name and rejects unknown names."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args):
    return subprocess.run(
        [sys.executable, "-m", "experiments.benchmark", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_list_shows_every_benchmark_script():
    proc = _run("--list")
    assert proc.returncode == 0, proc.stderr
    names = {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}
    scripts = {p.stem for p in (ROOT / "benchmarks").glob("*.py") if not p.stem.startswith("_")}
    assert names == scripts and "ops_bench" in names


def test_unknown_name_is_refused_naming_the_flag():
    proc = _run("--name=nope")
    assert proc.returncode != 0
    assert "--name" in proc.stderr and "nope" in proc.stderr


def test_arguments_after_the_separator_reach_the_script():
    proc = _run("--name=cartpole_solve", "--", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "--throughput_steps" in proc.stdout
