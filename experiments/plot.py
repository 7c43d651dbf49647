"""Plot learning curves: ``python -m experiments.plot --logdir=DIR [--logdir=DIR2] --output=P``.

Reads each run directory's ``metrics.jsonl`` (DESIGN.md "Experiments contract": rows with
``step``, ``wall_time`` and ``episode_return``; rows written by the greedy evaluation carry
``eval_return``) and writes one PNG with two panels, return against environment steps and
against wall-clock seconds since process start, every run overlaid in its own colour: the
training return as a line, the greedy evaluations as larger markers. The curves are those
of Espeholt et al., "IMPALA", 2018, https://arxiv.org/abs/1802.01561 (Figures 4-6: return
against frames and against wall time). A missing or unreadable ``metrics.jsonl`` ends with
one line on stderr naming ``--logdir`` and exit code 2 (``experiments.cli``).
"""

from __future__ import annotations

import json
import math
import os

from absl import app, flags

from experiments.cli import flag_error_from, reports_flag_errors

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


def load_metrics(logdir: str) -> dict[str, list[tuple[float, float, float]]]:
    """Reads ``logdir/metrics.jsonl``.

    Returns:
      ``{"train": [(step, wall_time, episode_return), ...], "eval": [(step, wall_time,
      eval_return), ...]}`` in file order.

    Raises:
      FileNotFoundError: no ``metrics.jsonl`` in ``logdir``.
      ValueError: a line is not JSON, or the file holds no return at all.
    """
    path = os.path.join(logdir, "metrics.jsonl")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{logdir}: no metrics.jsonl at {path}")
    curves: dict[str, list[tuple[float, float, float]]] = {"train": [], "eval": []}
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: not a JSON object ({e})") from e
            step, wall = _number(row, "step"), _number(row, "wall_time")
            if step is None or wall is None:
                continue
            for kind, key in (("train", "episode_return"), ("eval", "eval_return")):
                value = _number(row, key)
                if value is not None:
                    curves[kind].append((step, wall, value))
    if not curves["train"] and not curves["eval"]:
        raise ValueError(f"{path}: no episode_return or eval_return rows to plot")
    return curves


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
    flags.mark_flag_as_required("logdir")


@reports_flag_errors
def main(argv: list[str]) -> None:
    del argv
    with flag_error_from("logdir", FileNotFoundError, ValueError):
        for logdir in FLAGS.logdir:  # one line naming --logdir, before matplotlib loads
            load_metrics(logdir)
    path = plot_runs(FLAGS.logdir, FLAGS.output, FLAGS.title)
    print(json.dumps({"output": path, "runs": len(FLAGS.logdir)}))


if __name__ == "__main__":
    define_flags()
    app.run(main)
