"""benchmarks/export_latency.py: its runners step the same policy and time batch-1 steps."""

from pathlib import Path

import numpy as np
import pytest

from tests.bench_modules import load_benchmark

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    return load_benchmark("export_latency", "export_latency_bench")


@pytest.mark.parametrize("name", ["mlp", "lstm"])
def test_runtimes_agree_and_are_timed(tmp_path, name):
    pytest.importorskip("ai_edge_litert")
    bench = _bench()
    runners = bench._runners(name, str(tmp_path), threads=1)
    assert {"saved_model", "litert"} <= set(runners)
    outs = {}
    for runtime, runner in runners.items():
        times = bench._time_steps(runner, 6, np.random.default_rng(0))
        assert len(times) == 6 and min(times) > 0
        inputs = {"observation": np.full((1, 4), 0.5, np.float32), "first": np.array([True]),
                  "prev_action": np.zeros(1, np.int32), "prev_reward": np.zeros(1, np.float32),
                  **runner.initial_state(1)}  # fmt: skip
        outs[runtime] = runner.sample(inputs, np.full((1, 2), 0.3, np.float32))
    for runtime, out in outs.items():  # the same computation in every runtime
        np.testing.assert_allclose(out["value"], outs["saved_model"]["value"], atol=1e-5)
        assert out["action"] == outs["saved_model"]["action"], runtime
