"""Built-in callbacks for ``tv.train(..., callbacks=[...])`` (docs/guide/extending.md).

::

    import tfagents_vtrace as tv

    tv.train("impala", env="CartPole-v1", logdir="runs/cb", total_steps=200_000,
             callbacks=[tv.callbacks.StopAtValue("eval_return", 475),
                        tv.callbacks.WandbLogger(project="cartpole")])

A callback is an object with any of ``on_row(row)``, ``on_checkpoint(step, path)`` and
``on_end(final_row)`` (a missing one is skipped), or a function, taken as ``on_row``. They
run in the learner's thread; ``on_row`` returning True ends the run at that row, checkpointed
and exported, its final row marked ``"stopped_by": "callback"`` and ``"stop_callback"`` (the
callback's name); the same call later resumes it and trains on to ``total_steps``. An
exception in a callback ends the run with :class:`CallbackError` (one line naming the
callback and its hook, chained from the exception) after a checkpoint. The protocol and the
driver's side: :mod:`tfagents_vtrace.runtime.callbacks`.

The stopping callbacks keep their state in the object: a resumed run's rows start them
afresh unless the same object is passed again.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from tfagents_vtrace.runtime.callbacks import CallbackError

__all__ = ["CallbackError", "StopAtValue", "StopWhenNoImprovement", "WandbLogger"]

MODES = ("max", "min")


def _check_metric(metric: Any) -> str:
    if not isinstance(metric, str) or not metric:
        raise ValueError(f"metric: expected a row field's name (a str), received {metric!r}")
    return metric


def _check_mode(mode: Any) -> str:
    if mode not in MODES:
        raise ValueError(f"mode: expected 'max' or 'min', received {mode!r}")
    return mode


def _check_number(name: str, value: Any, minimum: float | None = None) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or (minimum is not None and value < minimum)
    ):
        bound = f" >= {minimum:g}" if minimum is not None else ""
        raise ValueError(f"{name}: expected a finite number{bound}, received {value!r}")
    return float(value)


def _value(row: dict, metric: str) -> float | None:
    """The row's ``metric`` as a number, or None when the row does not carry it (missing,
    ``null`` for NaN, not a number)."""
    value = row.get(metric)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    return float(value) if math.isfinite(value) else None


class StopAtValue:
    """Stops the run at the first row whose ``metric`` reaches ``value``: ``>= value`` with
    ``mode="max"`` (a return), ``<= value`` with ``mode="min"`` (a loss). Rows without the
    metric (``eval_return`` is only on evaluation rows) are passed over.

    Unlike the ``stop_return`` setting, which also keeps and exports the weights of the
    evaluation that reached it, the run ends with its weights at the stop.

    Raises:
      ValueError: ``metric: ...``, ``value: ...`` or ``mode: ...``.
    """

    def __init__(self, metric: str, value: float, mode: str = "max"):
        self.metric, self.mode = _check_metric(metric), _check_mode(mode)
        self.value = _check_number("value", value)

    def __repr__(self) -> str:
        sign = ">=" if self.mode == "max" else "<="
        return f"StopAtValue({self.metric} {sign} {self.value:g})"

    def on_row(self, row: dict) -> bool:
        value = _value(row, self.metric)
        if value is None:
            return False
        return value >= self.value if self.mode == "max" else value <= self.value


class StopWhenNoImprovement:
    """Stops the run when ``metric`` has not improved for ``patience_rows`` rows that carry
    it: improving is beating the best value so far by more than ``min_delta`` (higher with
    ``mode="max"``, lower with ``mode="min"``). Rows without the metric do not count.

    Attributes: ``best`` (the best value so far, None before the first) and ``waited`` (rows
    carrying the metric since it improved).

    Raises:
      ValueError: ``metric: ...``, ``patience_rows: ...`` (an int >= 1), ``min_delta: ...``
        (a number >= 0) or ``mode: ...``.
    """

    def __init__(self, metric: str, patience_rows: int, min_delta: float = 0.0, mode: str = "max"):
        self.metric, self.mode = _check_metric(metric), _check_mode(mode)
        if (
            isinstance(patience_rows, bool)
            or not isinstance(patience_rows, int)
            or (patience_rows < 1)
        ):
            raise ValueError(f"patience_rows: expected an int >= 1, received {patience_rows!r}")
        self.patience_rows = patience_rows
        self.min_delta = _check_number("min_delta", min_delta, 0.0)
        self.best: float | None = None
        self.waited = 0

    def __repr__(self) -> str:
        return (
            f"StopWhenNoImprovement({self.metric}, patience_rows={self.patience_rows}, "
            f"min_delta={self.min_delta:g}, mode={self.mode!r})"
        )

    def on_row(self, row: dict) -> bool:
        value = _value(row, self.metric)
        if value is None:
            return False
        sign = 1.0 if self.mode == "max" else -1.0
        if self.best is None or sign * (value - self.best) > self.min_delta:
            self.best, self.waited = value, 0
            return False
        self.waited += 1
        return self.waited >= self.patience_rows


class WandbLogger:
    """Logs each metrics row to a Weights & Biases run, at ``step=row["step"]`` (the row's
    environment steps; its numeric fields, as TensorBoard gets them), and the final row to
    the run's summary; the W&B run finishes at ``on_end``.

    The W&B run starts at the first row or at the end (``wandb.init(project=project,
    **wandb_init_kwargs)``: ``name``, ``config``, ``mode="offline"``, ``dir``...); a
    run that ends with an exception leaves it to ``wandb``'s own exit handling. Needs the
    ``wandb`` package (``pip install 'tfagents_vtrace[wandb]'``), imported here.

    Raises:
      ImportError: one line naming the extra, without ``wandb``.
    """

    def __init__(self, project: str | None = None, **wandb_init_kwargs: Any):
        try:
            import wandb
        except ImportError as e:
            raise ImportError(
                "WandbLogger: needs the wandb package: pip install 'tfagents_vtrace[wandb]'"
            ) from e
        self._wandb = wandb
        self.init_kwargs = {"project": project, **wandb_init_kwargs}
        self.run = None

    def __repr__(self) -> str:
        return f"WandbLogger(project={self.init_kwargs['project']!r})"

    def _run(self):
        if self.run is None:
            self.run = self._wandb.init(**self.init_kwargs)
        return self.run

    @staticmethod
    def _numbers(row: dict) -> dict:
        return {
            key: value
            for key, value in row.items()
            if key != "step" and isinstance(value, int | float) and not isinstance(value, bool)
        }

    def on_row(self, row: dict) -> None:
        self._run().log(self._numbers(row), step=int(row["step"]))

    def on_end(self, final_row: dict) -> None:
        run = self._run()
        run.summary.update({f"final/{k}": v for k, v in self._numbers(final_row).items()})
        run.summary.update({"final/step": final_row.get("step")})
        run.finish()
        self.run = None
