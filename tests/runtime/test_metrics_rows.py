"""Metrics rows: a short run writes a curve's worth of rows (issue #54), a long run a bounded
number, ``--deterministic`` runs rows at steps only; and TensorBoard reads the event files.

The short run is the guide's example (docs/guide/run_directory.md): ``tv.train("impala",
env="CartPole-v1", total_steps=20_000)`` with the default settings, which take a few seconds,
so that rows every ``log_every_s`` seconds alone gave one or two rows. The schedule of a long
run is simulated with a fake clock.
"""

import json
import os

import pytest

import tfagents_vtrace as tv
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.rundir import triggers
from tfagents_vtrace.runtime.rundir.triggers import EitherTrigger, IntervalTrigger, TimeTrigger


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    logdir = str(tmp_path_factory.mktemp("rows") / "cp")
    final = tv.train("impala", env="CartPole-v1", logdir=logdir, total_steps=20_000, export=False)
    with open(os.path.join(logdir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    with open(os.path.join(logdir, "config.json")) as f:
        run = json.load(f)["run_config"]
    return logdir, final, rows, run


def test_a_short_run_writes_rows_at_a_step_cadence(short_run):
    _, final, rows, run = short_run
    per_update = run["num_envs"] * run["unroll_length"] * run["batch_unrolls"]
    assert len(rows) >= 20, [r["step"] for r in rows]
    steps = [r["step"] for r in rows]
    assert steps == sorted(set(steps))  # strictly increasing
    gaps = [b - a for a, b in zip(steps, steps[1:])]
    assert min(gaps) >= max(per_update, 20_000 // 100)  # at most one row per update
    assert all("episode_return" in r for r in rows[1:])  # a curve: tfv-plot draws these
    assert steps[-1] == final["step"]


@pytest.mark.parametrize(
    "settings, steps, seconds",
    [
        ({}, 10_000, 5.0),  # auto: every hundredth of total_steps or every log_every_s
        ({"log_every_s": 30.0}, 10_000, 30.0),
        ({"log_every_steps": 500}, 500, None),  # steps only
        ({"deterministic": True}, 10_000, None),  # steps only: rows that do not follow load
        ({"deterministic": True, "log_every_steps": 64}, 64, None),
    ],
)
def test_row_cadence_of_the_settings(settings, steps, seconds):
    run = RunConfig(env_id="CartPole-v1", total_steps=1_000_000, **settings)
    assert run.row_every_steps == steps and run.row_every_s == seconds


def test_either_trigger_calls_every_trigger():
    calls = []

    class Spy:
        def __init__(self, due):
            self.due = due

        def __call__(self, value):
            calls.append(value)
            return self.due

    assert EitherTrigger(Spy(True), Spy(False))(7) and calls == [7, 7]
    assert not EitherTrigger(Spy(False), Spy(False))(8)


def _rows_of_a_simulated_run(monkeypatch, total_steps, steps_per_s, duration_s, log_every_s):
    """Row times of a run at ``steps_per_s`` for ``duration_s`` seconds, updates of 256 steps,
    under the auto cadence (the driver's triggers, a fake clock)."""
    now = [0.0]
    monkeypatch.setattr(triggers.time, "monotonic", lambda: now[0])
    run = RunConfig(env_id="CartPole-v1", total_steps=total_steps, log_every_s=log_every_s)
    rows = EitherTrigger(IntervalTrigger(run.row_every_steps, 0), TimeTrigger(run.row_every_s))
    times, step = [], 0
    while now[0] < duration_s:
        step += 256
        now[0] = step / steps_per_s
        if rows(step):
            times.append(now[0])
    return times


def test_a_long_run_writes_rows_every_few_seconds(monkeypatch):
    # 50M steps at 5000 steps/s: two hours and three quarters.
    times = _rows_of_a_simulated_run(monkeypatch, 50_000_000, 5000.0, 10_000.0, 5.0)
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert min(gaps) > 1.0  # never more than a row a second
    assert len(times) <= 100 * 10_000 / 50_000_000 * 5000 + 10_000 / 5.0 + 1


def test_a_fast_short_run_writes_at_most_a_hundred_step_rows(monkeypatch):
    # 100k steps at 50000 steps/s: 2 s, rows every 1000 steps (and the clock's at 5 s: none).
    times = _rows_of_a_simulated_run(monkeypatch, 100_000, 50_000.0, 2.0, 5.0)
    assert 95 <= len(times) <= 100


def test_tensorboard_reads_the_runs_scalars(short_run):
    """TensorBoard's own readers load the event files: the data provider behind its scalars
    dashboard (``tensorboard --logdir``) and the EventAccumulator; every numeric field of
    every row is there, at the row's step, with the row's value (float32)."""
    pytest.importorskip("tensorboard")
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider, event_accumulator
    from tensorboard.backend.event_processing import plugin_event_multiplexer as pem
    from tensorboard.util import tensor_util

    logdir, _, rows, _ = short_run
    multiplexer = pem.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(logdir)
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, logdir)
    scalars = provider.read_scalars(
        context.RequestContext(), experiment_id="", plugin_name="scalars", downsample=10_000
    )
    (run,) = scalars.values()  # one run: the logdir itself
    for key in ("episode_return", "sps", "episodes", "pg_loss"):
        want = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), int | float)]
        got = [(d.step, d.value) for d in run[key]]
        assert len(got) == len(want) >= 20, key
        for (s, v), (ws, wv) in zip(got, want):
            assert s == ws and v == pytest.approx(wv, rel=1e-6, abs=1e-6), key
    keep_all = {event_accumulator.TENSORS: 0}  # the default keeps a sample of 10
    accumulator = event_accumulator.EventAccumulator(logdir, size_guidance=keep_all)
    accumulator.Reload()
    tensors = accumulator.Tensors("episode_return")
    want = [(r["step"], r["episode_return"]) for r in rows if "episode_return" in r]
    got = [(t.step, float(tensor_util.make_ndarray(t.tensor_proto))) for t in tensors]
    assert [s for s, _ in got] == [s for s, _ in want]
    assert [v for _, v in got] == pytest.approx([v for _, v in want], rel=1e-6)
