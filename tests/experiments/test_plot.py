"""experiments.plot: metrics.jsonl parsing, runs grouped over seeds (aggregate, band,
smoothing, the CSV), time shares summing to 1, the PNG, and clear errors."""

import csv
import json
import os
import subprocess
import sys

import matplotlib.image
import numpy as np
import pytest

from tfagents_vtrace.commands import plot, plotting

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


@pytest.mark.parametrize("line", ["[1, 2]", "7", '"step"', "null"])
def test_a_line_that_is_no_json_object_is_named(tmp_path, line):
    run = _write_run(tmp_path / "run", ROWS[:1])
    with open(os.path.join(run, "metrics.jsonl"), "a") as f:
        f.write(line + "\n")
    for load in (plot.load_metrics, plot.load_time_fractions):
        with pytest.raises(ValueError, match=r"metrics\.jsonl:2: not a JSON object \("):
            load(run)
    # a row whose step is not a number is skipped, as the run's resume drops it
    with open(os.path.join(run, "metrics.jsonl"), "w") as f:
        f.write(json.dumps(ROWS[0]) + '\n{"step": null, "wall_time": 2, "episode_return": 9}\n')
    assert plot.load_metrics(run)["train"] == [(100.0, 1.0, 10.0)]


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


# Runs of several seeds: crafted metrics.jsonl and config.json, compared with numpy.

CONFIG = {"agent": "impala", "env_id": "CartPole-v1", "agent_config": {"learning_rate": 7e-4},
          "run_config": {"seed": 0, "num_envs": 16}, "resume_fixed": []}  # fmt: skip
STEPS = [100, 200, 300, 400, 500]
RETURNS = {0: [10.0, 30.0, 20.0, 80.0, 90.0], 1: [12.0, 18.0, 50.0, 60.0, 200.0],
           2: [9.0, 25.0, 35.0, 40.0, 120.0]}  # fmt: skip
EVALS = {0: [5.0, 100.0], 1: [7.0, 300.0], 2: [20.0, 250.0]}  # at steps 200 and 400


def _seed_run(path, seed, lr=None):
    """A run directory like tfv-train's: config.json with ``seed`` (and ``lr``), the
    training returns RETURNS[seed] at STEPS, the evaluations EVALS[seed]."""
    rows = [
        {"step": s, "wall_time": 4.0 + s / 100 + seed / 4, "episode_return": r}
        for s, r in zip(STEPS, RETURNS[seed])
    ]
    for step, value in zip((200, 400), EVALS[seed]):
        row = {"step": step, "wall_time": 4.5 + step / 100 + seed / 4, "eval_return": value}
        rows.insert([r["step"] for r in rows].index(step) + 1, row)
    run = _write_run(path, rows)
    config = json.loads(json.dumps(CONFIG))
    config["run_config"]["seed"] = seed
    if lr is not None:
        config["agent_config"]["learning_rate"] = lr
    with open(os.path.join(run, "config.json"), "w") as f:
        json.dump(config, f)
    return run


def _read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _curve(rows, metric, x_axis="step"):
    return [r for r in rows if r["metric"] == metric and r["x_axis"] == x_axis]


