"""Plot learning curves: ``tfv-plot --logdir=DIR [--logdir=DIR2 ...] --output=PATH``.

Each ``--logdir`` is a run directory (holding ``metrics.jsonl``), a parent directory (every
run directory below it), or a glob (``'runs/cartpole/seed_*'``, quoted). Runs whose
``config.json`` is the same apart from the seed form one group, drawn as one curve: the
runs are interpolated onto a common grid of steps (or seconds) and reduced to their median
(``--aggregate=mean``: mean) with a shaded band (``--spread``: interquartile range, min-max
or +-1 standard deviation), after a trailing moving average over ``--smooth`` logged rows of
each run (:mod:`tfagents_vtrace.commands.plotting`). A run counts only between its first and last
row; the line is thinner where fewer than all of a group's runs cover it. ``--label=NAME``
(one per ``--logdir``) names the curves instead, and groups runs by label: every run
found under one ``--logdir`` goes into its label's curve.

Reads ``metrics.jsonl`` (docs/design.md, "The run directory": rows with ``step``,
``wall_time`` and ``episode_return``; rows written by the greedy evaluation carry
``eval_return``) and writes one PNG with two panels, return against environment steps and
against wall-clock seconds since process start: the training return as a solid line, the
greedy evaluations as a dashed line with markers. The curves are those of Espeholt et al.,
"IMPALA", 2018, https://arxiv.org/abs/1802.01561 (Figures 4-6: return against frames and
against wall time). The numbers behind every curve go to a CSV beside the PNG (``--csv``):
one row per curve point, ``group, metric, x_axis, x``, the aggregate, the band's low and
high, ``runs`` (the runs covering that x) and ``group_runs``.

``--what=time`` draws where the wall time went instead: for each run (one row of panels)
the ``time_*`` fractions of its metrics rows against environment steps, stacked, in two
panels: the learner thread (``learner``, ``publish``, ``eval``, ``wait``) and the actors
(``env``, ``inference``, ``weights``). Each panel's stack sums to exactly 1 at every row:
an ``other`` share fills what the parts leave (an inline actor's own parts, for one, are
shares of the learner thread's time and missing from its panel), and parts measured above
1 in total are scaled down to sum to 1 (:func:`tfagents_vtrace.commands.plotting.normalise_shares`).
Its CSV holds the drawn shares and each panel's raw sum.

Bad flag values (a ``--logdir`` without ``metrics.jsonl``, a negative ``--smooth``, an
unknown ``--aggregate``) end with one line on stderr naming the flag and exit code 2
(``commands.cli``).
"""

from __future__ import annotations

import glob
import json
import math
import os
import sys

from absl import flags

from tfagents_vtrace.commands import plotting
from tfagents_vtrace.commands.cli import (
    FlagError,
    check_int,
    flag_error_from,
    reports_flag_errors,
    run,
)

FLAGS = flags.FLAGS


def _number(row: dict, key: str) -> float | None:
    """``row[key]`` as a finite float, or None when absent / null / NaN."""
    value = row.get(key)
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


TIME_PANELS = {
    "learner thread": ("learner", "publish", "eval", "wait"),
    "actors": ("env", "inference", "weights"),
}
"""The ``time_<part>`` fields stacked in each panel of ``--what=time``."""
TIME_PARTS = tuple(part for parts in TIME_PANELS.values() for part in parts)
METRICS = {"train": "episode_return", "eval": "eval_return"}
"""The metrics.jsonl field of each curve of ``--what=returns``."""
X_AXES = {"step": "environment steps", "wall_time": "wall time since process start (s)"}
"""The x axes of ``--what=returns`` (metrics.jsonl field: axis label, with its unit)."""
_GLOB = set("*?[")


def _metrics_path(logdir: str) -> str:
    """``logdir/metrics.jsonl``; raises ``FileNotFoundError`` when it is missing."""
    path = os.path.join(logdir, "metrics.jsonl")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{logdir}: no metrics.jsonl at {path}")
    return path


def find_runs(logdir: str) -> list[str]:
    """The run directories ``logdir`` names: itself when it holds ``metrics.jsonl``, else
    every directory below it that does (sorted, not looking inside a run); a glob: those of
    every match.

    Raises:
      FileNotFoundError: no run directory there (the message names ``logdir/metrics.jsonl``),
        or a glob matching nothing.
    """
    if _GLOB & set(logdir) and not os.path.exists(logdir):
        matches = sorted(glob.glob(logdir))
        if not matches:
            raise FileNotFoundError(f"{logdir}: the pattern matches no directory")
        runs = [r for match in matches if os.path.isdir(match) for r in _runs_below(match)]
        if not runs:
            raise FileNotFoundError(f"{logdir}: no metrics.jsonl in the directories it matches")
        return runs
    runs = _runs_below(logdir)
    if not runs:
        _metrics_path(logdir)  # raises, naming the file expected
    return runs


