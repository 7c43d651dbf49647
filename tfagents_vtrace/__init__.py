"""tfagents_vtrace: off-policy actor-critic agents in TensorFlow 2 / Keras 3.

IMPALA (V-trace), A3C/A2C (GAE), ACER (Retrace, truncated IS with bias correction,
trust region) and TAAC, with pure-tensor ops in :mod:`tfagents_vtrace.ops`.
"""

__version__ = "0.1.0"
