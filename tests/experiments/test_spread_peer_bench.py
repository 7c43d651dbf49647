"""benchmarks/spread_peer.py without its peers: one line naming them, exit code 2."""

import subprocess
import sys

import pytest

from tests.bench_modules import BENCHMARKS, load_benchmark


def test_spread_peer_names_its_missing_packages_in_one_line():
    missing = load_benchmark("spread_peer").missing_peers()
    if not missing:
        pytest.skip("torch, stable-baselines3, supersuit and mpe2 are all installed")
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "spread_peer.py"), "--steps=1000"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("spread_peer: needs ")
    for name in missing:
        assert name in lines[0]
    assert proc.stdout == ""
