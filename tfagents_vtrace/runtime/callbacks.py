"""The driver's side of a run's callbacks: the hooks a user passes to ``tv.train(...,
callbacks=[...])``, called in the driver's (the learner's) thread (docs/guide/extending.md).

A callback is any object with some of these methods (a missing one is skipped), or a plain
function, which is taken as its ``on_row``:

- ``on_row(row)``: after each metrics row is written, with the row as ``metrics.jsonl``
  holds it (a new dict per call: strict JSON, ``None`` for NaN). Returning a true value
  (``True``) stops the run at that row: the driver ends it as at ``total_steps`` (an
  evaluation if the row was not one, a checkpoint, the export, ``final.json``), the final
  row marked ``"stopped_by": "callback"`` and ``"stop_callback": NAME`` when that was
  before ``total_steps`` (a stop at the last rows is the run's ordinary end). The same call
  later resumes that run and trains on to ``total_steps`` (as a run stopped by a signal).
- ``on_checkpoint(step, path)``: after each checkpoint of a run going on or ending (step 0
  of a new run, the timed ones, the final one), with its step and path prefix
  (``path + ".index"`` exists; ``tf.train.load_checkpoint(path)`` reads it). The checkpoint
  an error or a stop signal writes is named by the exception instead.
- ``on_end(final_row)``: once, with the final row the run returns (also the
  ``already_finished`` row of a run that had ended).

An exception raised in a hook ends the run: it is raised as :class:`CallbackError`, one line
naming the callback and the hook, chained from the original (``__cause__``), after a
checkpoint of the newest state (the driver's failure path: a crash loses nothing).

:class:`CallbackList` is what the driver holds; ``runtime/`` never imports the built-in
callbacks (``tfagents_vtrace/callbacks.py``), which are plain objects of this protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

HOOKS = ("on_row", "on_checkpoint", "on_end")


class CallbackError(RuntimeError):
    """A callback's hook raised ``error``; the run ended after a checkpoint.

    Attributes: ``callback`` (its name), ``hook`` (``"on_row"``...), ``error`` (what it
    raised, also ``__cause__``) and ``checkpoint`` (the path of the checkpoint written after
    it, once the driver wrote one; else None).
    """

    def __init__(self, callback: str, hook: str, error: BaseException):
        super().__init__(callback, hook, error)
        self.callback, self.hook, self.error = callback, hook, error
        self.checkpoint: str | None = None

    def __str__(self) -> str:
        text = str(self.error).strip().splitlines()
        what = type(self.error).__name__ + (f": {text[0]}" if text else "")
        line = f"callbacks: {self.callback}.{self.hook} raised {what}"
        if self.checkpoint is not None:
            line += f"; checkpoint {self.checkpoint} holds the newest state"
        return line


def callback_name(callback: Any) -> str:
    """How messages and ``final.json`` name ``callback``: a function's qualified name, an
    object's ``repr`` when its class defines one, else its class's name."""
    if hasattr(callback, "__qualname__") and not isinstance(callback, type):
        return callback.__qualname__
    if type(callback).__repr__ is not object.__repr__:
        return repr(callback)
    return type(callback).__qualname__


class CallbackList:
    """The hooks of ``callbacks`` (module docstring), in the given order.

    Raises:
      ValueError: ``callbacks: ...`` for an item that is neither callable nor has a hook, or
        a ``callbacks`` that is not a list (a single callback is wrapped in one).
    """

    def __init__(self, callbacks: Iterable | Any = None):
        if isinstance(callbacks, CallbackList):
            self.hooks = {h: list(methods) for h, methods in callbacks.hooks.items()}
            return
        if callbacks is None:
            callbacks = []
        elif callable(callbacks) or any(hasattr(callbacks, h) for h in HOOKS):
            callbacks = [callbacks]
        elif isinstance(callbacks, str | bytes | dict) or not isinstance(callbacks, Iterable):
            raise ValueError(
                f"callbacks: expected a list of callbacks (objects with on_row, on_checkpoint "
                f"or on_end, or functions), received {callbacks!r}"
            )
        self.hooks: dict[str, list[tuple[str, Callable]]] = {h: [] for h in HOOKS}
        for callback in callbacks:
            found = {h: getattr(callback, h) for h in HOOKS if callable(getattr(callback, h, None))}
            if not found:
                if not callable(callback):
                    raise ValueError(
                        f"callbacks: {callback!r} has none of {', '.join(HOOKS)} and is not "
                        "a function"
                    )
                found = {"on_row": callback}
            name = callback_name(callback)
            for hook, method in found.items():
                self.hooks[hook].append((name, method))

    def __bool__(self) -> bool:
        return any(self.hooks.values())

    def _call(self, hook: str, *args) -> str | None:
        """Calls every ``hook`` (a dict argument copied for each, so that one callback's
        changes do not reach the next); the name of the first that returned a true value,
        else None."""
        stop = None
        for name, method in self.hooks[hook]:
            try:
                result = method(*(dict(a) if isinstance(a, dict) else a for a in args))
            except Exception as error:
                raise CallbackError(name, hook, error) from error
            if result and stop is None:
                stop = name
        return stop

    def row(self, row: dict) -> str | None:
        """``on_row(row)`` of each callback (each sees the row, even after one asked to
        stop); the name of the first that returned ``True``, else None."""
        if not self.hooks["on_row"]:
            return None
        return self._call("on_row", row)

    def checkpoint(self, step: int, path: str) -> None:
        self._call("on_checkpoint", int(step), path)

    def end(self, final: dict) -> None:
        self._call("on_end", final)
