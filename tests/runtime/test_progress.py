"""Progress display: a bar on a terminal, plain lines otherwise, and the last row always shown."""

from tfagents_vtrace.runtime.rundir import progress as progress_lib


def test_rows_become_lines_without_a_terminal(capsys):
    progress = progress_lib.Progress(100, enabled=True)
    progress.log({"step": 50, "wall_time": 1.0, "sps": 50.0, "episode_return": 9.5})
    assert "step=50 sps=50 return=9.5 wall=1.0s eta=" in capsys.readouterr().err


def test_the_row_after_the_bar_is_closed_is_printed(capsys, monkeypatch):
    monkeypatch.setattr(progress_lib, "_isatty", lambda: True)
    progress = progress_lib.Progress(100)
    progress.update(40, [])
    progress.log({"step": 40, "wall_time": 1.0, "sps": 40.0, "episode_return": None})
    assert "step=40" not in capsys.readouterr().err  # a bar postfix, not a line
    progress.close()
    progress.log({"step": 100, "wall_time": 2.0, "sps": 60.0, "episode_return": 3.0,
                  "eval_return": 7.0})  # fmt: skip
    assert "step=100 sps=60 return=3.0 eval=7.0 wall=2.0s" in capsys.readouterr().err


def test_a_row_naming_its_bottleneck_shows_it_with_its_share(capsys):
    progress = progress_lib.Progress(100, enabled=True)
    progress.log({"step": 50, "wall_time": 1.0, "sps": 50.0, "episode_return": 9.5,
                  "time_learner": 0.781, "time_wait": 0.02, "bottleneck": "learner"})  # fmt: skip
    line = capsys.readouterr().err.strip()
    assert line.startswith("step=50 sps=50 return=9.5 wall=1.0s eta=")
    assert line.endswith(" bottleneck: learner 78%")


def test_rows_carry_the_policy_lag_quantiles_and_the_line_its_median(capsys):
    from tfagents_vtrace.runtime.rundir.counters import Counters

    counters = Counters()
    for lag in (10, 0, 2, 1, 1):
        counters.add(steps=5, updates=1, lag=lag)
    row = counters.row()
    # Sorted lags 0, 1, 1, 2, 10; the 95th percentile interpolates between the 4th and 5th:
    # position 0.95 * 4 = 3.8 -> 2 + 0.8 * (10 - 2) = 8.4.
    assert row["policy_lag"] == 2.8 and row["policy_lag_p50"] == 1.0
    assert abs(row["policy_lag_p95"] - 8.4) < 1e-12 and row["policy_lag_max"] == 10.0
    assert counters.row()["policy_lag_p50"] is None  # the next row starts afresh
    progress = progress_lib.Progress(100, enabled=True)
    progress.log({"step": 25, "wall_time": 1.0, "sps": 5.0, **row})
    assert " lag=1 " in capsys.readouterr().err