def _runs_below(directory: str) -> list[str]:
    if os.path.isfile(os.path.join(directory, "metrics.jsonl")):
        return [directory]
    runs = []
    for parent, subdirs, files in os.walk(directory):
        if "metrics.jsonl" in files and parent != directory:
            runs.append(parent)
            subdirs.clear()  # a run's own subdirectories are not runs
        subdirs.sort()
    return sorted(runs)


def _config_key(run_dir: str) -> str:
    """What the runs of one group share: ``config.json`` without the seed (and without the
    fields a resume may change); a run without a readable config is a group of its own."""
    try:
        with open(os.path.join(run_dir, "config.json")) as f:
            config = json.load(f)
    except (OSError, ValueError):
        config = None
    if not isinstance(config, dict):
        return "run:" + os.path.realpath(run_dir)
    config = {key: value for key, value in config.items() if key != "resume_fixed"}
    if isinstance(config.get("run_config"), dict):
        config["run_config"] = {k: v for k, v in config["run_config"].items() if k != "seed"}
    return "config:" + json.dumps(config, sort_keys=True)


def group_runs(logdirs: list[str], labels: list[str] | None = None) -> list[tuple[str, list[str]]]:
    """``[(label, run directories), ...]``, one entry per curve, in the order first seen.

    Without ``labels``, runs with the same config apart from the seed form a group, named
    after the directory holding them all (a single run: its directory's name). With
    ``labels`` (one per entry of ``logdirs``), the runs of every ``logdirs`` entry given
    the same label form one group. A run found twice is counted once.

    Raises:
      FileNotFoundError: as :func:`find_runs`.
      ValueError: ``labels`` is not one per ``logdirs`` entry.
    """
    if labels and len(labels) != len(logdirs):
        raise ValueError(f"expected one per --logdir ({len(logdirs)}), received {len(labels)}")
    groups: dict[str, list[str]] = {}
    seen = set()
    for i, logdir in enumerate(logdirs):
        for run_dir in find_runs(logdir):
            if os.path.realpath(run_dir) in seen:
                continue
            seen.add(os.path.realpath(run_dir))
            key = "label:" + labels[i] if labels else _config_key(run_dir)
            groups.setdefault(key, []).append(run_dir)
    if labels:
        return [(key[len("label:") :], runs) for key, runs in groups.items()]
    places = [
        os.path.commonpath([os.path.abspath(r) for r in runs]) if len(runs) > 1 else runs[0]
        for runs in groups.values()
    ]
    names = _labels(places)
    for name in {n for n in names if names.count(n) > 1}:  # same place, other configs
        for i in [i for i, n in enumerate(names) if n == name]:
            runs = list(groups.values())[i]
            names[i] = f"{name} [{', '.join(os.path.basename(os.path.normpath(r)) for r in runs)}]"
    return list(zip(names, groups.values()))


def _rows(path: str):
    """Yields the row of each non-empty line of ``path``; raises ``ValueError`` at a line
    that is not a JSON object."""
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: not a JSON object ({e})") from e
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{lineno}: not a JSON object ({line.strip()[:80]})")
            yield row


def load_metrics(logdir: str) -> dict[str, list[tuple[float, float, float]]]:
    """Reads ``logdir/metrics.jsonl``.

    Returns:
      ``{"train": [(step, wall_time, episode_return), ...], "eval": [(step, wall_time,
      eval_return), ...]}`` in file order; an evaluation's step is its ``eval_step`` when
      the row has one (``--eval_background``: the weights' step, behind the row's).

    Raises:
      FileNotFoundError: no ``metrics.jsonl`` in ``logdir``.
      ValueError: a line is not JSON, or the file holds no return at all.
    """
    curves: dict[str, list[tuple[float, float, float]]] = {"train": [], "eval": []}
    path = _metrics_path(logdir)
    for row in _rows(path):
        step, wall = _number(row, "step"), _number(row, "wall_time")
        if step is None or wall is None:
            continue
        for kind, key in METRICS.items():
            value = _number(row, key)
            if value is not None:
                at = step  # a background evaluation: the step of the weights it evaluated
                if kind == "eval" and _number(row, "eval_step") is not None:
                    at = _number(row, "eval_step")
                curves[kind].append((at, wall, value))
    if not curves["train"] and not curves["eval"]:
        raise ValueError(f"{path}: no episode_return or eval_return rows to plot")
    return curves


