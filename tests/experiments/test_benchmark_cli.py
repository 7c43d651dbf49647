"""experiments.benchmark lists the benchmarks, runs one by name and rejects unknown names."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench_modules import load_benchmark

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
    scripts = {
        p.stem
        for p in (ROOT / "benchmarks").glob("*.py")
        if not p.stem.startswith("_") and '\nif __name__ == "__main__":' in p.read_text()
    }
    assert names == scripts and "ops_bench" in names
    assert "baselines" not in names  # a helper module of bandit_regret, not runnable


def test_unknown_name_is_refused_naming_the_flag():
    proc = _run("--name=nope")
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: --name: expected one of [") and line.endswith("'nope'")


def test_arguments_after_the_separator_reach_the_script():
    proc = _run("--name=cartpole_solve", "--", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "--throughput_steps" in proc.stdout


def _cartpole_solve():
    return load_benchmark("cartpole_solve")


def test_cartpole_solve_without_sb3_stops_at_once(monkeypatch, capsys):
    solve = _cartpole_solve()
    for name in ("torch", "stable_baselines3"):  # find_spec then reports them missing
        monkeypatch.setitem(sys.modules, name, None)
    assert solve.missing_sb3_peers() == ["torch", "stable_baselines3"]
    monkeypatch.setattr(solve.subprocess, "run", lambda *a, **k: pytest.fail("ran something"))
    monkeypatch.setattr(sys, "argv", ["cartpole_solve.py", "--seeds=0"])
    with pytest.raises(SystemExit) as e:
        solve.main()
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "error: stable-baselines3 (and torch) not installed (no module torch, "
        "stable_baselines3): "
        "install '.[bench]' or pass --no-sb3"
    ]


@pytest.mark.parametrize("keep", [False, True])
def test_cartpole_solve_removes_its_temp_workdir_unless_kept(monkeypatch, capsys, tmp_path, keep):
    solve = _cartpole_solve()
    monkeypatch.setitem(sys.modules, "torch", None)  # --no-sb3 skips the peer check
    monkeypatch.setattr(solve.tempfile, "tempdir", str(tmp_path))
    argv = ["cartpole_solve.py", "--no-sb3", "--agents=", "--seeds=0", "--throughput_steps=0"]
    monkeypatch.setattr(sys, "argv", argv + (["--keep"] if keep else []))
    solve.main()  # no system to run: only the tables
    out = capsys.readouterr().out
    assert f"runs in {tmp_path}/cartpole_solve_" in out
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == (1 if keep else 0) and all(n.startswith("cartpole_solve_") for n in left)
