"""--deterministic: the same seed gives the same metrics rows and final weights, bit for bit,
whatever the threads' timing (a competing CPU load runs beside the second run).

Ground truth is the first run itself: a second run of the same config must match it exactly;
without the fixed pipeline / turns, actor threads and asynchronous workers reorder their
unrolls and updates with timing and the two runs drift apart.
"""

import threading

import numpy as np
import pytest

from tests.runtime.test_driver import _setup
from tfagents_vtrace.runtime.driver import make_driver
from tfagents_vtrace.runtime.rundir.metrics_log import TIMING_FIELDS, read_metrics

TIMINGS = TIMING_FIELDS
# impala: 2 actor threads, 2 unrolls per update; a3c / acer_workers: 2 worker threads.
RUN_KW = {"impala": dict(num_actors=2, batch_unrolls=2), "a2c": {}, "a3c": {}, "acer": {},
          "acer_workers": {}, "taac": {}}  # fmt: skip


def _busy(stop: threading.Event) -> None:
    a = np.random.default_rng(0).random((200, 200))
    while not stop.is_set():
        a = np.tanh(a @ a.T / 200.0)  # holds the GIL and a core in turns


def _run(agent, logdir, load: bool):
    module, config, net, run = _setup(agent, 1200, deterministic=True, log_every_s=3600,
                                      eval_every=600, **RUN_KW[agent])  # fmt: skip
    driver = make_driver(run, module, config, net, str(logdir))
    stop = threading.Event()
    # One competing thread shifts the threads' timing as two did, for half the suite's CPU.
    loads = [threading.Thread(target=_busy, args=(stop,), daemon=True) for _ in range(load)]
    for t in loads:
        t.start()
    try:
        final = driver.run()
    finally:
        stop.set()
    weights = driver.agent.checkpoint_items()["network"].get_weights()
    rows = [
        {k: v for k, v in row.items() if k not in TIMINGS and not k.startswith("time_")}
        for row in read_metrics(str(logdir))
    ]
    return rows, weights, {k: v for k, v in final.items() if k not in TIMINGS and "wall" not in k}


@pytest.mark.slow  # two training runs per agent, one beside a busy thread
@pytest.mark.parametrize("agent", list(RUN_KW))
def test_two_deterministic_runs_are_identical(tmp_path, agent):
    rows_a, weights_a, final_a = _run(agent, tmp_path / "a", load=False)
    rows_b, weights_b, final_b = _run(agent, tmp_path / "b", load=True)
    assert len(rows_a) >= 5  # rows follow steps: a hundredth of total_steps, rounded to updates
    assert rows_a == rows_b
    assert final_a == final_b
    for a, b in zip(weights_a, weights_b, strict=True):
        np.testing.assert_array_equal(a, b)
    if agent == "impala":  # the pipeline: every update learned from weights 1 update old
        assert all(r["policy_lag_max"] <= 1 for r in rows_a if r["policy_lag_max"] is not None)
