"""The numbers behind ``tfv-plot``'s figures (numpy only; :mod:`.commands.plot` draws them).

- :func:`smooth`: a trailing moving average over a run's logged rows.
- :func:`aggregate`: several runs of one curve (seeds) put on a common grid of x values and
  reduced to an aggregate (median or mean) with a spread band (interquartile range, min-max
  or mean +- one standard deviation), with the number of runs counted at each x. A run
  covers only the x values between its first and last row (linear interpolation inside, no
  extrapolation), so the count drops where shorter runs have ended.
- :func:`normalise_shares`: the ``time_*`` parts of a panel as shares that sum to exactly 1
  at every row, with an ``other`` share for the time no part accounts for.
- :func:`write_csv`: the rows of a figure's CSV.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping, Sequence

import numpy as np

AGGREGATES = ("median", "mean")
SPREADS = ("iqr", "minmax", "std")
SPREAD_NAMES = {
    "iqr": "interquartile range (25th-75th percentile)",
    "minmax": "min-max",
    "std": "+-1 standard deviation",
}
"""How each spread band reads in a legend."""


def smooth(values: Sequence[float], window: int) -> np.ndarray:
    """The trailing moving average of ``values`` over ``window`` rows.

    Entry ``i`` is the mean of ``values[max(0, i - window + 1) : i + 1]``: the first
    ``window - 1`` entries average the rows there are so far, and no entry looks ahead of
    its own row (the curve keeps its x values). ``window`` 0 or 1 leaves the values as
    they are.
    """
    values = np.asarray(values, dtype=float)
    if window < 0:
        raise ValueError(f"expected a window >= 0, received {window}")
    if window <= 1 or values.size == 0:
        return values.copy()
    sums = np.concatenate([[0.0], np.cumsum(values)])
    end = np.arange(1, values.size + 1)
    start = np.maximum(end - window, 0)
    return (sums[end] - sums[start]) / (end - start)


def on_grid(xs: Sequence[float], ys: Sequence[float], grid: np.ndarray) -> np.ndarray:
    """``ys`` (at ``xs``) linearly interpolated at ``grid``; NaN outside ``[min(xs),
    max(xs)]`` (a run says nothing beyond its last row). Rows are sorted by x; of rows at
    the same x the last one counts."""
    xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    order = np.argsort(xs, kind="stable")
    xs, ys = xs[order], ys[order]
    last = np.append(xs[1:] != xs[:-1], True)  # the last row of each x
    xs, ys = xs[last], ys[last]
    out = np.interp(grid, xs, ys)
    out[(grid < xs[0]) | (grid > xs[-1])] = np.nan
    return out


def aggregate(
    runs: Sequence[tuple[Sequence[float], Sequence[float]]],
    how: str = "median",
    spread: str = "iqr",
) -> dict[str, np.ndarray] | None:
    """One curve from several runs' ``(xs, ys)``.

    The grid is every x some run logged (sorted, once each); each run is interpolated onto
    it (:func:`on_grid`), and at each x the runs covering it are reduced.

    Args:
      runs: ``(xs, ys)`` per run; runs without rows are left out.
      how: ``"median"`` or ``"mean"``.
      spread: ``"iqr"`` (25th and 75th percentiles, numpy's linear interpolation),
        ``"minmax"``, or ``"std"`` (the aggregate +- the standard deviation, numpy's
        ``std``: divided by the number of runs).

    Returns:
      ``{"x", "value", "low", "high", "runs"}`` (arrays over the grid; ``runs``: how many
      runs cover each x) and ``joined`` (one less: whether some run covers the stretch
      from each x to the next; where none does, a line drawn through would be made up),
      or None when no run has a row.
    """
    if how not in AGGREGATES:
        raise ValueError(f"expected an aggregate in {AGGREGATES}, received {how!r}")
    if spread not in SPREADS:
        raise ValueError(f"expected a spread in {SPREADS}, received {spread!r}")
    runs = [(xs, ys) for xs, ys in runs if len(xs)]
    if not runs:
        return None
    grid = np.unique(np.concatenate([np.asarray(xs, dtype=float) for xs, _ in runs]))
    table = np.stack([on_grid(xs, ys, grid) for xs, ys in runs])  # runs x grid
    # Every grid x is some run's own row, so no column is all NaN.
    value = np.nanmedian(table, axis=0) if how == "median" else np.nanmean(table, axis=0)
    if spread == "iqr":
        low, high = np.nanpercentile(table, [25, 75], axis=0)
    elif spread == "minmax":
        low, high = np.nanmin(table, axis=0), np.nanmax(table, axis=0)
    else:
        std = np.nanstd(table, axis=0)
        low, high = value - std, value + std
    covered = ~np.isnan(table)
    joined = np.any(covered[:, :-1] & covered[:, 1:], axis=0)
    return {
        "x": grid,
        "value": value,
        "low": low,
        "high": high,
        "runs": covered.sum(axis=0),
        "joined": joined,
    }


def normalise_shares(parts: Mapping[str, Sequence[float]]) -> dict[str, np.ndarray]:
    """The parts of one stacked panel as shares that sum to exactly 1 at every row.

    Each row's parts (negative values read as 0) are kept as they are when they sum to at
    most 1, and ``other`` is the rest (time no part measured). Parts can also sum above 1:
    each ``time_*`` share is measured on its own and rounded, and an actor's unroll is
    counted in the interval its learner step consumed it in, though it may have started in
    the previous one. Such a row's parts are divided by their sum and ``other`` is 0.

    Returns:
      ``{part: shares, ..., "other": shares, "raw_sum": the parts' sum before}``.
    """
    names = list(parts)
    table = np.clip(np.array([parts[name] for name in names], dtype=float), 0.0, None)
    raw_sum = table.sum(axis=0)
    shares = table / np.where(raw_sum > 1.0, raw_sum, 1.0)
    other = np.clip(1.0 - shares.sum(axis=0), 0.0, None)
    return {**dict(zip(names, shares)), "other": other, "raw_sum": raw_sum}


def csv_path(output: str) -> str:
    """The CSV written beside a figure: ``output`` with ``.csv`` for its extension."""
    return os.path.splitext(output)[0] + ".csv"


def write_csv(path: str, header: Sequence[str], rows: Sequence[Sequence]) -> str:
    """Writes ``header`` and ``rows`` to ``path`` (floats to 12 significant digits, NaN as
    an empty cell); returns ``path``."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for row in rows:
            writer.writerow([_cell(value) for value in row])
    return path


def _cell(value):
    if isinstance(value, float | np.floating):
        value = float(value)
        return "" if np.isnan(value) else f"{value:.12g}"
    if isinstance(value, np.integer):
        return int(value)
    return value