def test_median_and_iqr_band_of_three_seeds_equal_numpy(tmp_path):
    for seed in (0, 1, 2):
        _seed_run(tmp_path / "cp" / f"seed_{seed}", seed)
    out = tmp_path / "fig" / "cp.png"
    plot.plot_runs([str(tmp_path / "cp")], str(out))  # a parent directory of seed runs
    table = np.array([RETURNS[s] for s in (0, 1, 2)])
    rows = _read_csv(tmp_path / "fig" / "cp.csv")  # written beside the figure
    assert list(rows[0]) == ["group", "metric", "x_axis", "x", "median", "iqr_low", "iqr_high",
                             "runs", "group_runs"]  # fmt: skip
    train = _curve(rows, "episode_return")
    assert [float(r["x"]) for r in train] == STEPS
    assert {r["group"] for r in rows} == {"cp"}  # one curve: same config apart from the seed
    np.testing.assert_allclose([float(r["median"]) for r in train], np.median(table, axis=0))
    np.testing.assert_allclose([float(r["iqr_low"]) for r in train],
                               np.percentile(table, 25, axis=0))  # fmt: skip
    np.testing.assert_allclose([float(r["iqr_high"]) for r in train],
                               np.percentile(table, 75, axis=0))  # fmt: skip
    assert [(r["runs"], r["group_runs"]) for r in train] == [("3", "3")] * 5
    evals = _curve(rows, "eval_return")
    evals_table = np.array([EVALS[s] for s in (0, 1, 2)])
    assert [float(r["x"]) for r in evals] == [200, 400]
    np.testing.assert_allclose([float(r["median"]) for r in evals], np.median(evals_table, 0))
    by_wall = _curve(rows, "episode_return", "wall_time")  # on the three runs' own seconds
    assert [float(r["x"]) for r in by_wall] == sorted(
        5 + i + s / 4 for i in range(5) for s in (0, 1, 2)
    )
    assert [int(r["runs"]) for r in by_wall] == [1, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 1]
    image = matplotlib.image.imread(str(out))
    assert image.shape[1] > 1.5 * image.shape[0] > 300 and image[..., :3].std() > 0.05


@pytest.mark.parametrize("how,spread", [("mean", "std"), ("median", "minmax"), ("mean", "iqr")])
def test_other_aggregates_and_bands_equal_numpy(how, spread):
    runs = [(STEPS, RETURNS[s]) for s in (0, 1, 2)]
    curve = plotting.aggregate(runs, how, spread)
    table = np.array([RETURNS[s] for s in (0, 1, 2)])
    center = np.mean(table, 0) if how == "mean" else np.median(table, 0)
    low, high = {
        "std": (center - np.std(table, 0), center + np.std(table, 0)),
        "minmax": (table.min(0), table.max(0)),
        "iqr": (np.percentile(table, 25, 0), np.percentile(table, 75, 0)),
    }[spread]
    np.testing.assert_allclose(curve["value"], center)
    np.testing.assert_allclose(curve["low"], low)
    np.testing.assert_allclose(curve["high"], high)


def test_runs_of_different_lengths_are_not_extrapolated():
    a = ([0, 100, 200, 300, 400], [0.0, 10.0, 20.0, 30.0, 40.0])
    b = ([0, 100, 200], [5.0, 5.0, 35.0])  # ended early
    c = ([50, 250, 350], [100.0, 0.0, 50.0])  # other steps, starts late
    curve = plotting.aggregate([a, b, c], "median", "minmax")
    grid = [0, 50, 100, 200, 250, 300, 350, 400]
    assert curve["x"].tolist() == grid
    assert curve["runs"].tolist() == [2, 3, 3, 3, 2, 2, 2, 1]
    at = {x: [np.interp(x, *run) for run in (a, b, c) if run[0][0] <= x <= run[0][-1]]
          for x in grid}  # fmt: skip
    np.testing.assert_allclose(curve["value"], [np.median(at[x]) for x in grid])
    np.testing.assert_allclose(curve["low"], [min(at[x]) for x in grid])
    assert curve["value"][-1] == 40.0 and curve["high"][-1] == 40.0  # only run a at 400
    np.testing.assert_allclose(at[100], [10.0, 5.0, 100.0 - 50 / 200 * 100.0])
    assert curve["joined"].all()  # run a spans every stretch
    apart = plotting.aggregate([([0, 100], [1.0, 2.0]), ([200, 300], [3.0, 4.0])])
    assert apart["joined"].tolist() == [True, False, True]  # no run between 100 and 200
    assert apart["runs"].tolist() == [1, 1, 1, 1]