def load_time_fractions(logdir: str) -> dict[str, list[float]]:
    """Reads the ``time_*`` fractions of ``logdir/metrics.jsonl`` (rows carrying them all).

    Returns:
      ``{"step": [...], "<part>": [...] for every part of TIME_PARTS}`` in file order
      (a null fraction reads as 0).

    Raises:
      FileNotFoundError: no ``metrics.jsonl`` in ``logdir``.
      ValueError: a line is not JSON, or no row carries the time fractions.
    """
    series: dict[str, list[float]] = {key: [] for key in ("step", *TIME_PARTS)}
    path = _metrics_path(logdir)
    for row in _rows(path):
        step = _number(row, "step")
        if step is None or any(f"time_{part}" not in row for part in TIME_PARTS):
            continue
        series["step"].append(step)
        for part in TIME_PARTS:
            series[part].append(_number(row, f"time_{part}") or 0.0)
    if not series["step"]:
        raise ValueError(f"{path}: no rows with time_* fractions to plot")
    return series


def _labels(logdirs: list[str]) -> list[str]:
    """Run directory names, with the parent added where two names collide."""
    names = [os.path.basename(os.path.normpath(d)) for d in logdirs]
    if len(set(names)) == len(names):
        return names
    return [os.path.join(*os.path.normpath(d).split(os.sep)[-2:]) for d in logdirs]


def aggregate_returns(
    runs: list[dict[str, list[tuple[float, float, float]]]],
    aggregate: str = "median",
    spread: str = "iqr",
    smooth: int = 0,
) -> dict[tuple[str, str], dict]:
    """The curves of one group: ``{(kind, x_axis): plotting.aggregate(...)}`` for ``kind``
    in ``train`` / ``eval`` and ``x_axis`` in ``step`` / ``wall_time`` (a kind no run
    logged is left out); each run's returns are smoothed over ``smooth`` rows first."""
    curves = {}
    for kind in METRICS:
        for column, axis in enumerate(X_AXES):
            per_run = [
                ([r[column] for r in run[kind]], plotting.smooth([r[2] for r in run[kind]], smooth))
                for run in runs
            ]
            curve = plotting.aggregate(per_run, aggregate, spread)
            if curve is not None:
                curves[(kind, axis)] = curve
    return curves


def returns_csv_header(aggregate: str, spread: str) -> list[str]:
    """The columns of ``--what=returns``' CSV."""
    return [
        "group",
        "metric",
        "x_axis",
        "x",
        aggregate,
        f"{spread}_low",
        f"{spread}_high",
        "runs",
        "group_runs",
    ]


