"""Statistics over the seeds of a benchmark: median, interquartile mean, bootstrap CIs.

Pure numpy (no TensorFlow), the estimators of Agarwal et al., "Deep Reinforcement Learning
at the Edge of the Statistical Precipice", NeurIPS 2021, https://arxiv.org/abs/2108.13264
(the ``rliable`` library), written plainly:

- :func:`median`: the median of the runs' scores (numpy's, the mean of the middle two for
  an even count).
- :func:`iqm`: the interquartile mean, the mean of the middle 50% of the sorted scores,
  as ``rliable.metrics.aggregate_iqm`` = ``scipy.stats.trim_mean(x, 0.25)``: it drops
  ``k = floor(n / 4)`` scores at each end and averages the rest with equal weights (no
  fractional weights for the scores at the cut). So for n = 1, 2, 3 it is the mean of all
  scores; n = 4..7 drops one score at each end; n = 8..11 two.
- :func:`bootstrap_ci`: a percentile bootstrap confidence interval over runs: the runs are
  resampled with replacement ``reps`` times (as many as there were), the statistic is
  computed on each resample, and the interval is that statistic's
  ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` percentiles (numpy's linear
  interpolation). Given ``{task: scores}`` the bootstrap is stratified, as rliable's
  ``StratifiedBootstrap``: each task's runs are resampled within that task, each task
  keeping its run count (tasks may have different counts).
- :func:`summarize`: per task and over tasks (rliable's aggregates: the IQM of all runs of
  all tasks pooled, and the median over tasks of each task's mean score), the median, the
  IQM and their CIs.

Few runs: with 3 seeds a 95% interval is wide (a resample of 3 runs is all the lowest one
with probability 1/27 = 3.7% > 2.5%, so the median's interval runs from the lowest score
to the highest) and a percentile bootstrap over so few runs still tends to cover less than
its nominal 95%. :func:`summarize` says so in its ``note`` when a task has fewer than
:data:`FEW_RUNS` runs; more seeds are the remedy, not a finer statistic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

FEW_RUNS = 5  # fewer runs than this in a task: summarize() notes that its CIs are wide


def _scores(scores, name: str = "scores") -> np.ndarray:
    """``scores`` as a 1-D float array; ValueError naming ``name`` when it is empty, not
    1-D or not finite."""
    x = np.asarray(scores, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D sequence of scores, received shape {x.shape}")
    if x.size == 0:
        raise ValueError(f"{name}: expected at least one score, received none")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name}: expected finite scores, received {x.tolist()}")
    return x


def median(scores: Sequence[float]) -> float:
    """The median of ``scores`` (the mean of the middle two for an even count)."""
    return float(np.median(_scores(scores)))


def iqm(scores: Sequence[float]) -> float:
    """The interquartile mean of ``scores``: ``scipy.stats.trim_mean(scores, 0.25)``, the
    mean of the sorted scores without the ``floor(n / 4)`` lowest and highest."""
    x = np.sort(_scores(scores))
    k = x.size // 4
    return float(np.mean(x[k : x.size - k]))


def mean(scores: Sequence[float]) -> float:
    """The mean of ``scores``."""
    return float(np.mean(_scores(scores)))


def aggregate_iqm(scores_by_task: Mapping[str, Sequence[float]]) -> float:
    """The IQM of every run of every task pooled (rliable's ``aggregate_iqm``)."""
    return iqm(np.concatenate(list(_tasks(scores_by_task).values())))


def aggregate_median(scores_by_task: Mapping[str, Sequence[float]]) -> float:
    """The median over tasks of each task's mean score (rliable's ``aggregate_median``)."""
    return float(np.median([mean(v) for v in _tasks(scores_by_task).values()]))


def _tasks(scores_by_task: Mapping[str, Sequence[float]]) -> dict[str, np.ndarray]:
    if not isinstance(scores_by_task, Mapping):
        raise ValueError(
            "scores_by_task: expected a mapping {task: scores}, received "
            f"{type(scores_by_task).__name__}"
        )
    if not scores_by_task:
        raise ValueError("scores_by_task: expected at least one task, received none")
    return {k: _scores(v, f"scores_by_task[{k!r}]") for k, v in scores_by_task.items()}


def resample(scores, rng: np.random.Generator):
    """One bootstrap resample: runs drawn with replacement, as many as there were; for
    ``{task: scores}``, within each task (stratified: each task keeps its run count)."""
    if isinstance(scores, Mapping):
        return {k: v[rng.integers(0, v.size, v.size)] for k, v in scores.items()}
    return scores[rng.integers(0, scores.size, scores.size)]


def bootstrap_ci(
    scores,
    statistic: Callable = iqm,
    confidence: float = 0.95,
    reps: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """The percentile bootstrap ``confidence`` interval ``(low, high)`` of
    ``statistic(scores)`` over ``reps`` resamples of the runs (module docstring).

    Args:
      scores: the runs' scores (a 1-D sequence), or ``{task: scores}``: then the bootstrap
        is stratified (runs resampled within each task) and ``statistic`` receives
        ``{task: resampled scores}`` (e.g. :func:`aggregate_iqm`).
      statistic: a function of the scores to a number (default :func:`iqm`).
      confidence: the interval's coverage, in (0, 1).
      reps: the number of bootstrap resamples (rliable's default is 50000; 2000 resolves
        the 2.5% and 97.5% percentiles well enough for a few runs).
      seed: the seed of the resampling (same seed, same interval).

    One run gives the interval ``(point, point)``: a bootstrap only knows the runs it has.

    Raises:
      ValueError: naming ``scores`` (empty, not 1-D, not finite), ``scores_by_task[...]``,
        ``confidence`` or ``reps``.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence: expected a number in (0, 1), received {confidence!r}")
    if isinstance(reps, bool) or not isinstance(reps, int | np.integer) or reps < 1:
        raise ValueError(f"reps: expected an integer >= 1, received {reps!r}")
    data = _tasks(scores) if isinstance(scores, Mapping) else _scores(scores)
    rng = np.random.default_rng(seed)
    stats = np.fromiter((statistic(resample(data, rng)) for _ in range(reps)), float, reps)
    alpha = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(stats, [alpha, 100.0 - alpha])
    return float(low), float(high)


def few_runs_note(runs: int, confidence: float = 0.95) -> str:
    """The caveat printed with intervals over ``runs`` runs (fewer than :data:`FEW_RUNS`)."""
    return (
        f"{runs} run{'s' if runs != 1 else ''}: a {confidence:.0%} bootstrap CI over so few "
        "runs is wide (near the runs' min-max) and still tends to cover less than "
        f"{confidence:.0%}; more seeds narrow it"
    )


def summarize(
    scores_by_task: Mapping[str, Sequence[float]],
    confidence: float = 0.95,
    reps: int = 2000,
    seed: int = 0,
    aggregate: bool = True,
) -> dict:
    """Median, IQM and their bootstrap CIs per task and over tasks.

    Returns:
      ``{"confidence", "reps", "seed", "tasks": {task: {"runs", "median", "median_ci",
      "iqm", "iqm_ci"}}, "aggregate": {"tasks", "runs", "median", "median_ci", "iqm",
      "iqm_ci"} (with ``aggregate``; the stratified bootstrap of :func:`aggregate_median`
      and :func:`aggregate_iqm`, meaningful when the tasks' scores share a scale), "note"}``;
      CIs are ``[low, high]`` lists; ``note`` is :func:`few_runs_note` for the smallest
      run count when a task has fewer than :data:`FEW_RUNS` runs, else None.

    Raises:
      ValueError: as :func:`bootstrap_ci`.
    """
    tasks = _tasks(scores_by_task)
    out: dict = {"confidence": confidence, "reps": reps, "seed": seed, "tasks": {}}
    for task, x in tasks.items():
        out["tasks"][task] = {"runs": int(x.size)}
        for name, fn in (("median", median), ("iqm", iqm)):
            out["tasks"][task][name] = fn(x)
            out["tasks"][task][f"{name}_ci"] = list(bootstrap_ci(x, fn, confidence, reps, seed))
    if aggregate:
        agg: dict = {"tasks": len(tasks), "runs": int(sum(x.size for x in tasks.values()))}
        for name, fn in (("median", aggregate_median), ("iqm", aggregate_iqm)):
            agg[name] = fn(tasks)
            agg[f"{name}_ci"] = list(bootstrap_ci(tasks, fn, confidence, reps, seed))
        out["aggregate"] = agg
    fewest = min(x.size for x in tasks.values())
    out["note"] = few_runs_note(fewest, confidence) if fewest < FEW_RUNS else None
    return out


def format_ci(point: float | None, ci: Sequence[float] | None, spec: str = ".2f") -> str:
    """``"point [low, high]"`` (``"-"`` without a point; the point alone without a CI)."""
    if point is None:
        return "-"
    if ci is None:
        return format(point, spec)
    return f"{point:{spec}} [{ci[0]:{spec}}, {ci[1]:{spec}}]"