def test_smoothing_is_a_trailing_moving_average(tmp_path):
    values = [1.0, 2.0, 6.0, 3.0, 8.0]
    expected = [1.0, (1 + 2) / 2, (1 + 2 + 6) / 3, (2 + 6 + 3) / 3, (6 + 3 + 8) / 3]
    np.testing.assert_allclose(plotting.smooth(values, 3), expected)
    assert plotting.smooth(values, 0).tolist() == values == plotting.smooth(values, 1).tolist()
    np.testing.assert_allclose(plotting.smooth(values, 9), np.cumsum(values) / np.arange(1, 6))
    # Applied to each run before the aggregate: three runs, --smooth=2, mean over runs.
    for seed in (0, 1, 2):
        _seed_run(tmp_path / "cp" / f"seed_{seed}", seed)
    out = tmp_path / "s.png"
    plot.plot_runs([str(tmp_path / "cp" / "seed_*")], str(out), aggregate="mean", smooth=2)
    train = _curve(_read_csv(tmp_path / "s.csv"), "episode_return")
    by_hand = [[r[0]] + [(r[i - 1] + r[i]) / 2 for i in range(1, 5)] for r in RETURNS.values()]
    np.testing.assert_allclose([float(r["mean"]) for r in train], np.mean(by_hand, axis=0))


def test_groups_are_configs_apart_from_the_seed_or_labels(tmp_path):
    runs = [_seed_run(tmp_path / "sweep" / f"s{seed}", seed) for seed in (0, 1)]
    runs.append(_seed_run(tmp_path / "sweep" / "lr_s0", 0, lr=1e-3))
    runs.append(_write_run(tmp_path / "other" / "no_config", ROWS))
    groups = plot.group_runs([str(tmp_path / "sweep"), runs[-1], runs[0]])
    assert [len(g[1]) for g in groups] == [1, 2, 1]  # sorted: lr_s0, then s0 and s1
    assert groups[1][1] == [runs[0], runs[1]]  # runs[0] given twice: counted once
    assert [g[0] for g in groups] == ["lr_s0", "sweep", "no_config"]
    labelled = plot.group_runs([runs[0], runs[2], runs[3]], ["a", "b", "a"])
    assert labelled == [("a", [runs[0], runs[3]]), ("b", [runs[2]])]
    with pytest.raises(ValueError, match="one per --logdir"):
        plot.group_runs(runs, ["a"])


TIME_SUMS_ABOVE_AND_BELOW = [
    # learner thread: 0.9 + 0.2 + 0.3 + 0.2 = 1.6; actors: 0.5 + 0.4 + 0.1 = 1.0
    {"step": 100, "wall_time": 1.0, "time_learner": 0.9, "time_publish": 0.2, "time_eval": 0.3,
     "time_wait": 0.2, "time_env": 0.5, "time_inference": 0.4, "time_weights": 0.1},
    # learner thread: 0.5 + 0.1 + 0 + 0.1 = 0.7; actors: 0.7 + 0.6 + 0.3 = 1.6
    {"step": 200, "wall_time": 2.0, "time_learner": 0.5, "time_publish": 0.1, "time_eval": None,
     "time_wait": 0.1, "time_env": 0.7, "time_inference": 0.6, "time_weights": 0.3},
]  # fmt: skip


def test_time_shares_sum_to_exactly_one(tmp_path):
    run = _write_run(tmp_path / "timed", TIME_SUMS_ABOVE_AND_BELOW)
    panels = plot.time_shares(plot.load_time_fractions(run))
    for panel, parts in plot.TIME_PANELS.items():
        total = sum(panels[panel][part] for part in (*parts, "other"))
        np.testing.assert_allclose(total, [1.0, 1.0], rtol=0, atol=1e-9)
    learner = panels["learner thread"]
    assert learner["raw_sum"].tolist() == pytest.approx([1.6, 0.7])
    assert learner["learner"].tolist() == pytest.approx([0.9 / 1.6, 0.5])  # scaled / kept
    assert learner["other"].tolist() == pytest.approx([0.0, 0.3])
    assert panels["actors"]["env"].tolist() == pytest.approx([0.5, 0.7 / 1.6])
    out = tmp_path / "time.png"
    plot.plot_time([run], str(out), csv=str(tmp_path / "time_numbers.csv"))
    rows = _read_csv(tmp_path / "time_numbers.csv")
    assert [float(r["step"]) for r in rows] == [100, 200]
    for row in rows:
        for panel, parts in plot.TIME_PANELS.items():
            tag = panel.replace(" ", "_")
            total = sum(float(row[p]) for p in parts) + float(row[f"other_{tag}"])
            assert abs(total - 1.0) < 1e-9
    assert not (tmp_path / "time.csv").exists()  # --csv given: not beside the figure