def plot_runs(
    logdirs: list[str],
    output: str,
    title: str | None = None,
    *,
    labels: list[str] | None = None,
    aggregate: str = "median",
    spread: str = "iqr",
    smooth: int = 0,
    csv: str | None = None,
) -> str:
    """Writes the two-panel PNG of ``logdirs``' curves to ``output`` (module docstring) and
    their numbers to ``csv`` (None: beside ``output``, :func:`plotting.csv_path`; ``""``:
    none); returns ``output``."""
    groups = group_runs(logdirs, labels)  # fail before drawing anything
    data = []
    for label, runs in groups:
        metrics = [load_metrics(run_dir) for run_dir in runs]
        data.append((label, len(runs), aggregate_returns(metrics, aggregate, spread, smooth)))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    handles, partial, rows = [], False, []
    for i, (label, n_runs, curves) in enumerate(data):
        color = colors[i % len(colors)]
        for (kind, axis), curve in curves.items():
            ax = axes[list(X_AXES).index(axis)]
            partial |= _draw_curve(ax, curve, n_runs, color, kind)
            columns = zip(*(curve[key] for key in ("x", "value", "low", "high", "runs")))
            rows += [(label, METRICS[kind], axis, *cells, n_runs) for cells in columns]
        runs_text = f"{n_runs} run{'s' if n_runs > 1 else ''}"
        handles.append(Line2D([], [], color=color, lw=2, label=f"{label} ({runs_text})"))
    handles.append(Line2D([], [], color="black", lw=2, label="training return"))
    handles.append(
        Line2D(
            [], [], color="black", ls="--", marker="D", ms=5, mfc="white", label="greedy evaluation"
        )
    )
    if max(n for _, n, _ in data) > 1:
        handles.append(Line2D([], [], color="grey", lw=2, label=f"line: {aggregate} over runs"))
        handles.append(
            Patch(color="grey", alpha=0.3, label=f"band: {plotting.SPREAD_NAMES[spread]}")
        )
    if partial:
        handles.append(Line2D([], [], color="grey", lw=0.9, label="thin: not all runs cover it"))
    if smooth > 1:
        handles.append(Line2D([], [], ls="", label=f"smoothed over {smooth} logged rows"))
    fig.legend(
        handles=handles, loc="lower center", ncol=min(len(handles), 4), fontsize=8, frameon=False
    )
    for ax, axis_label in zip(axes, X_AXES.values()):
        ax.set_xlabel(axis_label)
        ax.set_title(f"return vs {axis_label.split(' (')[0]}")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("episode return (undiscounted sum of rewards)")
    if title:
        fig.suptitle(title)
    legend_rows = -(-len(handles) // 4)
    fig.tight_layout(rect=(0, 0.045 * legend_rows + 0.03, 1, 1))
    if csv is None:
        csv = plotting.csv_path(output)
    if csv:
        plotting.write_csv(csv, returns_csv_header(aggregate, spread), rows)
    return _save(fig, output)


def _draw_curve(ax, curve: dict, n_runs: int, color, kind: str) -> bool:
    """Draws one aggregated curve on ``ax``: the band, a thin line through every point and
    a full one where all ``n_runs`` runs count, both broken where no run covers the stretch
    between two points. Returns whether some point has fewer than ``n_runs`` runs."""
    import numpy as np

    full = curve["runs"] == n_runs
    # A gap no run covers (one run ended before the next began) is left blank.
    gaps = np.flatnonzero(~curve["joined"]) + 1
    x = np.insert(curve["x"], gaps, (curve["x"][gaps - 1] + curve["x"][gaps]) / 2)
    value, low, high = (np.insert(curve[k], gaps, np.nan) for k in ("value", "low", "high"))
    full_value = np.where(np.insert(full, gaps, False), value, np.nan)
    dashes = "--" if kind == "eval" else "-"
    if n_runs > 1:
        alpha = 0.15 if kind == "eval" else 0.25
        ax.fill_between(x, low, high, color=color, alpha=alpha, lw=0)
    ax.plot(x, value, color=color, ls=dashes, lw=0.9, alpha=0.8)
    ax.plot(x, full_value, color=color, ls=dashes, lw=2)
    if kind == "eval":
        ms = 5 if len(curve["x"]) <= 40 else 3
        for where, size in ((full, ms), (~full, ms * 0.6)):
            ax.plot(
                curve["x"][where],
                curve["value"][where],
                ls="",
                marker="D",
                ms=size,
                color=color,
                mfc="white",
                mew=1,
            )
    return not full.all()


def time_shares(series: dict[str, list[float]], smooth: int = 0) -> dict[str, dict]:
    """``{panel: plotting.normalise_shares(...)}`` of one run's time fractions (each part
    smoothed over ``smooth`` rows first)."""
    return {
        panel: plotting.normalise_shares(
            {part: plotting.smooth(series[part], smooth) for part in parts}
        )
        for panel, parts in TIME_PANELS.items()
    }


def time_csv_header() -> list[str]:
    """The columns of ``--what=time``'s CSV: each panel's shares, other and raw sum."""
    header = ["run", "step"]
    for panel, parts in TIME_PANELS.items():
        tag = panel.replace(" ", "_")
        header += [*parts, f"other_{tag}", f"raw_sum_{tag}"]
    return header


def plot_time(
    logdirs: list[str],
    output: str,
    title: str | None = None,
    *,
    smooth: int = 0,
    csv: str | None = None,
) -> str:
    """Writes the stacked time shares of every run of ``logdirs`` (module docstring) to
    ``output`` and their numbers to ``csv`` (as :func:`plot_runs`); returns ``output``."""
    run_dirs = [r for logdir in logdirs for r in find_runs(logdir)]
    runs = [load_time_fractions(d) for d in run_dirs]  # fail before drawing anything
    shares = [time_shares(series, smooth) for series in runs]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        len(runs), 2, figsize=(12, 3.2 * len(runs) + 0.6), sharex="row", squeeze=False
    )
    colors = dict(zip((*TIME_PARTS, "other"), plt.get_cmap("tab10").colors))
    colors["other"] = "lightgrey"
    units = {"learner thread": "the learner thread's", "actors": "the actors'"}
    rows = []
    for row, label, series, panels in zip(axes, _labels(run_dirs), runs, shares):
        for ax, (panel, parts) in zip(row, TIME_PANELS.items()):
            stacked = (*parts, "other")
            ax.stackplot(
                series["step"],
                *(panels[panel][part] for part in stacked),
                labels=(*parts, "other (not measured)"),
                colors=[colors[part] for part in stacked],
                alpha=0.85,
            )
            ax.set_ylim(0, 1)
            if len(series["step"]) > 1:
                ax.set_xlim(series["step"][0], series["step"][-1])
            ax.set_title(f"{label}: {panel}")
            ax.set_ylabel(f"share of {units[panel]}\nwall time")
            ax.grid(alpha=0.3)
        for i, step in enumerate(series["step"]):
            cells = [label, step]
            for panel, parts in TIME_PANELS.items():
                cells += [panels[panel][key][i] for key in (*parts, "other", "raw_sum")]
            rows.append(cells)
    for ax in axes[-1]:
        ax.set_xlabel("environment steps")
    for ax in axes[0]:
        ax.legend(loc="upper right", fontsize=8, framealpha=0.8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if csv is None:
        csv = plotting.csv_path(output)
    if csv:
        plotting.write_csv(csv, time_csv_header(), rows)
    return _save(fig, output)


def _save(fig, output: str) -> str:
    import matplotlib.pyplot as plt

    out_dir = os.path.dirname(os.path.abspath(output))
    os.makedirs(out_dir, exist_ok=True)
    fig.savefig(output, dpi=110)
    plt.close(fig)
    return output


def define_flags() -> None:
    """Declares the flags of this entry point."""
    flags.DEFINE_multi_string(
        "logdir",
        None,
        "Run directory holding metrics.jsonl, a directory of runs, or a quoted glob (repeatable).",
    )
    flags.DEFINE_string("output", "curves.png", "Output PNG path.")
    flags.DEFINE_string(
        "csv",
        None,
        "Where the numbers behind the figure go (default: beside --output, with .csv; "
        "--csv= writes none).",
    )
    flags.DEFINE_string("title", None, "Optional figure title.")
    flags.DEFINE_enum(
        "what",
        "returns",
        ["returns", "time"],
        "returns: return vs steps and wall time; time: where the wall time went (stacked "
        "time_* shares per run, summing to 1).",
    )
    flags.DEFINE_enum(
        "aggregate",
        "median",
        list(plotting.AGGREGATES),
        "The line drawn for a group of runs (seeds).",
    )
    flags.DEFINE_enum(
        "spread",
        "iqr",
        list(plotting.SPREADS),
        "The band around a group's line: interquartile range, min-max, or the line +-1 "
        "standard deviation.",
    )
    flags.DEFINE_integer(
        "smooth",
        0,
        "Trailing moving average over this many logged rows of each run, before "
        "aggregating (0 or 1: none).",
    )
    flags.DEFINE_multi_string(
        "label",
        None,
        "Curve name for the runs of the --logdir in the same position (one per --logdir; "
        "runs given the same label form one curve). Default: runs with the same config "
        "apart from the seed form a curve.",
    )
    flags.mark_flag_as_required("logdir")


@reports_flag_errors
def main(argv: list[str]) -> None:
    del argv
    check_int("smooth", FLAGS.smooth, 0)
    labels = FLAGS.label
    if labels and len(labels) != len(FLAGS.logdir):
        n, m = len(FLAGS.logdir), len(labels)
        raise FlagError("label", f"expected one per --logdir ({n}), received {m}")
    load = {"returns": load_metrics, "time": load_time_fractions}[FLAGS.what]
    with flag_error_from("logdir", FileNotFoundError, ValueError):
        groups = group_runs(FLAGS.logdir, labels)
        for _, runs in groups:  # one line naming --logdir, before matplotlib loads
            for run_dir in runs:
                load(run_dir)
    if FLAGS.what == "returns":
        path = plot_runs(
            FLAGS.logdir,
            FLAGS.output,
            FLAGS.title,
            labels=labels,
            aggregate=FLAGS.aggregate,
            spread=FLAGS.spread,
            smooth=FLAGS.smooth,
            csv=FLAGS.csv,
        )
    else:
        path = plot_time(
            FLAGS.logdir, FLAGS.output, FLAGS.title, smooth=FLAGS.smooth, csv=FLAGS.csv
        )
    csv = plotting.csv_path(path) if FLAGS.csv is None else FLAGS.csv or None
    runs = sum(len(r) for _, r in groups)
    curves = len(groups) if FLAGS.what == "returns" else runs  # time: one row of panels a run
    print(json.dumps({"output": path, "csv": csv, "runs": runs, "curves": curves}))


def entry_point() -> None:
    """The ``tfv-plot`` command (``python -m experiments.plot`` in a clone)."""
    define_flags()
    run(main, command=sys.modules[__name__])


if __name__ == "__main__":
    entry_point()
