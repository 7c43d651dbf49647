"""benchmarks/seed_stats.py (numpy only): the IQM's convention, the bootstrap CI's coverage,
reproducibility and stratification, and degenerate inputs."""

import numpy as np
import pytest

from tests.bench_modules import load_benchmark


def _stats():
    return load_benchmark("seed_stats")


stats = _stats()


def test_iqm_drops_floor_n_over_4_scores_at_each_end_as_scipy_trim_mean():
    # n divisible by 4: the middle half exactly.
    assert stats.iqm([8, 1, 4, 2, 100, 3, 5, 6]) == (3 + 4 + 5 + 6) / 4
    assert stats.iqm([4, 1, 3, 2]) == (2 + 3) / 2
    # n = 1..3: floor(n / 4) = 0, nothing is dropped (no fractional weights).
    assert stats.iqm([7]) == 7
    assert stats.iqm([1, 10]) == 5.5
    assert stats.iqm([1, 2, 30]) == 11
    # n = 5, 6, 7: one score dropped at each end, the rest weighted equally.
    assert stats.iqm([50, 1, 2, 3, 4]) == (2 + 3 + 4) / 3
    assert stats.iqm([0, 1, 2, 3, 4, 100]) == (1 + 2 + 3 + 4) / 4
    assert stats.iqm([-9, 1, 2, 3, 4, 5, 90]) == 3
    # n = 9: two dropped at each end.
    assert stats.iqm([-50, -40, 1, 2, 3, 4, 5, 60, 70]) == 3
    rng = np.random.default_rng(0)
    for n in range(1, 14):  # scipy.stats.trim_mean(x, 0.25), written out
        x = rng.normal(size=n)
        k = int(0.25 * n)
        assert stats.iqm(x) == pytest.approx(np.mean(np.sort(x)[k : n - k]), abs=1e-12)


def test_median():
    assert stats.median([3, 1, 2]) == 2
    assert stats.median([4, 1, 3, 2]) == 2.5


def test_bootstrap_ci_covers_the_true_mean_in_most_repetitions():
    rng = np.random.default_rng(123)
    covered = 0
    for i in range(200):
        x = rng.normal(loc=5.0, scale=2.0, size=30)
        low, high = stats.bootstrap_ci(x, stats.mean, confidence=0.95, reps=500, seed=i)
        assert low <= stats.mean(x) <= high
        covered += low <= 5.0 <= high
    assert 0.9 * 200 <= covered <= 0.99 * 200, covered


def test_bootstrap_ci_is_reproducible_for_a_seed_and_narrows_with_confidence():
    x = [3.0, 9.0, 4.0, 12.0, 7.0, 5.0]
    a = stats.bootstrap_ci(x, stats.iqm, seed=7)
    assert a == stats.bootstrap_ci(x, stats.iqm, seed=7)
    assert a != stats.bootstrap_ci(x, stats.iqm, seed=8)
    low80, high80 = stats.bootstrap_ci(x, stats.iqm, confidence=0.8, seed=7)
    assert a[0] <= low80 <= high80 <= a[1]
    assert min(x) <= a[0] <= stats.iqm(x) <= a[1] <= max(x)


def test_stratified_bootstrap_resamples_within_each_task_keeping_its_run_count():
    rng = np.random.default_rng(0)
    tasks = {"a": np.array([1.0, 2.0, 3.0]), "b": np.array([100.0, 200.0, 300.0, 400.0, 500.0])}
    for _ in range(50):
        sample = stats.resample(tasks, rng)
        assert list(sample) == ["a", "b"]
        assert sample["a"].size == 3 and sample["b"].size == 5
        assert set(sample["a"]) <= {1.0, 2.0, 3.0}
        assert set(sample["b"]) <= {100.0, 200.0, 300.0, 400.0, 500.0}
    seen = []
    low, high = stats.bootstrap_ci(tasks, lambda s: seen.append(s) or stats.aggregate_iqm(s))
    assert len(seen) == 2000 and all((s["a"].size, s["b"].size) == (3, 5) for s in seen)
    assert low <= stats.aggregate_iqm(tasks) <= high


def test_aggregates_follow_rliable():
    tasks = {"a": [1, 2, 3], "b": [10, 20, 30, 40, 50], "c": [0, 0, 6]}
    pooled = np.sort([1, 2, 3, 10, 20, 30, 40, 50, 0, 0, 6])  # 11 runs: 2 dropped each end
    assert stats.aggregate_iqm(tasks) == pytest.approx(np.mean(pooled[2:9]))
    assert stats.aggregate_median(tasks) == 2  # task means 2, 30, 2


def test_summarize_per_task_and_aggregate_with_the_few_runs_note():
    out = stats.summarize({"breakout": [10, 14, 30], "freeway": [20, 21, 22, 23, 24]})
    assert (out["confidence"], out["reps"], out["seed"]) == (0.95, 2000, 0)
    b = out["tasks"]["breakout"]
    assert (b["runs"], b["median"], b["iqm"]) == (3, 14, 18)
    assert b["median_ci"] == [10, 30]  # 3 runs: from the lowest to the highest score
    assert b["iqm_ci"][0] <= 18 <= b["iqm_ci"][1]
    f = out["tasks"]["freeway"]
    assert (f["runs"], f["median"], f["iqm"]) == (5, 22, 22)
    assert out["aggregate"]["tasks"] == 2 and out["aggregate"]["runs"] == 8
    assert out["note"].startswith("3 runs: a 95% bootstrap CI over so few runs is wide")
    assert out == stats.summarize({"breakout": [10, 14, 30], "freeway": [20, 21, 22, 23, 24]})
    many = stats.summarize({"x": list(range(8))}, aggregate=False)
    assert many["note"] is None and "aggregate" not in many


def test_one_run_gives_the_point_as_its_interval():
    assert stats.bootstrap_ci([4.5], stats.iqm) == (4.5, 4.5)
    assert stats.bootstrap_ci({"a": [1.0], "b": [3.0]}, stats.aggregate_iqm) == (2.0, 2.0)
    one = stats.summarize({"a": [4.5]})["tasks"]["a"]
    assert one["median_ci"] == one["iqm_ci"] == [4.5, 4.5]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: stats.iqm([]), "scores: expected at least one score"),
        (lambda: stats.median([]), "scores: expected at least one score"),
        (lambda: stats.bootstrap_ci([]), "scores: expected at least one score"),
        (lambda: stats.bootstrap_ci([1.0, float("nan")]), "scores: expected finite scores"),
        (lambda: stats.bootstrap_ci([[1.0, 2.0]]), "scores: expected a 1-D sequence"),
        (lambda: stats.bootstrap_ci([1.0], confidence=1.0), "confidence: expected a number"),
        (lambda: stats.bootstrap_ci([1.0], reps=0), "reps: expected an integer >= 1"),
        (lambda: stats.summarize({}), "scores_by_task: expected at least one task"),
        (lambda: stats.summarize([1.0]), "scores_by_task: expected a mapping"),
        (lambda: stats.summarize({"a": [1.0], "b": []}), "scores_by_task['b']: expected at"),
    ],
)
def test_degenerate_inputs_raise_naming_the_argument(call, message):
    with pytest.raises(ValueError) as e:
        call()
    assert str(e.value).startswith(message), str(e.value)


def test_format_ci():
    assert stats.format_ci(1.234, [0.5, 2.0]) == "1.23 [0.50, 2.00]"
    assert stats.format_ci(None, None) == "-"
    assert stats.format_ci(3.0, None, ".1f") == "3.0"
