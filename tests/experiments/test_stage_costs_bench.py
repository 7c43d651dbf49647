"""benchmarks/stage_costs.py and the per-stage table of benchmarks/atari_throughput.py."""

import json
import math

import pytest

from tests.bench_modules import load_benchmark

stage_costs = load_benchmark("stage_costs")


def test_the_cap_is_the_cores_over_the_three_stages_and_other_is_the_runs_rest():
    stages = {"env": 0.25, "inference": 0.05, "learner": 0.2, "cores": 2}
    row = stage_costs.cap_row(stages, 3000.0, 0.6)
    assert row["cap"] == pytest.approx(2 / 0.5e-3)  # 2 cores / 0.5 ms per step
    assert row["of_cap"] == pytest.approx(0.75)
    assert row["other"] == pytest.approx(0.1)
    blind = stage_costs.cap_row(stages, None, None)
    assert blind["of_cap"] is None and blind["other"] is None and blind["cap"] == row["cap"]


def test_flags_become_settings():
    assert stage_costs.settings_of(["--num_envs=8", "--nojit_compile", "--eval_background"]) == {
        "num_envs": "8", "jit_compile": False, "eval_background": True}  # fmt: skip


def test_the_steady_state_leaves_out_the_first_quarter(tmp_path):
    """Rows every 100 steps: the first 400 at 10 steps/s and 2 ms per step (start-up), the
    rest at 100 steps/s and 1 ms: the steady state is the rest's."""
    bench = load_benchmark("atari_throughput")
    rows, wall = [], 0.0
    for step in range(100, 2001, 100):
        slow = step <= 400
        wall += 10.0 if slow else 1.0
        rows.append({"step": step, "wall_time": wall, "sps": 1.0,
                     "cpu_ms_per_step": 2.0 if slow else 1.0})  # fmt: skip
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    steady = bench.steady_state(str(path))
    assert steady["steady_sps"] == pytest.approx(100.0)  # rows 600..2000 after the one at 500
    assert steady["steady_cpu_ms_per_step"] == pytest.approx(1.0)
    path.write_text(json.dumps(rows[0]) + "\n")
    unknown = {"steady_sps": None, "steady_cpu_ms_per_step": None}
    assert bench.steady_state(str(path)) == unknown
    assert bench.steady_state(str(tmp_path / "none.jsonl")) == unknown  # an old tree's trainer


def test_a_cartpole_config_measures_every_stage():
    out = stage_costs.measure_subprocess("impala_cartpole", ["--num_envs=8"], seconds=0.3)
    assert out["num_envs"] == 8 and out["policy"] == "NumpyMLPPolicy"
    for stage in stage_costs.STAGES:
        assert math.isfinite(out[stage]) and out[stage] > 0, out
    assert out["cores"] >= 1
