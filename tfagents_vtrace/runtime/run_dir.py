"""The run directory: config.json, metrics.jsonl, TensorBoard events, checkpoints, policy/.

Layout (DESIGN.md "Experiments contract")::

    DIR/config.json        agent + network + run config and env id (rebuilds the network)
    DIR/metrics.jsonl      one JSON object per log interval / evaluation
    DIR/events.out.tfevents.*   TensorBoard scalars (same values)
    DIR/checkpoints/       tf.train.CheckpointManager checkpoints
    DIR/policy/            SavedModel written at the end of training

Resuming: rows of metrics.jsonl and TensorBoard summaries with a step beyond the restored
checkpoint's step are dropped (they will be recomputed), so steps stay strictly increasing
and nothing appears twice, in the JSON log or in TensorBoard.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def write_config(logdir: str, config: dict) -> str:
    """Writes ``config`` (dataclasses allowed) to ``DIR/config.json``; returns the path."""
    os.makedirs(logdir, exist_ok=True)
    path = os.path.join(logdir, "config.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(_jsonable(config), f, indent=2, sort_keys=True)
    os.replace(tmp, path)
    return path


def write_run_config(logdir: str, agent_name: str, run, agent_config, network_config) -> str:
    """Writes the run's ``config.json``: agent name, env id and the agent, network and run
    configs (enough to rebuild the network, see :func:`restore_network`)."""
    return write_config(
        logdir,
        {
            "agent": agent_name,
            "env_id": run.env_id,
            "agent_config": agent_config,
            "network_config": network_config,
            "run_config": run,
        },
    )


def read_config(logdir: str) -> dict:
    """Reads ``DIR/config.json``."""
    path = os.path.join(logdir, "config.json")
    if not os.path.exists(path):
        raise ValueError(f"logdir: no config.json in {logdir!r}")
    with open(path) as f:
        return json.load(f)


def read_metrics(logdir: str) -> list[dict]:
    """The rows of ``DIR/metrics.jsonl`` (``[]`` if there is none); a row cut by a kill is
    skipped."""
    path = os.path.join(logdir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    rows = []
    with open(path) as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


def last_json_line(text: str) -> dict:
    """The last line of ``text`` that parses as a JSON object (``{}`` if none): the final
    row that ``experiments.train`` prints."""
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return {}


def dataclass_from_dict(cls, data: dict):
    """Builds dataclass ``cls`` from a config.json dict (lists become tuples; unknown keys
    are ignored so older run directories still load)."""
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in names}
    return cls(**kwargs)


def _scalar_metadata():
    """``SummaryMetadata`` marking a float32 scalar for TensorBoard's "scalars" plugin."""
    from tensorflow.core.framework import summary_pb2

    return summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
    )


def truncate_events(logdir: str, step: int) -> int:
    """Rewrites ``DIR/events.out.tfevents.*`` without the summaries of steps after ``step``.

    Event files are TFRecord files of ``Event`` protos; events without a summary (the file
    version header) are kept. A record cut by a kill ends the file's readable part. Returns
    the number of summary events dropped.
    """
    paths = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    if not paths:
        return 0
    import tensorflow as tf
    from tensorflow.core.util import event_pb2

    dropped = 0
    for path in paths:
        kept, changed = [], False
        try:
            for raw in tf.data.TFRecordDataset(path):
                record = raw.numpy()
                event = event_pb2.Event.FromString(record)
                if event.HasField("summary") and event.step > step:
                    dropped, changed = dropped + 1, True
                else:
                    kept.append(record)
        except tf.errors.DataLossError:  # a record cut by a kill: keep what precedes it
            changed = True
        if changed:
            tmp = path + ".tmp"
            with tf.io.TFRecordWriter(tmp) as writer:
                for record in kept:
                    writer.write(record)
            os.replace(tmp, path)
    return dropped


