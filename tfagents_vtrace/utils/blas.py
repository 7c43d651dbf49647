"""numpy's BLAS thread pool while a run trains: one thread.

The numpy acting policies (``runtime/acting/policies.py``) multiply a few observations by
small weight matrices once per step. OpenBLAS, which numpy's wheels bundle, splits such a
product across every core once it is large enough (16 observations through a 256-unit MLP
is), and beside a learner that keeps the cores busy its spinning threads make the step many
times slower (docs/results/implementation_choices.md). The commands limit the pool through
``OPENBLAS_NUM_THREADS`` before numpy loads (``tfagents_vtrace/commands/__init__.py``);
:func:`one_blas_thread` does the same for a run started from Python, where numpy is loaded
already, through ``threadpoolctl`` (https://github.com/joblib/threadpoolctl), and gives the
caller's pool back when the run ends; a thread count the user set in
``OPENBLAS_NUM_THREADS`` is left as it is there. A Ray actor host, a process of the run's
own, keeps one thread for its life (:func:`limit_blas_threads`).
"""

from __future__ import annotations

import contextlib
import os


def _limit():
    """Sets the pool to one thread now; returns the limiter that restores it, or None
    without ``threadpoolctl``."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a dependency; an install without it still runs
        return None
    return threadpool_limits(limits=1, user_api="blas")


@contextlib.contextmanager
def one_blas_thread():
    """numpy's BLAS pool at one thread inside the ``with`` block, unless
    ``OPENBLAS_NUM_THREADS`` is set (module docstring)."""
    limiter = None if "OPENBLAS_NUM_THREADS" in os.environ else _limit()
    try:
        yield
    finally:
        if limiter is not None:
            limiter.restore_original_limits()


def limit_blas_threads() -> None:
    """numpy's BLAS pool at one thread from now on, whatever the environment says: for a
    process of the run's own (a Ray actor host, which acts beside others on its node)."""
    _limit()
