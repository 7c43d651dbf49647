"""numpy's BLAS thread pool while a run trains: one thread.

The numpy acting policies (``runtime/acting/policies.py``) multiply a few observations by
small weight matrices once per step. OpenBLAS, which numpy's wheels bundle, splits such a
product across every core once it is large enough (16 observations through a 256-unit MLP
is), and beside a learner that keeps the cores busy its spinning threads make the step many
times slower (docs/results/implementation_choices.md). The commands limit the pool through
``OPENBLAS_NUM_THREADS`` before numpy loads (``tfagents_vtrace/commands/__init__.py``);
:func:`one_blas_thread` does the same for a run started from Python, where numpy is loaded
already, through ``threadpoolctl`` (https://github.com/joblib/threadpoolctl), and gives the
caller's pool back when the run ends. A thread count the user set in
``OPENBLAS_NUM_THREADS`` is left as it is.
"""

from __future__ import annotations

import contextlib
import os


@contextlib.contextmanager
def one_blas_thread():
    """numpy's BLAS pool at one thread inside the ``with`` block, unless
    ``OPENBLAS_NUM_THREADS`` is set (module docstring)."""
    if "OPENBLAS_NUM_THREADS" in os.environ:
        yield
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a dependency; an install without it still runs
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
