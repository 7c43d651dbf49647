"""Progress display: a bar on a terminal, plain lines otherwise, and the last row always shown."""

from tfagents_vtrace.runtime import progress as progress_lib


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
