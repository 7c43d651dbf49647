"""Plot learning curves: ``tfv-plot --logdir=DIR [--logdir=DIR2] --output=PATH``.

Reads each run directory's ``metrics.jsonl`` (DESIGN.md "Experiments contract": rows with
``step``, ``wall_time`` and ``episode_return``; rows written by the greedy evaluation carry
``eval_return``) and writes one PNG with two panels, return against environment steps and
against wall-clock seconds since process start, every run overlaid in its own colour: the
training return as a line, the greedy evaluations as larger markers. The curves are those
of Espeholt et al., "IMPALA", 2018, https://arxiv.org/abs/1802.01561 (Figures 4-6: return
against frames and against wall time). A missing or unreadable ``metrics.jsonl`` ends with
one line on stderr naming ``--logdir`` and exit code 2 (``commands.cli``).

``--what=time`` draws where the wall time went instead: for each run (one row of panels)
the ``time_*`` fractions of its metrics rows against environment steps, stacked, in two
panels: the learner thread (``learner``, ``publish``, ``eval``, ``wait``) and the actors
(``env``, ``inference``, ``weights``; an inline actor's shares are of the learner thread's
time, so both stacks then add up to at most 1).
"""

from __future__ import annotations

import json
import math
import os
import sys

from absl import flags

from tfagents_vtrace.commands.cli import flag_error_from, reports_flag_errors, run

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


def _metrics_path(logdir: str) -> str:
    """``logdir/metrics.jsonl``; raises ``FileNotFoundError`` when it is missing."""
    path = os.path.join(logdir, "metrics.jsonl")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{logdir}: no metrics.jsonl at {path}")
    return path


def _rows(path: str):
    """Yields the row of each non-empty line of ``path``; raises ``ValueError`` at a line
    that is not JSON."""
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: not a JSON object ({e})") from e
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
        for kind, key in (("train", "episode_return"), ("eval", "eval_return")):
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


def plot_runs(logdirs: list[str], output: str, title: str | None = None) -> str:
    """Writes the two-panel PNG of ``logdirs``' curves to ``output``; returns ``output``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    runs = [load_metrics(d) for d in logdirs]  # fail before drawing anything
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    handles = []
    for i, (label, curves) in enumerate(zip(_labels(logdirs), runs)):
        color = colors[i % len(colors)]
        n_eval = len(curves["eval"])
        ms = 6 if n_eval <= 25 else 3.5  # many evaluations: smaller markers
        for ax, x in zip(axes, (0, 1)):
            if curves["train"]:
                xs = [r[x] for r in curves["train"]]
                ax.plot(xs, [r[2] for r in curves["train"]], color=color, lw=1.6)
            if curves["eval"]:
                xs = [r[x] for r in curves["eval"]]
                ys = [r[2] for r in curves["eval"]]
                ax.plot(xs, ys, color=color, ls=":", lw=0.8, alpha=0.7)
                ax.plot(xs, ys, ls="", marker="D", ms=ms, color=color, mec="black", mew=0.5)
        handles.append(Line2D([], [], color=color, lw=1.6, label=label))
    handles.append(
        Line2D([], [], ls="", marker="D", color="white", mec="black", label="greedy evaluation")
    )
    fig.legend(
        handles=handles, loc="lower center", ncol=min(len(handles), 5), fontsize=8, frameon=False
    )
    axes[0].set_xlabel("environment steps")
    axes[1].set_xlabel("wall time since process start (s)")
    axes[0].set_ylabel("episode return")
    axes[0].set_title("return vs steps")
    axes[1].set_title("return vs wall time")
    for ax in axes:
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    rows = -(-len(handles) // 5)
    fig.tight_layout(rect=(0, 0.05 * rows + 0.02, 1, 1))
    return _save(fig, output)


def plot_time(logdirs: list[str], output: str, title: str | None = None) -> str:
    """Writes the stacked time fractions of ``logdirs`` (see module docstring) to
    ``output``; returns ``output``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [load_time_fractions(d) for d in logdirs]  # fail before drawing anything
    fig, axes = plt.subplots(
        len(runs), 2, figsize=(12, 3.2 * len(runs) + 0.6), sharex="row", squeeze=False
    )
    colors = dict(zip(TIME_PARTS, plt.get_cmap("tab10").colors))
    for row, (label, series) in zip(axes, zip(_labels(logdirs), runs)):
        for ax, (panel, parts) in zip(row, TIME_PANELS.items()):
            ax.stackplot(
                series["step"],
                *(series[part] for part in parts),
                labels=parts,
                colors=[colors[part] for part in parts],
                alpha=0.85,
            )
            ax.set_ylim(0, 1)
            ax.set_title(f"{label}: {panel}")
            ax.set_ylabel("share of wall time")
            ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("environment steps")
    for ax in axes[0]:
        ax.legend(loc="upper right", fontsize=8, framealpha=0.8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
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
    flags.DEFINE_multi_string("logdir", None, "Run directory holding metrics.jsonl (repeatable).")
    flags.DEFINE_string("output", "curves.png", "Output PNG path.")
    flags.DEFINE_string("title", None, "Optional figure title.")
    flags.DEFINE_enum(
        "what",
        "returns",
        ["returns", "time"],
        "returns: return vs steps and wall time; time: where the wall time went (stacked "
        "time_* fractions per run).",
    )
    flags.mark_flag_as_required("logdir")


@reports_flag_errors
def main(argv: list[str]) -> None:
    del argv
    load, draw = {
        "returns": (load_metrics, plot_runs),
        "time": (load_time_fractions, plot_time),
    }[FLAGS.what]
    with flag_error_from("logdir", FileNotFoundError, ValueError):
        for logdir in FLAGS.logdir:  # one line naming --logdir, before matplotlib loads
            load(logdir)
    path = draw(FLAGS.logdir, FLAGS.output, FLAGS.title)
    print(json.dumps({"output": path, "runs": len(FLAGS.logdir)}))


def entry_point() -> None:
    """The ``tfv-plot`` command (``python -m experiments.plot`` in a clone)."""
    define_flags()
    run(main, command=sys.modules[__name__])


if __name__ == "__main__":
    entry_point()
