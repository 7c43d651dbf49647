"""Runtime: actors, unroll queue, learner loop, checkpoints, metrics and strategy selection.

The local backend runs IMPALA-style (Espeholt et al. 2018, https://arxiv.org/abs/1802.01561)
actor threads that feed a bounded queue consumed by the learner's compiled train step; see
:mod:`tfagents_vtrace.runtime.loop`. Submodules import TensorFlow lazily where they can, so
``import tfagents_vtrace.runtime.config`` stays cheap.
"""

from tfagents_vtrace.runtime.config import RunConfig

__all__ = ["RunConfig"]
