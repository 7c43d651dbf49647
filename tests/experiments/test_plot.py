"""experiments.plot: metrics.jsonl parsing, the PNG, and clear errors."""

import json
import os
import subprocess
import sys

import matplotlib.image
import pytest

from experiments import plot

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _write_run(path, rows):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "metrics.jsonl"), "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return str(path)


ROWS = [
    {"step": 100, "wall_time": 1.0, "sps": 10, "episode_return": 10.0, "episodes": 3},
    {"step": 200, "wall_time": 2.0, "sps": 10, "episode_return": None, "episodes": 3},
    {"step": 200, "wall_time": 2.5, "eval_return": 50.0},
    {"step": 300, "wall_time": 3.0, "sps": 10, "episode_return": float("nan")},
    {"step": 400, "wall_time": 4.0, "sps": 10, "episode_return": 30.0, "loss": 0.5},
]


def test_load_metrics_separates_training_and_eval_rows(tmp_path):
    run = _write_run(tmp_path / "a", ROWS)
    curves = plot.load_metrics(run)
    assert curves["train"] == [(100.0, 1.0, 10.0), (400.0, 4.0, 30.0)]  # null / NaN skipped
    assert curves["eval"] == [(200.0, 2.5, 50.0)]


def test_a_background_evaluation_is_drawn_at_the_step_of_its_weights(tmp_path):
    rows = [*ROWS, {"step": 460, "wall_time": 4.5, "eval_step": 420, "eval_return": 60.0}]
    curves = plot.load_metrics(_write_run(tmp_path / "a", rows))
    assert curves["eval"] == [(200.0, 2.5, 50.0), (420.0, 4.5, 60.0)]


def test_plot_writes_a_two_panel_png(tmp_path):
    a = _write_run(tmp_path / "run_a", ROWS)
    b = _write_run(tmp_path / "run_b", [dict(r, step=r["step"] * 2) for r in ROWS])
    out = plot.plot_runs([a, b], str(tmp_path / "out" / "curves.png"))
    image = matplotlib.image.imread(out)
    assert image.shape[1] > 1.5 * image.shape[0] > 300  # wide figure, two panels
    assert image[..., :3].std() > 0.05  # something was drawn


def test_labels_disambiguate_same_names(tmp_path):
    assert plot._labels(["x/run", "y/run"]) == ["x/run", "y/run"]
    assert plot._labels(["x/a", "y/b"]) == ["a", "b"]


def test_missing_and_empty_metrics(tmp_path):
    with pytest.raises(FileNotFoundError, match="no metrics.jsonl"):
        plot.load_metrics(str(tmp_path))
    empty = _write_run(tmp_path / "empty", [{"step": 1, "wall_time": 1.0, "sps": 3}])
    with pytest.raises(ValueError, match="no episode_return or eval_return"):
        plot.load_metrics(empty)


def test_cli_errors_clearly_on_missing_metrics(tmp_path):
    good = _write_run(tmp_path / "good", ROWS)
    cmd = [sys.executable, "-m", "experiments.plot", f"--logdir={good}"]
    cmd += [f"--logdir={tmp_path / 'missing'}", f"--output={tmp_path / 'c.png'}"]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    missing = tmp_path / "missing"
    expected = f"error: --logdir: {missing}: no metrics.jsonl at {missing / 'metrics.jsonl'}"
    assert out.stderr.strip().splitlines() == [expected]  # one line, no traceback
    assert not (tmp_path / "c.png").exists()
    ok = subprocess.run(cmd[:4] + [f"--output={tmp_path / 'c.png'}"], cwd=REPO,
                        capture_output=True, text=True, timeout=60)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "c.png").stat().st_size > 10_000


def _timed(step, learner, env, wait=0.05):
    return {"step": step, "wall_time": step / 100, "sps": 100, "episode_return": 1.0,
            "time_env": env, "time_inference": 0.1, "time_weights": 0.01, "time_wait": wait,
            "time_learner": learner, "time_publish": 0.02, "time_eval": None,
            "bottleneck": "learner"}  # fmt: skip


TIMED_ROWS = [
    {"step": 50, "wall_time": 0.5, "sps": 10, "episode_return": 1.0},  # an older row: skipped
    _timed(100, 0.8, 0.6),
    {"step": 100, "wall_time": 1.1, "eval_return": 9.0},
    _timed(200, 0.7, 0.7),
    _timed(300, 0.3, 0.9, wait=0.6),
]


def test_load_time_fractions_reads_rows_carrying_them(tmp_path):
    series = plot.load_time_fractions(_write_run(tmp_path / "a", TIMED_ROWS))
    assert series["step"] == [100.0, 200.0, 300.0]
    assert series["learner"] == [0.8, 0.7, 0.3] and series["wait"] == [0.05, 0.05, 0.6]
    assert series["eval"] == [0.0, 0.0, 0.0]  # null reads as 0
    assert set(series) == {"step", *plot.TIME_PARTS}
    with pytest.raises(ValueError, match="no rows with time_\\* fractions"):
        plot.load_time_fractions(_write_run(tmp_path / "old", ROWS))


def test_cli_draws_the_time_breakdown(tmp_path):
    a = _write_run(tmp_path / "a", TIMED_ROWS)
    b = _write_run(tmp_path / "b", TIMED_ROWS[1:])
    out = tmp_path / "time.png"
    cmd = [sys.executable, "-m", "experiments.plot", f"--logdir={a}", f"--logdir={b}",
           "--what=time", f"--output={out}"]  # fmt: skip
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    image = matplotlib.image.imread(str(out))
    assert image.shape[0] > 500 and image[..., :3].std() > 0.05  # two rows of panels, drawn
    old = _write_run(tmp_path / "old", ROWS)
    cmd[3:5] = [f"--logdir={old}"]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--logdir" in done.stderr and "time_*" in done.stderr
