"""The shared side of A3C: global network, the optimizer(s), a lock and the step counter.

Mnih et al., "Asynchronous Methods for Deep Reinforcement Learning", 2016,
https://arxiv.org/abs/1602.01783 (Algorithm S3): workers compute gradients on local copies
and apply them to the global parameters. By default each worker has its own optimizer
statistics, as in the A3C meta-RL fork (``a3c_meta_rl.txt``: one ``AdamOptimizer`` per
worker over the global variables); ``shared_optimizer=True`` gives the paper's "shared
RMSProp" form, one optimizer whose statistics all threads share.

Updates are serialized by a lock (not Hogwild): applying gradients, advancing the optimizer's
statistics and incrementing the global step counter happen atomically, so no update is lost
and ``global_step`` is exactly the sum of the steps the workers reported. Reading the weights
takes the same lock, so a worker never copies a half-applied update, and so does the run
driver's checkpoint (the lock is re-entrant: a worker counts its update under it too).
An update whose loss or gradient is not finite is skipped; ``nonfinite_streak`` counts
those in a row (the driver stops the run at ``max_nonfinite_updates``).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from tfagents_vtrace.agents import batching, optimization, placement
from tfagents_vtrace.agents.a2c.loss import a2c_loss, masked_means
from tfagents_vtrace.agents.a3c.config import A3CConfig
from tfagents_vtrace.networks.normalization import ReturnScaler
from tfagents_vtrace.runtime.run_agent import update_statistics


class SharedOptimizer:
    """Applies gradients to shared variables under one lock and counts environment steps.

    Args:
      variables: the global trainable variables.
      optimizer: a built (or buildable) Keras optimizer, used by every caller that has no
        optimizer of its own.
      record_order: keep the caller ids of the updates in ``order`` (tests, diagnostics).
      caller_optimizers: optional ``{caller: optimizer}``: those callers' updates use their
        own optimizer (own statistics) on the same variables.
    """

    def __init__(
        self,
        variables: Sequence[tf.Variable],
        optimizer,
        record_order: bool = False,
        caller_optimizers: dict | None = None,
    ):
        self.variables = list(variables)
        self.optimizer = optimizer
        self.caller_optimizers = dict(caller_optimizers or {})
        self.lock = threading.RLock()
        self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.updates = 0
        self.nonfinite_streak = 0
        self.order: list | None = [] if record_order else None
        self._applies = {}
        for opt in (optimizer, *self.caller_optimizers.values()):
            opt.build(self.variables)
            self._applies[id(opt)] = tf.function(
                lambda grads, opt=opt: opt.apply(grads, self.variables), autograph=False
            )

    def apply(self, grads: Sequence[tf.Tensor], num_steps: int, caller=None) -> int:
        """Applies ``grads`` (same order as ``variables``) and adds ``num_steps`` to the global
        step, atomically; returns the new global step. ``grads`` receive no further gradient."""
        if len(grads) != len(self.variables):
            raise ValueError(
                f"grads: expected {len(self.variables)} tensors, received {len(grads)}"
            )
        with self.lock:
            optimizer = self.caller_optimizers.get(caller, self.optimizer)
            self._applies[id(optimizer)](list(grads))
            self.updates += 1
            self.nonfinite_streak = 0
            if self.order is not None:
                self.order.append(caller)
            return int(self.global_step.assign_add(int(num_steps)).numpy())

    def add_steps(self, num_steps: int) -> int:
        """Counts ``num_steps`` without an update (a skipped non-finite one)."""
        with self.lock:
            self.nonfinite_streak += 1
            return int(self.global_step.assign_add(int(num_steps)).numpy())

    def read(self, fn: Callable[[], object]):
        """Runs ``fn`` (e.g. copying the weights) while no update can happen."""
        with self.lock:
            return fn()

    @property
    def step(self) -> int:
        """The global environment-step counter."""
        return int(self.global_step.numpy())


class A3CLearner:
    """The global network and the :class:`SharedOptimizer` that every worker updates.

    It also satisfies the registry's ``Learner`` contract: ``train_step(batch)`` computes
    the gradients of a batch on the global network and applies them through the shared
    optimizer (a one-worker A3C step).

    Args:
      config: an :class:`A3CConfig`.
      network_factory: zero-argument callable building the global network.
      strategy: ignored by the thread backend (must be a single-replica strategy if given).
      total_updates: the lr decay horizon in updates (each worker optimizer gets its share).
      total_steps: environment steps of the run (entropy annealing, lr decay horizon).
      record_order: forwarded to :class:`SharedOptimizer`.
    """

    def __init__(
        self,
        config: A3CConfig,
        network_factory: Callable[[], object],
        strategy: tf.distribute.Strategy | None = None,
        total_updates: int | None = None,
        *,
        total_steps: int | None = None,
        record_order: bool = False,
    ):
        if not isinstance(config, A3CConfig):
            raise ValueError(f"config: expected an A3CConfig, received {type(config)}")
        placement.require_single_replica(strategy, "A3C")
        self.config = config
        self.total_steps = total_steps
        self.network = network_factory()
        self.optimizer = optimization.optimizer_from_config(config, total_updates)
        self.worker_optimizers = {}
        if not config.shared_optimizer:
            share = None if not total_updates else math.ceil(total_updates / config.num_workers)
            self.worker_optimizers = {
                i: optimization.optimizer_from_config(config, share)
                for i in range(config.num_workers)
            }
        self.shared = SharedOptimizer(
            self.network.trainable_variables,
            self.optimizer,
            record_order=record_order,
            caller_optimizers=self.worker_optimizers,
        )
        self._grads = batching.BatchFunction(self._grads_fn)
        self.returns = ReturnScaler(config.discount) if config.normalize_rewards else None

    def observe(self, batch: dict, source) -> dict:
        """A worker's fresh rollout ``batch`` merged into the running statistics of
        ``normalize_observations`` / ``normalize_rewards`` (under the shared lock, as an
        update); returns it with its rewards scaled when ``normalize_rewards``."""
        if not (self.network.observation_normalizers or self.returns is not None):
            return batch
        with self.shared.lock:
            update_statistics(self.network, self.returns, [(batch, source)])
            if self.returns is not None:
                batch = {**batch, "reward": self.returns.scale(batch["reward"])}
        return batch

    def entropy_coef(self, step: int | None = None) -> float:
        """The entropy weight at global step ``step`` (default: now)."""
        step = self.shared.step if step is None else step
        start, end = self.config.entropy_schedule
        return float(optimization.entropy_coefficient(step, self.total_steps, start, end))

    def get_weights(self) -> list[np.ndarray]:
        """The global weights, copied while no update is in flight."""
        return self.shared.read(self.network.get_weights)

    def checkpoint_items(self) -> dict:
        """Trackables to checkpoint: global network, optimizer(s), global step."""
        return {
            "network": self.network,
            "optimizer": self.optimizer,
            **{f"optimizer_worker{i}": opt for i, opt in self.worker_optimizers.items()},
            "a3c_global_step": self.shared.global_step,
            **({"return_statistics": self.returns.statistics} if self.returns else {}),
        }

    def _grads_fn(self, batch: dict, entropy_coef: tf.Tensor):
        return compute_gradients(self.network, self.config, batch, entropy_coef)

    def train_step(self, batch: dict) -> dict[str, float]:
        """One update of the global network on ``batch`` (runtime unroll layout)."""
        steps = int(np.prod(np.shape(batch["reward"])))
        coef = tf.constant(self.entropy_coef(), tf.float32)
        grads, metrics = self.shared.read(lambda: self._grads(batch, coef))
        return finish_update(self.shared, grads, metrics, steps, caller="learner")


def compute_gradients(network, config: A3CConfig, batch: dict, entropy_coef: tf.Tensor):
    """Clipped gradients of the A2C loss on ``network`` and metrics (call inside tf.function).

    Returns ``(grads, metrics)``; ``metrics`` gains ``grad_norm`` (before clipping),
    ``finite`` (1.0 when loss and gradients are finite) and ``entropy_coef``.
    """
    shape = tf.shape(batch["reward"])
    scale = 1.0 / tf.cast(shape[0] * shape[1], tf.float32)
    with tf.GradientTape() as tape:
        loss, metrics = a2c_loss(network, config, batch, entropy_coef, scale)
    masked_means(metrics)
    grads = tape.gradient(loss, network.trainable_variables)
    grads, norm, finite = optimization.clip_and_check(grads, config.max_grad_norm)
    finite = tf.logical_and(finite, tf.math.is_finite(loss))
    metrics = dict(metrics, grad_norm=norm, finite=tf.cast(finite, tf.float32))
    metrics["entropy_coef"] = tf.cast(entropy_coef, tf.float32)
    return grads, metrics


def finish_update(shared: SharedOptimizer, grads, metrics, steps: int, caller) -> dict:
    """Applies finite ``grads`` through ``shared`` (skips others); returns float metrics
    with ``global_step``, ``skipped``, ``nonfinite_streak`` and the ``learning_rate`` of the
    caller's optimizer."""
    out = {k: float(v) for k, v in metrics.items()}
    with shared.lock:
        optimizer = shared.caller_optimizers.get(caller, shared.optimizer)
        out["learning_rate"] = float(optimizer.learning_rate)
        if out.pop("finite") > 0.0:
            out["global_step"] = float(shared.apply(grads, steps, caller=caller))
            out["skipped"] = 0.0
        else:
            out["global_step"] = float(shared.add_steps(steps))
            out["skipped"] = 1.0
        out["nonfinite_streak"] = float(shared.nonfinite_streak)
    return out
