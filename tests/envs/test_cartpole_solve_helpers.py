"""benchmarks/cartpole_solve.py bookkeeping: the solve point and the median with failures."""

from tests.bench_modules import load_benchmark

cartpole_solve = load_benchmark("cartpole_solve")


def test_solve_point_is_the_first_eval_reaching_the_bar():
    rows = [
        {"step": 5000, "wall_time": 3.0, "episode_return": 480.0},  # training rows don't count
        {"step": 5000, "wall_time": 3.5, "eval_return": 200.0},
        {"step": 10000, "wall_time": 6.0, "eval_return": 475.0},
        {"step": 15000, "wall_time": 9.0, "eval_return": 500.0},
    ]
    assert cartpole_solve._solve_from_metrics(rows, 475.0) == (10000, 6.0)
    assert cartpole_solve._solve_from_metrics(rows[:2], 475.0) is None


def test_median_counts_unsolved_runs_as_slowest():
    run = lambda t: {"solved": t is not None, "time_to_solve": t}  # noqa: E731
    assert cartpole_solve._median_time([run(10.0), run(None), run(30.0)]) == 30.0
    assert cartpole_solve._median_time([run(10.0), run(None), run(None)]) is None
    assert cartpole_solve._median_time([run(3.0), run(1.0), run(2.0)]) == 2.0


def test_last_json_line():
    out = 'noise\n{"a": 1}\nepisode 3\n{"final": true, "step": 7}\n'
    assert cartpole_solve._last_json(out) == {"final": True, "step": 7}
    assert cartpole_solve._last_json("no json here") == {}
