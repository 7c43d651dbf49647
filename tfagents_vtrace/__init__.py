"""tfagents_vtrace: off-policy actor-critic agents in TensorFlow 2 / Keras 3.

IMPALA (V-trace), A3C/A2C (GAE), ACER (Retrace, truncated IS with bias correction,
trust region) and TAAC, with pure-tensor ops in :mod:`tfagents_vtrace.ops`.

The Python API (:mod:`tfagents_vtrace.api`)::

    import tfagents_vtrace as tv
    final = tv.train("impala", env=MyEnv, logdir="runs/mine", total_steps=300_000)
    policy = tv.load_policy(final["policy"])
    tv.evaluate(policy, MyEnv, episodes=20)

Callbacks for ``tv.train(..., callbacks=[...])`` are in ``tv.callbacks``
(:mod:`tfagents_vtrace.callbacks`), hyperparameter searches with Optuna in ``tv.sweeps``
(:mod:`tfagents_vtrace.sweeps`). Its names are imported on first use, so
``import tfagents_vtrace`` stays light.
"""

import importlib

__version__ = "0.1.0"

_API = (
    "train",
    "load_policy",
    "evaluate",
    "make_configs",
    "make_network",
    "config_path",
    "Policy",
)
_MODULES = ("callbacks", "sweeps")
__all__ = ["__version__", *_API, *_MODULES]


def __getattr__(name: str):
    if name in _API:
        from tfagents_vtrace import api

        return getattr(api, name)
    if name in _MODULES:
        return importlib.import_module(f"tfagents_vtrace.{name}")
    raise AttributeError(f"module 'tfagents_vtrace' has no attribute {name!r}")
