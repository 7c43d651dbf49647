"""Checkpoints of a run: ``DIR/checkpoints`` (``tf.train.CheckpointManager``) over the
agent's trackables and the run's counters, and the network read back from a run directory.
"""

from __future__ import annotations

import glob
import os
import time

from tfagents_vtrace.runtime.config_io import read_config, read_env_id, read_env_kwargs


class Checkpointer:
    """``tf.train.CheckpointManager`` over the learner's trackables and run counters.

    Counters (``env_steps``, ``updates``, ``episodes``, ``wall_time``, ``env_restarts``) are
    int64/float64 variables saved with the network and optimizer.
    """

    def __init__(self, logdir: str, items: dict, max_to_keep: int = 3):
        import tensorflow as tf

        self.counters = {
            "env_steps": tf.Variable(0, dtype=tf.int64, trainable=False),
            "updates": tf.Variable(0, dtype=tf.int64, trainable=False),
            "episodes": tf.Variable(0, dtype=tf.int64, trainable=False),
            "env_restarts": tf.Variable(0, dtype=tf.int64, trainable=False),
            "wall_time": tf.Variable(0.0, dtype=tf.float64, trainable=False),
        }
        self.checkpoint = tf.train.Checkpoint(**items, **self.counters)
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, os.path.join(logdir, "checkpoints"), max_to_keep=max_to_keep
        )
        self.last_save = time.monotonic()

    def restore(self) -> bool:
        """Restores the latest checkpoint if any; returns whether one was restored."""
        latest = self.manager.latest_checkpoint
        if latest is None:
            return False
        self.checkpoint.restore(latest).assert_existing_objects_matched()
        return True

    def get(self, name: str):
        return self.counters[name].numpy().item()

    def values(self) -> dict:
        """Every counter's value (e.g. as restored)."""
        return {name: self.get(name) for name in self.counters}

    def save(self, **counters) -> str:
        """Sets the counters and writes a checkpoint numbered by ``env_steps``."""
        for name, value in counters.items():
            self.counters[name].assign(value)
        self.last_save = time.monotonic()
        return self.manager.save(checkpoint_number=int(self.counters["env_steps"].numpy()))


def _checkpoint_root_children(path: str) -> set[str]:
    """Names of the root object's children in checkpoint ``path`` (its object graph)."""
    import tensorflow as tf
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    graph = trackable_object_graph_pb2.TrackableObjectGraph.FromString(
        tf.train.load_checkpoint(path).get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH")
    )
    return {child.local_name for child in graph.nodes[0].children}


def restore_network(logdir: str):
    """Rebuilds the network of run directory ``logdir`` and restores its latest checkpoint.

    Reads ``config.json`` (env id + network config), builds the network for the env's
    spaces and restores only the network's weights (the optimizer is not needed). Both
    checkpoint layouts are read: IMPALA's learner saves the variable list
    ``network_weights``; A2C, A3C and ACER save the Keras model as ``network``.

    Raises:
      ValueError: no config.json or no checkpoint in ``logdir``, or a checkpoint with
        neither entry; its env id is not a registered gymnasium id (:func:`read_env_id`).
    """
    import tensorflow as tf

    import tfagents_vtrace.envs  # noqa: F401 - registers the project's env ids
    from tfagents_vtrace.networks import NetworkConfig
    from tfagents_vtrace.runtime.actor import build_network

    config = read_config(logdir)
    env_id = read_env_id(config, logdir)
    network = build_network(
        NetworkConfig.from_dict(config["network_config"]), env_id, read_env_kwargs(config, env_id)
    )
    latest = tf.train.latest_checkpoint(os.path.join(logdir, "checkpoints"))
    if latest is None:
        raise ValueError(f"logdir: no checkpoint in {os.path.join(logdir, 'checkpoints')!r}")
    children = _checkpoint_root_children(latest)
    if "network_weights" in children:
        checkpoint = tf.train.Checkpoint(network_weights=list(network.weights))
    elif "network" in children:
        checkpoint = tf.train.Checkpoint(network=network)
    else:
        raise ValueError(
            f"logdir: checkpoint {latest!r} holds no network (neither 'network_weights' nor "
            f"'network' among {sorted(children)})"
        )
    checkpoint.restore(latest).expect_partial().assert_existing_objects_matched()
    return network


def has_checkpoint(logdir: str) -> bool:
    """Whether ``DIR/checkpoints`` holds a checkpoint (``tf.train.CheckpointManager`` state)."""
    ckpt_dir = os.path.join(logdir, "checkpoints")
    return os.path.exists(os.path.join(ckpt_dir, "checkpoint")) and bool(
        glob.glob(os.path.join(glob.escape(ckpt_dir), "ckpt-*.index"))
    )
