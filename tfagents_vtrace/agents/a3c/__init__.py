"""A3C: asynchronous advantage actor-critic on worker threads (Mnih et al. 2016,
https://arxiv.org/abs/1602.01783), with the loss shared with A2C
(:mod:`tfagents_vtrace.agents.a2c.loss`).

Registry names: ``Config`` and ``Learner`` (the global network + shared optimizer; its
``train_step`` is a one-worker update) and ``train`` (the threaded entry point that the
launcher calls instead of the IMPALA runtime loop for ``--agent=a3c``).
"""

from tfagents_vtrace.agents.a3c.config import A3CConfig
from tfagents_vtrace.agents.a3c.shared import A3CLearner, SharedOptimizer, compute_gradients
from tfagents_vtrace.agents.a3c.train import A3CTrainer, train
from tfagents_vtrace.agents.a3c.worker import Worker, WorkerStats

Config = A3CConfig
Learner = A3CLearner

__all__ = [
    "A3CConfig",
    "A3CLearner",
    "A3CTrainer",
    "Config",
    "Learner",
    "SharedOptimizer",
    "Worker",
    "WorkerStats",
    "compute_gradients",
    "train",
]
