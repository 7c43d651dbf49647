"""Runtime: the run driver, unroll sources, counters, triggers, checkpoints, metrics, stop
signals and strategy selection.

:mod:`tfagents_vtrace.runtime.driver` owns every agent's run; IMPALA-style (Espeholt et al.
2018, https://arxiv.org/abs/1802.01561) actor threads or Ray actors feed a bounded queue
consumed by the learner's compiled train step in
:mod:`tfagents_vtrace.runtime.actor_learner`. Submodules import TensorFlow lazily where they can, so
``import tfagents_vtrace.runtime.config`` stays cheap.
"""

from tfagents_vtrace.runtime.config import RunConfig

__all__ = ["RunConfig"]
