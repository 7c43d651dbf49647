"""The ACER learner: network, exponentially averaged network, optimizer, one compiled update.

Wang et al. 2016, https://arxiv.org/abs/1611.01224. After every applied update the average
network follows ``theta_avg <- alpha theta_avg + (1 - alpha) theta`` (the trust region's
reference policy, ``trust_region_alpha``). The same :meth:`AcerLearner.train_step` serves
on-policy unrolls and replayed sequences (both in the runtime's unroll layout); asynchronous
workers compute gradients on their own network copy with :meth:`AcerLearner.gradients_fn`
and apply them through :meth:`AcerLearner.apply_gradients` (serialized by ``lock``).

Statistics ``average_value``, ``average_entropy`` and ``average_kl`` are chainerrl's ACER
statistics: exponential moving averages with decay ``stats_decay`` per step (value and
entropy over the acted steps of the on-policy updates, kl over the trust-region steps of
every update), folded in from the ``ema/...`` metrics of
:func:`~tfagents_vtrace.agents.acer.loss.acer_loss` (see ``loss.ema_parts``).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from tfagents_vtrace.agents import batching, optimization, placement
from tfagents_vtrace.agents.acer.config import AcerConfig
from tfagents_vtrace.agents.acer.loss import acer_loss


class AcerLearner:
    """Owns the network, its average copy and the optimizer (agent-registry ``Learner``).

    Args:
      config: an :class:`AcerConfig`.
      network_factory: zero-argument callable building a network with a Q head; called twice
        (learning and average network).
      strategy: None or a single-replica strategy (ACER runs one learner thread or workers).
      total_updates: optimizer updates of the whole run (linear lr decay).
    """

    def __init__(
        self,
        config: AcerConfig,
        network_factory: Callable[[], object],
        strategy: tf.distribute.Strategy | None = None,
        total_updates: int | None = None,
    ):
        if not isinstance(config, AcerConfig):
            raise ValueError(f"config: expected an AcerConfig, received {type(config)}")
        placement.require_single_replica(strategy, "ACER")
        self.config = config
        self.network = network_factory()
        self.average_network = network_factory()
        self.average_network.set_weights(self.network.get_weights())
        self.optimizer = optimization.optimizer_from_config(config, total_updates)
        self.optimizer.build(self.network.trainable_variables)
        self.updates = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.nonfinite_streak = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.skipped_updates = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.lock = threading.Lock()
        self.stats = {"average_value": 0.0, "average_entropy": 0.0, "average_kl": 0.0}
        self._steps = {
            on_policy: batching.BatchFunction(
                functools.partial(self._train_step_fn, on_policy=on_policy),
                jit_compile=config.jit_compile,
            )
            for on_policy in (False, True)
        }
        self._apply = tf.function(self._apply_fn, autograph=False)
        self._metric_names: list[str] = []

    # ------------------------------------------------------------------ public API
    def train_step(self, batch: dict, on_policy: bool = False) -> dict[str, float]:
        """One update of the global network on ``batch`` (``on_policy``: the unroll it just
        acted, see :func:`~tfagents_vtrace.agents.acer.loss.acer_loss`); returns float
        metrics (including the running ``average_value``, ``average_entropy``,
        ``average_kl``)."""
        with self.lock:
            out = self._steps[bool(on_policy)](batch)
            return self._finish(dict(zip(self._metric_names, out.numpy().tolist())))

    def gradients_fn(self, network) -> Callable:
        """A compiled ``(batch, on_policy=False) -> (grads, metrics)`` on ``network`` (a
        worker's copy) against the shared average network; apply the result with
        :meth:`apply_gradients`."""
        return gradients_fn(network, self.average_network, self.config)

    def apply_gradients(self, grads, metrics: dict) -> dict[str, float]:
        """Applies a worker's gradients to the global network (serialized by ``lock``)."""
        with self.lock:
            out = self._apply(list(grads), metrics["loss"])
            tensors = [*metrics.items(), *sorted(out.items())]  # ``out`` wins on a shared key
            values = tf.stack([tf.cast(v, tf.float32) for _, v in tensors]).numpy().tolist()
            return self._finish(dict(zip([k for k, _ in tensors], values)))

    def get_weights(self) -> list[np.ndarray]:
        """The network weights as numpy arrays (actors, evaluation, worker sync)."""
        return self.network.get_weights()

    def checkpoint_items(self) -> dict:
        """Trackables to checkpoint: both networks, optimizer and counters."""
        return {
            "network": self.network,
            "average_network": self.average_network,
            "optimizer": self.optimizer,
            "acer_updates": self.updates,
            "nonfinite_streak": self.nonfinite_streak,
            "skipped_updates": self.skipped_updates,
        }

    # ------------------------------------------------------------------ internals
    def _finish(self, metrics: dict[str, float]) -> dict[str, float]:
        for key in ("value", "entropy", "kl"):  # avg <- decay^N avg + sum (loss.ema_parts)
            name = "average_" + key
            factor, total = metrics.pop(f"ema/{key}_factor"), metrics.pop(f"ema/{key}_sum")
            self.stats[name] = factor * self.stats[name] + total
        metrics.update(self.stats)
        return metrics

    def _apply_fn(self, grads, loss) -> dict[str, tf.Tensor]:
        variables = self.network.trainable_variables
        out = optimization.apply_if_finite(
            self.optimizer,
            grads,
            variables,
            loss,
            self.config.max_grad_norm,
            self.nonfinite_streak,
            self.skipped_updates,
        )
        applied = out["skipped"] < 0.5
        alpha = self.config.trust_region_alpha
        # The average network follows the new weights only after an applied update.
        for avg, var in zip(self.average_network.weights, self.network.weights, strict=True):
            avg.assign(tf.where(applied, alpha * avg + (1.0 - alpha) * var, avg))
        self.updates.assign_add(1)
        return out

    def _train_step_fn(self, batch: dict, on_policy: bool) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss, metrics = acer_loss(
                self.network, self.average_network, self.config, batch, on_policy
            )
        grads = tape.gradient(loss, self.network.trainable_variables)
        metrics = dict(metrics)
        metrics.update(self._apply_fn(grads, loss))
        self._metric_names = sorted(metrics)
        return tf.stack([tf.cast(metrics[k], tf.float32) for k in self._metric_names])


def gradients_fn(network, average_network, config: AcerConfig) -> Callable:
    """A compiled ``(batch, on_policy=False) -> (grads, metrics)``: the gradients of the ACER
    loss on ``network`` against ``average_network`` (a worker thread's copy against the
    learner's average network, or a Ray worker's copies of both)."""

    def fn(batch, on_policy):
        with tf.GradientTape() as tape:
            loss, metrics = acer_loss(network, average_network, config, batch, on_policy)
        return tape.gradient(loss, network.trainable_variables), metrics

    compiled = {
        flag: batching.BatchFunction(functools.partial(fn, on_policy=flag))
        for flag in (False, True)
    }
    return lambda batch, on_policy=False: compiled[bool(on_policy)](batch)
