"""Checkpoints of a run: ``DIR/checkpoints`` (``tf.train.CheckpointManager``) over the
agent's trackables and the run's counters, and the network read back from a run directory.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import time

from tfagents_vtrace.runtime.rundir import checkpoint_files as files
from tfagents_vtrace.runtime.rundir.checkpoint_files import has_checkpoint  # noqa: F401 - its home for callers
from tfagents_vtrace.runtime.rundir.config_io import read_config, read_env_id, read_env_kwargs
from tfagents_vtrace.utils.tf_paths import DirAlias


class CheckpointError(ValueError):
    """No checkpoint of a run directory that holds some reads back whole."""


class Checkpointer:
    """``tf.train.CheckpointManager`` over the learner's trackables and run counters, in
    ``DIR/checkpoints``.

    Counters (``env_steps``, ``updates``, ``episodes``, ``wall_time``, ``env_restarts``) are
    int64/float64 variables saved with the network and optimizer. On construction, what killed
    saves left is removed and the state file is rewritten from the complete checkpoints on
    disk (:mod:`~tfagents_vtrace.runtime.rundir.checkpoint_files`), so a garbled or empty
    state file hides nothing; before that, a ``DIR/checkpoints`` that is not the run's own (a
    symbolic link, or holding anything a run does not write: :func:`checkpoint_files.
    check_own`) is refused, so no file of a user's is rewritten or removed.

    A start (:meth:`restore` finds no checkpoint) records what ``DIR`` held before it
    (:func:`~tfagents_vtrace.runtime.rundir.run_dir.record_start`, with the names seen before this
    constructor touched anything); its first :meth:`save` removes the record. A start that
    fails before then is undone from it (:func:`~tfagents_vtrace.runtime.rundir.run_dir.
    discard_start_files`).

    Raises:
      ValueError: naming the path, when ``DIR/checkpoints`` is not the run's own.
    """

    def __init__(self, logdir: str, items: dict, max_to_keep: int = 3):
        import tensorflow as tf

        from tfagents_vtrace.runtime.rundir import run_dir

        self.logdir, self.directory = logdir, os.path.join(logdir, "checkpoints")
        self.max_to_keep = max_to_keep
        files.check_own(self.directory)
        self._snapshot, self._recorded = run_dir.start_snapshot(logdir), False
        self.counters = {
            "env_steps": tf.Variable(0, dtype=tf.int64, trainable=False),
            "updates": tf.Variable(0, dtype=tf.int64, trainable=False),
            "episodes": tf.Variable(0, dtype=tf.int64, trainable=False),
            "env_restarts": tf.Variable(0, dtype=tf.int64, trainable=False),
            "wall_time": tf.Variable(0.0, dtype=tf.float64, trainable=False),
        }
        self.checkpoint = tf.train.Checkpoint(**items, **self.counters)
        self._alias = DirAlias(self.directory)
        files.remove_leftovers(self.directory)
        self._open_manager(files.complete_steps(self.directory))
        self.last_save = time.monotonic()

    def _open_manager(self, steps: list[int]) -> None:
        import tensorflow as tf

        if os.path.isdir(self.directory):
            files.write_state(self.directory, steps)
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, self._alias.name, max_to_keep=self.max_to_keep
        )

    def restore(self, accept=None) -> bool:
        """Restores the newest intact checkpoint; returns whether one was restored.

        Newest first, each complete checkpoint is read back whole (:func:`checkpoint_files.
        damage`), restored, and handed to ``accept(step)`` (e.g. loading its replay archive),
        which may raise :class:`~tfagents_vtrace.replay.storage.ReplayCorruptError`. A
        checkpoint that fails either is moved into ``checkpoints/damaged/`` with its replay
        archive, a one-line warning names it and why, and the next older one is tried.

        A damaged step-0 checkpoint alone (a start killed while writing it: nothing was
        trained) is moved aside too, and the run starts afresh.

        Raises:
          CheckpointError: trained checkpoints exist but none is intact (they are moved aside).
          AssertionError: an intact checkpoint does not match the trackables (another
            network): nothing is moved.
        """
        from tfagents_vtrace.replay import storage
        from tfagents_vtrace.runtime.rundir import run_dir

        skipped = []
        for step in files.complete_steps(self.directory):
            reason = files.damage(files.prefix(self._alias.name, step))
            if reason is None:
                self.checkpoint.restore(
                    files.prefix(self._alias.name, step)
                ).assert_existing_objects_matched()
                try:
                    if accept is not None:
                        accept(step)
                except storage.ReplayCorruptError as e:
                    reason = str(e)
            if reason is None:
                if skipped:
                    files.warn(
                        f"resuming from ckpt-{step}: skipped {'; '.join(skipped)}; moved to "
                        f"{os.path.join(self.directory, files.DAMAGED_DIR)}"
                    )
                self._open_manager(files.complete_steps(self.directory))
                run_dir.end_start(self.logdir)  # a start killed just after its checkpoint
                return True
            files.move_aside(self.directory, step, also=(storage.replay_path(self.logdir, step),))
            skipped.append(f"ckpt-{step} ({reason})")
        if skipped:
            self._open_manager([])
        if skipped and all(s.startswith("ckpt-0 ") for s in skipped):  # a start killed while
            files.warn(  # it wrote its step-0 checkpoint: nothing was trained, start afresh
                f"starting afresh: skipped {'; '.join(skipped)}; moved to "
                f"{os.path.join(self.directory, files.DAMAGED_DIR)}"
            )
        elif skipped:
            raise CheckpointError(
                f"logdir: no checkpoint in {self.directory!r} reads back whole: "
                f"{'; '.join(skipped)}; moved to {os.path.join(self.directory, files.DAMAGED_DIR)}"
            )
        run_dir.record_start(self.logdir, self._snapshot)  # a start: what it adds is undone
        self._recorded = True  # if it fails before its first checkpoint
        return False

    def steps(self) -> list[int]:
        """The steps of the checkpoints the manager keeps, oldest first."""
        return [int(p.rsplit("-", 1)[1]) for p in self.manager.checkpoints]

    def path(self, step: int) -> str:
        """The path prefix of checkpoint ``step``."""
        return files.prefix(self.directory, step)

    def get(self, name: str):
        return self.counters[name].numpy().item()

    def values(self) -> dict:
        """Every counter's value (e.g. as restored)."""
        return {name: self.get(name) for name in self.counters}

    def save(self, **counters) -> str:
        """Sets the counters and writes a checkpoint numbered by ``env_steps``; returns its
        path (under ``DIR/checkpoints``, whatever name TensorFlow wrote it through)."""
        for name, value in counters.items():
            self.counters[name].assign(value)
        self.last_save = time.monotonic()
        step = int(self.counters["env_steps"].numpy())
        self.manager.save(checkpoint_number=step)
        if self._recorded:  # the start is over: what it wrote is the run's
            from tfagents_vtrace.runtime.rundir import run_dir

            run_dir.end_start(self.logdir)
            self._recorded = False
        return self.path(step)

    def close(self) -> None:
        self._alias.close()


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
    spaces and restores only the network's weights (the optimizer is not needed).

    Raises:
      ValueError: no config.json or no checkpoint in ``logdir``, or a checkpoint with
        no network; its env id is not a registered gymnasium id (:func:`read_env_id`).
    """
    from tfagents_vtrace.envs import env_spaces  # registers the project's env ids too
    from tfagents_vtrace.networks import NetworkConfig, make_network

    config = read_config(logdir)
    env_id = read_env_id(config, logdir)
    spaces = env_spaces(env_id, read_env_kwargs(config, env_id))
    network_config = NetworkConfig.from_dict(config["network_config"])
    network = make_network(network_config, spaces.observation, spaces.action)
    with intact_checkpoint(logdir) as latest:
        _restore_networks({"network": network}, latest, "logdir")
    return network


def _restore_networks(networks: dict, path: str, label: str) -> list[str]:
    """Restores the Keras models ``networks`` (``{checkpoint item: model}``) from checkpoint
    ``path``: the names the checkpoint holds, each model whole. Both layouts of the policy
    network are read: IMPALA's and A2C's learner save its variable list as
    ``network_weights``, the other agents the Keras model as ``network``. Returns the names
    restored.

    Raises:
      ValueError: naming ``label``, when the checkpoint holds none of them, or one whose
        variables do not fit its model (other spaces or network settings).
    """
    import tensorflow as tf

    children = _checkpoint_root_children(path)
    found = {name: model for name, model in networks.items() if name in children}
    if "network" in networks and "network_weights" in children:
        found.pop("network", None)
        found["network_weights"] = list(networks["network"].weights)
    if not found:
        raise ValueError(
            f"{label}: checkpoint {path!r} holds no network (none of "
            f"{sorted(set(networks) | {'network_weights'})} among {sorted(children)})"
        )
    checkpoint = tf.train.Checkpoint(**found)
    try:
        checkpoint.read(path).expect_partial().assert_existing_objects_matched()
        return sorted(found)
    except (ValueError, AssertionError, tf.errors.OpError) as e:
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        # TensorFlow's op errors open with the op's node and end with the op's name
        detail = re.sub(r"^\{\{[^}]*\}\}\s*|\s*\[Op:\w+\]$", "", detail)
    # A read that failed leaves the checkpoint's values unrestored, which TensorFlow lists
    # line by line when the reader is collected: the one line below says it instead.
    logger, level = tf.get_logger(), tf.get_logger().level
    logger.setLevel("ERROR")
    try:
        del checkpoint
        gc.collect()
    finally:
        logger.setLevel(level)
    raise ValueError(
        f"{label}: the networks of {path!r} do not fit this run's (the spaces or the "
        f"network settings differ): {detail}"
    )


def warm_start(items: dict, source: str) -> str:
    """Loads into checkpoint ``items`` (a run agent's: Keras models among them) the networks
    of ``source`` (``RunConfig.init_from``): a run directory (its newest intact checkpoint;
    every model of ``items`` it holds) or an exported policy (a SavedModel directory; its
    policy network into ``items["network"]``). Returns a line saying what was loaded.

    Raises:
      ValueError: naming ``init_from``, for a path that is neither, a checkpoint without the
        networks or one whose networks do not fit (other spaces or network settings).
    """
    import keras

    source = os.fspath(source)
    networks = {k: v for k, v in items.items() if isinstance(v, keras.Model)}
    if os.path.isfile(os.path.join(source, "saved_model.pb")):
        # An exported policy: a PolicyModule whose ``network`` attribute is the policy
        # network, so its variables checkpoint reads back through that path.
        with DirAlias(source, create=False) as alias:
            path = os.path.join(alias, "variables", "variables")
            _restore_networks({"network": networks["network"]}, path, "init_from")
        return f"Warm start from the exported policy {source} (its policy network)."
    if not os.path.isdir(os.path.join(source, "checkpoints")):
        raise ValueError(
            f"init_from: {source!r} is neither a run directory (no checkpoints/) nor an "
            "exported policy (no saved_model.pb)"
        )
    with intact_checkpoint(source) as latest:
        names = _restore_networks(networks, latest, "init_from")
    return f"Warm start from {source} ({os.path.basename(latest)}: {', '.join(names)})."


@contextlib.contextmanager
def intact_checkpoint(logdir: str):
    """The path prefix of the newest checkpoint of run directory ``logdir`` that reads back
    whole, readable by TensorFlow while the block runs (through a
    :class:`~tfagents_vtrace.utils.tf_paths.DirAlias`); a newer damaged one is passed over with a
    one-line warning and left in place.

    Raises:
      ValueError: naming ``logdir``, when no checkpoint reads back whole.
    """
    directory = os.path.join(logdir, "checkpoints")
    reader = DirAlias(directory, create=False) if os.path.isdir(directory) else None
    with reader or contextlib.nullcontext(directory) as alias:
        step, skipped = files.newest_intact(directory, alias)
        if step is None:
            detail = f": {'; '.join(skipped)}" if skipped else ""
            raise ValueError(f"logdir: no intact checkpoint in {directory!r}{detail}")
        if skipped:
            files.warn(f"reading ckpt-{step} of {directory}: skipped {'; '.join(skipped)}")
        yield files.prefix(alias, step)
