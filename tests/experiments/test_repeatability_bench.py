"""benchmarks/repeatability.py: the summary from hand-made runs and the argument checks."""

import subprocess
import sys
from pathlib import Path

from tests.bench_modules import load_benchmark

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "repeatability.py"


def _bench():
    return load_benchmark("repeatability", "repeatability_bench")


def _rec(mode, seed, repeat, ret, solve, sps, fp):
    return {"mode": mode, "seed": seed, "repeat": repeat, "eval_return": ret,
            "solve_step": solve, "sps": sps, "step": 100, "fingerprint": fp}  # fmt: skip


def test_summary_spreads_identity_success_and_cost():
    records = [
        _rec("default", 0, 0, 500.0, 30_000, 20_000.0, "a"),
        _rec("default", 0, 1, 480.0, 90_000, 18_000.0, "b"),
        _rec("default", 1, 0, 120.0, None, 22_000.0, "c"),
        _rec("deterministic", 0, 0, 490.0, 40_000, 10_000.0, "d"),
        _rec("deterministic", 0, 1, 490.0, 40_000, 12_000.0, "d"),
    ]
    s = _bench().summarize(records, threshold=475.0)
    seed0 = s["default"]["seeds"][0]
    assert seed0["return_spread"] == 20.0 and seed0["solve_spread"] == 60_000
    assert not seed0["identical"] and s["deterministic"]["seeds"][0]["identical"]
    assert s["default"]["seeds"][1]["solve_spread"] is None  # one repeat never solved
    assert s["default"]["success_rate"] == 2 / 3 and s["deterministic"]["success_rate"] == 1.0
    assert s["deterministic_cost"] == 20_000.0 / 11_000.0  # medians: 20k / 11k
    assert s["default"]["of_ceiling"] is None  # no env-only ceiling given
    s = _bench().summarize(records, threshold=475.0, ceiling_sps=80_000.0)
    assert s["default"]["of_ceiling"] == 0.25 and s["deterministic"]["of_ceiling"] == 11 / 80


def test_threshold_defaults_to_the_configs_stop_return(tmp_path):
    cfg = tmp_path / "x.cfg"
    cfg.write_text("# comment\n--stop_return=475\n--seed=3\n")
    args = _bench().parse_args([f"--flagfile={cfg}"])
    assert args.threshold == 475.0 and args.seeds == [0, 1, 2]


def test_bad_arguments_are_one_line_and_exit_code_2(tmp_path):
    for argv, start in ((["--flagfile=/no/such.cfg"], "error: --flagfile"),
                        ([f"--flagfile={SCRIPT}", "--modes=fast"], "error: --modes")):  # fmt: skip
        out = subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True,
                             text=True, timeout=60)  # fmt: skip
        assert out.returncode == 2 and out.stderr.strip().splitlines()[-1].startswith(start)


def test_bandit_runs_succeed_when_their_regret_is_below_thompsons():
    records = [
        dict(_rec("default", 0, 0, 73.0, None, 30_000.0, "a"), regret=1.9, thompson=2.6),
        dict(_rec("default", 0, 1, 50.0, None, 30_000.0, "a"), regret=29.8, thompson=2.6),
        dict(_rec("default", 1, 0, 74.0, None, 30_000.0, "b"), regret=2.1, thompson=2.6),
    ]
    s = _bench().summarize(records, threshold=None)
    assert s["default"]["success_rate"] == 2 / 3