class MetricsLog:
    """Appends JSON rows to ``DIR/metrics.jsonl`` and mirrors scalars to TensorBoard."""

    def __init__(self, logdir: str, tensorboard: bool = True):
        self.logdir = logdir
        self.path = os.path.join(logdir, "metrics.jsonl")
        self._tensorboard = tensorboard
        self._writer = None
        self._file = None

    def truncate_after(self, step: int) -> int:
        """Drops rows (and TensorBoard summaries) with ``step > step`` (resume); returns the
        number of metrics rows kept."""
        if self._tensorboard:
            truncate_events(self.logdir, step)
        if not os.path.exists(self.path):
            return 0
        with open(self.path) as f:
            rows = [line for line in f if line.strip()]
        keep = []
        for line in rows:
            try:
                if json.loads(line).get("step", 0) <= step:
                    keep.append(line)
            except json.JSONDecodeError:  # a row cut by a kill
                continue
        with open(self.path + ".tmp", "w") as f:
            f.writelines(keep)
        os.replace(self.path + ".tmp", self.path)
        return len(keep)

    def write(self, row: dict) -> None:
        """Appends ``row`` (must hold ``step``) and writes its numeric fields as scalars."""
        if self._file is None:
            os.makedirs(self.logdir, exist_ok=True)
            self._file = open(self.path, "a")  # noqa: SIM115 - kept open for the run
        self._file.write(json.dumps(_jsonable(row)) + "\n")
        self._file.flush()
        if self._tensorboard:
            self._summaries(row)

    def _summaries(self, row: dict) -> None:
        import tensorflow as tf

        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.logdir)
        step = int(row["step"])
        with self._writer.as_default():
            for key, value in row.items():
                if key != "step" and isinstance(value, int | float) and not isinstance(value, bool):
                    # The scalar plugin's summary format, written without importing tensorboard.
                    tf.summary.write(
                        key,
                        tf.constant(float(value), tf.float32),
                        step=step,
                        metadata=_scalar_metadata(),
                    )

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._writer is not None:
            self._writer.flush()
            self._writer.close()
            self._writer = None


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

    def save(self, **counters) -> str:
        """Sets the counters and writes a checkpoint numbered by ``env_steps``."""
        for name, value in counters.items():
            self.counters[name].assign(value)
        self.last_save = time.monotonic()
        return self.manager.save(checkpoint_number=int(self.counters["env_steps"].numpy()))


def restore_network(logdir: str):
    """Rebuilds the network of run directory ``logdir`` and restores its latest checkpoint.

    Reads ``config.json`` (env id + network config), builds the network for the env's
    spaces and restores only the network's weights (the optimizer is not needed).

    Raises:
      ValueError: no config.json or no checkpoint in ``logdir``.
    """
    import tensorflow as tf

    import tfagents_vtrace.envs  # noqa: F401 - registers the project's env ids
    from tfagents_vtrace.networks import NetworkConfig
    from tfagents_vtrace.runtime.actor import build_network

    config = read_config(logdir)
    network = build_network(NetworkConfig.from_dict(config["network_config"]), config["env_id"])
    latest = tf.train.latest_checkpoint(os.path.join(logdir, "checkpoints"))
    if latest is None:
        raise ValueError(f"logdir: no checkpoint in {os.path.join(logdir, 'checkpoints')!r}")
    status = tf.train.Checkpoint(network_weights=list(network.weights)).restore(latest)
    status.expect_partial().assert_existing_objects_matched()
    return network


def finish_run(
    trainer,
    network,
    last_eval: dict,
    solved_wall: float | None,
    step: int,
    *,
    export: Callable[[str], None] | None = None,
    **extra,
) -> dict:
    """Ends ``trainer``'s run the same way for every training loop; returns the final row.

    Saves a last checkpoint, exports the policy to ``LOGDIR/policy`` when
    ``run_config.export_policy`` asks for it (``export(path)`` when given, else
    :func:`tfagents_vtrace.export.export_policy` of ``network``, overwriting) and closes the
    metrics file. ``trainer`` has ``save()``, ``wall_time()``, ``metrics``, ``run_config``
    and ``logdir``; ``last_eval`` is the newest evaluation row (``step``, ``eval_return``);
    ``solved_wall`` the wall time at which ``stop_return`` was reached, or None. The row
    holds ``final``, ``step``, ``wall_time``, ``train_wall_time`` (before the export),
    ``solve_wall_time``, ``solve_step`` and ``eval_return``, then ``extra`` in order.
    """
    trainer.save()
    train_wall = trainer.wall_time()
    if trainer.run_config.export_policy:
        path = os.path.join(trainer.logdir, "policy")
        if export is not None:
            export(path)
        else:
            from tfagents_vtrace.export import export_policy

            export_policy(network, path, overwrite=True)
    trainer.metrics.close()
    return {
        "final": True,
        "step": int(step),
        "wall_time": round(trainer.wall_time(), 3),
        "train_wall_time": round(train_wall, 3),
        "solve_wall_time": solved_wall,
        "solve_step": last_eval["step"] if solved_wall is not None else None,
        "eval_return": last_eval["eval_return"],
        **extra,
    }
