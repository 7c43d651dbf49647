"""Progress reporting: a tqdm bar on a TTY, plain log lines otherwise (steps/s, returns, ETA,
and the bottleneck with its share of time when the row names one).

Progress is for the person watching: when its stream goes away (a pipe whose reader ended,
``tfv-train ... 2>&1 | head``; a terminal that closed), writing raises ``BrokenPipeError`` or
another ``OSError``, and progress goes quiet instead of ending the run (the metrics file
keeps every row)."""

from __future__ import annotations

import contextlib
import sys
import time


class Progress:
    """Shows training progress toward ``total_steps`` (starting at ``start_step``)."""

    def __init__(self, total_steps: int, start_step: int = 0, enabled: bool = True):
        self.total, self.start = int(total_steps), int(start_step)
        self.t0 = time.monotonic()
        self._bar = None
        self.enabled = enabled
        if enabled and _isatty():
            from tqdm import tqdm

            self._bar = tqdm(
                total=self.total, initial=self.start, unit="step", dynamic_ncols=True, smoothing=0.1
            )
        self._last = self.start

    def update(self, step: int, returns) -> None:
        if self._bar is not None:
            with self._quiet_on_error():
                self._bar.update(step - self._last)
        self._last = step

    @contextlib.contextmanager
    def _quiet_on_error(self):
        """Inside, a stream that cannot be written (closed pipe or terminal) turns progress
        off for the rest of the run."""
        try:
            yield
        except (OSError, ValueError):  # ValueError: a closed file object
            self.enabled, self._bar = False, None

    def eta(self, step: int) -> float | None:
        done = step - self.start
        if done <= 0:
            return None
        return (time.monotonic() - self.t0) / done * max(self.total - step, 0)

    def log(self, row: dict) -> None:
        """Shows a metrics row: bar postfix on a TTY, one stderr line otherwise (also once
        the bar is closed, so a run's last row is always shown)."""
        if not self.enabled:
            return
        ret = row.get("episode_return")
        parts = {
            "sps": f"{row.get('sps', 0):.0f}",
            "return": "-" if ret is None else f"{ret:.1f}",
        }
        if row.get("policy_lag_p50") is not None:  # actor-learner runs
            parts["lag"] = f"{row['policy_lag_p50']:.0f}"
        if "eval_return" in row:
            parts["eval"] = f"{row['eval_return']:.1f}"
        slowest = _bottleneck(row)
        if self._bar is not None:
            if slowest:
                parts["bottleneck"] = slowest
            with self._quiet_on_error():
                self._bar.set_postfix(parts, refresh=False)
            return
        eta = self.eta(row["step"])
        eta_s = "-" if eta is None else f"{eta:.0f}s"
        text = " ".join(f"{k}={v}" for k, v in parts.items())
        line = f"step={row['step']} {text} wall={row['wall_time']:.1f}s eta={eta_s}"
        if slowest:
            line += f" bottleneck: {slowest}"
        with self._quiet_on_error():
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            with self._quiet_on_error():
                self._bar.close()
            self._bar = None


def _bottleneck(row: dict) -> str:
    """``"learner 78%"``: the row's ``bottleneck`` and its ``time_<part>`` share ("" if none)."""
    part = row.get("bottleneck")
    if part is None:
        return ""
    return f"{part} {100 * row.get(f'time_{part}', 0.0):.0f}%"


def _isatty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