def test_find_runs_in_a_parent_directory_and_a_glob(tmp_path):
    runs = [_seed_run(tmp_path / "cp" / f"seed_{seed}", seed) for seed in (0, 1, 2)]
    os.makedirs(tmp_path / "cp" / "seed_0" / "checkpoints")
    assert plot.find_runs(str(tmp_path / "cp")) == runs
    assert plot.find_runs(str(tmp_path / "cp" / "seed_[12]")) == runs[1:]
    assert plot.find_runs(runs[0]) == [runs[0]]
    with pytest.raises(FileNotFoundError, match="matches no directory"):
        plot.find_runs(str(tmp_path / "nope_*"))


def test_cli_aggregates_seeds_and_writes_the_csv(tmp_path):
    for seed in (0, 1, 2):
        _seed_run(tmp_path / "cp" / f"seed_{seed}", seed)
    out = tmp_path / "cp.png"
    cmd = [sys.executable, "-m", "experiments.plot", f"--logdir={tmp_path / 'cp'}",
           f"--output={out}", "--spread=minmax", "--smooth=1"]  # fmt: skip
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"output": str(out), "csv": str(tmp_path / "cp.csv"), "runs": 3, "curves": 1}
    train = _curve(_read_csv(tmp_path / "cp.csv"), "episode_return")
    table = np.array([RETURNS[s] for s in (0, 1, 2)])
    np.testing.assert_allclose([float(r["minmax_high"]) for r in train], table.max(0))


def _plot_cli(*args):
    return subprocess.run([sys.executable, "-m", "experiments.plot", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


PLOT_FLAG_ERRORS = {
    "aggregate": (["--aggregate=mode"],
                  "error: --aggregate: expected one of median, mean, received 'mode'"),
    "spread": (["--spread=sem"],
               "error: --spread: expected one of iqr, minmax, std, received 'sem'"),
    "smooth": (["--smooth=-1"], "error: --smooth: expected an int >= 0, received -1"),
    "smooth_type": (["--smooth=2.5"], "error: --smooth: expected an integer, received '2.5'"),
    "label": (["--label=a", "--label=b"], "error: --label: expected one per --logdir (1), "
              "received 2"),
    "no_runs_below": (["--logdir={tmp}/empty_dir"], "error: --logdir: {tmp}/empty_dir: no "
                      "metrics.jsonl at {tmp}/empty_dir/metrics.jsonl"),
    "glob": (["--logdir={tmp}/nothing_*"], "error: --logdir: {tmp}/nothing_*: the pattern "
             "matches no directory"),
}  # fmt: skip


@pytest.mark.parametrize("case", PLOT_FLAG_ERRORS)
def test_cli_flag_errors_are_one_line(tmp_path, case):
    good = _seed_run(tmp_path / "good", 0)
    os.makedirs(tmp_path / "empty_dir" / "sub")
    args, expected = PLOT_FLAG_ERRORS[case]
    args = [a.format(tmp=tmp_path) for a in args]
    logdirs = [] if any(a.startswith("--logdir") for a in args) else [f"--logdir={good}"]
    done = _plot_cli(*logdirs, *args, f"--output={tmp_path / 'c.png'}")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [expected.format(tmp=tmp_path)]  # no traceback
    assert not (tmp_path / "c.png").exists() and not (tmp_path / "c.csv").exists()
