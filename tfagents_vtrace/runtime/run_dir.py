"""The run directory: config.json, metrics.jsonl, TensorBoard events, checkpoints, policy/.

Layout (DESIGN.md "Experiments contract")::

    DIR/config.json        agent + network + run config and env id (rebuilds the network)
    DIR/metrics.jsonl      one JSON object per log interval / evaluation (strict JSON:
                           ``null`` for non-finite values, as in config.json / final.json)
    DIR/events.out.tfevents.*   TensorBoard scalars (same values)
    DIR/checkpoints/       tf.train.CheckpointManager checkpoints
    DIR/policy/            SavedModel written at the end of training
    DIR/final.json         the final row of a run that ended (``finish_run``)

Before a run starts, :func:`prepare_logdir` checks ``DIR``: a directory holding files but
no checkpoint is refused (nothing a user wrote is replaced without ``overwrite=True``), and
so is a checkpointed run of another agent, environment or network (its checkpoint could not
be restored); other config changes are allowed, listed, and the previous ``config.json`` is
kept as ``config.before-resume-<n>.json``. A run that already ended (``final.json`` at the
checkpoint's step, with ``total_steps`` or ``stop_return`` reached) is not trained again
(:func:`finished_row`). A ``KeyboardInterrupt`` inside :func:`checkpoint_on_interrupt` writes
a checkpoint before the run stops; ``experiments.train`` turns Ctrl-C and SIGTERM into
:func:`request_stop`, which the loops' :func:`check_stop` raises as one between two steps.

Resuming: rows of metrics.jsonl and TensorBoard summaries with a step beyond the restored
checkpoint's step are dropped (they will be recomputed), so steps stay strictly increasing
and nothing appears twice, in the JSON log or in TensorBoard.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import math
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from tfagents_vtrace.runtime.run_lock import LOCK_NAME


def _jsonable(value: Any) -> Any:
    """``value`` as JSON values: dataclasses and tuples become dicts and lists, numpy scalars
    Python ones, and non-finite floats (NaN, inf) ``None``."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def dumps(value: Any, **kwargs) -> str:
    """Strict JSON text of ``value`` (see :func:`_jsonable`): ``null`` where a float is not
    finite, never the bare ``NaN`` / ``Infinity`` that strict parsers reject."""
    return json.dumps(_jsonable(value), allow_nan=False, **kwargs)


def write_config(logdir: str, config: dict, name: str = "config.json") -> str:
    """Writes ``config`` (dataclasses allowed) to ``DIR/name`` atomically, as strict JSON;
    returns the path."""
    text = dumps(config, indent=2, sort_keys=True)  # a value JSON cannot hold fails here
    os.makedirs(logdir, exist_ok=True)
    path = os.path.join(logdir, name)
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:  # e.g. a full disk: no partial file is left behind
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    return path


def run_config_dict(agent_name: str, run, agent_config, network_config) -> dict:
    """What ``config.json`` holds: agent name, env id and the agent, network and run configs
    (enough to rebuild the network, see :func:`restore_network`), as JSON values."""
    config = {
        "agent": agent_name,
        "env_id": run.env_id,
        "agent_config": agent_config,
        "network_config": network_config,
        "run_config": run,
    }
    return json.loads(dumps(config))


def write_run_config(logdir: str, agent_name: str, run, agent_config, network_config) -> str:
    """Writes the run's ``config.json`` (:func:`run_config_dict`)."""
    return write_config(logdir, run_config_dict(agent_name, run, agent_config, network_config))


def read_config(logdir: str) -> dict:
    """Reads ``DIR/config.json``."""
    path = os.path.join(logdir, "config.json")
    if not os.path.exists(path):
        raise ValueError(f"logdir: no config.json in {logdir!r}")
    with open(path) as f:
        return json.load(f)


def read_env_id(config: dict, logdir: str) -> str:
    """The env id of a run directory's ``config.json`` (``config``, read from ``logdir``),
    checked to be data: a registered gymnasium id without a ``module:`` prefix (which
    ``gym.make`` would import), see :func:`tfagents_vtrace.envs.factory.check_registered_id`.

    Raises:
      ValueError: ``"env_id: ..."`` naming the id and the file, when it is not such an id.
    """
    from tfagents_vtrace.envs.factory import check_registered_id

    try:
        return check_registered_id(config.get("env_id"), "env_id")
    except ValueError as e:
        raise ValueError(f"{e} (in {os.path.join(logdir, 'config.json')})") from None


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
    paths = glob.glob(os.path.join(glob.escape(logdir), "events.out.tfevents.*"))
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
        self._file.write(dumps(row) + "\n")  # strict JSON: null for NaN / inf
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
    network = build_network(NetworkConfig.from_dict(config["network_config"]), env_id)
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
    metrics file (a ``policy/`` that is not a SavedModel, the run's own export cut by a kill,
    is replaced). ``trainer`` has ``save()``, ``wall_time()``, ``metrics``, ``run_config``
    and ``logdir``; ``last_eval`` is the newest evaluation row (``step``, ``eval_return``);
    ``solved_wall`` the wall time at which ``stop_return`` was reached, or None. The row
    holds ``final``, ``step``, ``wall_time``, ``train_wall_time`` (before the export),
    ``solve_wall_time``, ``solve_step`` and ``eval_return``, then ``extra`` in order.
    """
    trainer.save()
    train_wall = trainer.wall_time()
    if trainer.run_config.export_policy:
        path = os.path.join(trainer.logdir, "policy")
        partial = os.path.isdir(path) and not os.path.islink(path) and os.listdir(path)
        if partial and not os.path.isfile(os.path.join(path, "saved_model.pb")):
            shutil.rmtree(path)  # the run's own export, cut by a kill before atomic export
        if export is not None:
            export(path)
        else:
            from tfagents_vtrace.export import export_policy

            export_policy(network, path, overwrite=True)
    trainer.metrics.close()
    final = {
        "final": True,
        "step": int(step),
        "wall_time": round(trainer.wall_time(), 3),
        "train_wall_time": round(train_wall, 3),
        "solve_wall_time": solved_wall,
        "solve_step": last_eval["step"] if solved_wall is not None else None,
        "eval_return": last_eval["eval_return"],
        **extra,
    }
    write_config(trainer.logdir, final, name="final.json")
    return final


# ---------------------------------------------------------------- starting and stopping runs
# Entries a run writes into its directory, as glob patterns (``prepare_logdir(overwrite=True)``
# removes them from a run's directory).
_RUN_ENTRIES = (
    "config.json",
    "metrics.jsonl",
    "final.json",
    "checkpoints",
    "policy",
    "events.out.tfevents.*",
    "config.before-resume-*.json",
    "policy.tmp-*",  # an export killed before its rename (export_target.write_atomically)
    "policy.old-*",
)
# What a write killed before its rename leaves: not counted as files, removed with the run.
_PARTIAL_WRITES = ("config.json.tmp", "final.json.tmp", "metrics.jsonl.tmp")
# Config entries that must match to resume: the checkpoint holds their variables.
_STRUCTURAL = ("agent", "env_id", "network_config")


def has_checkpoint(logdir: str) -> bool:
    """Whether ``DIR/checkpoints`` holds a checkpoint (``tf.train.CheckpointManager`` state)."""
    ckpt_dir = os.path.join(logdir, "checkpoints")
    return os.path.exists(os.path.join(ckpt_dir, "checkpoint")) and bool(
        glob.glob(os.path.join(glob.escape(ckpt_dir), "ckpt-*.index"))
    )


def _is_run_config(logdir: str) -> bool:
    """Whether ``DIR/config.json`` is a run's (a JSON object naming an agent and an env)."""
    path = os.path.join(logdir, "config.json")
    if os.path.islink(path) or not os.path.isfile(path):
        return False
    try:
        with open(path) as f:
            config = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and "agent" in config and "env_id" in config


def _matching(logdir: str, patterns: tuple[str, ...]) -> list[str]:
    """The paths in ``logdir`` whose names match ``patterns`` (symlinks included)."""
    root = glob.escape(logdir)
    return sorted({p for pattern in patterns for p in glob.glob(os.path.join(root, pattern))})


def _remove(path: str) -> None:
    """Removes ``path``; a symbolic link is unlinked, never followed."""
    if os.path.islink(path) or not os.path.isdir(path):
        os.unlink(path)
    else:
        shutil.rmtree(path)


def _differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    """``"key: old -> new"`` for every leaf that differs between two config.json dicts."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new)):
            name = f"{prefix}.{key}" if prefix else str(key)
            out += _differences(old.get(key), new.get(key), name)
        return out
    return [] if old == new else [f"{prefix}: {old!r} -> {new!r}"]


def prepare_logdir(logdir: str, config: dict, *, overwrite: bool = False) -> str:
    """Checks that a run with ``config`` may start in ``logdir``; returns ``"new"`` or
    ``"resume"``.

    ``config`` is the :func:`run_config_dict` of the new run. ``overwrite=True`` removes the
    entries of a previous run (``config.json``, ``metrics.jsonl``, ``final.json``,
    ``checkpoints/``, ``policy/``, TensorBoard event files, ``config.before-resume-*.json``,
    partial ``*.tmp`` writes; a symbolic link is unlinked, never followed) and starts
    afresh, but only when ``config.json`` shows the directory is a run's: other files are
    kept, and any of those names in a directory that is not a run's is refused. In a
    multi-worker cluster only the chief calls it (the others write elsewhere, and would see
    the chief's new files). The run lock's file (``.lock``, :mod:`~tfagents_vtrace.runtime.
    run_lock`, taken by ``experiments.train`` before this call) is not counted as a file.

    Raises:
      ValueError: naming ``logdir``, when it holds files but no checkpoint, or a checkpointed
        run whose agent, environment or network differs from ``config``; with ``overwrite``,
        when it holds a run's entry names but is not a run's directory.
    """
    if not os.path.isdir(logdir):
        if os.path.exists(logdir):
            raise ValueError(f"logdir: {logdir!r} exists and is not a directory")
        return "new"
    ignored = {LOCK_NAME, *_PARTIAL_WRITES}
    entries = sorted(
        e
        for e in os.listdir(logdir)
        if e not in ignored and (e != "checkpoints" or has_checkpoint(logdir))
    )
    if overwrite:
        owned = _matching(logdir, _RUN_ENTRIES)
        if owned and not _is_run_config(logdir):
            names = [os.path.basename(p) for p in owned]
            shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            raise ValueError(
                f"logdir: {logdir!r} holds {shown} but no run's config.json; overwrite "
                "(--overwrite) removes only a run's own entries: move them, or choose another "
                "logdir"
            )
        for path in owned + _matching(logdir, _PARTIAL_WRITES):
            _remove(path)
        return "new"
    if not entries:
        return "new"
    if not has_checkpoint(logdir):
        shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
        raise ValueError(
            f"logdir: {logdir!r} already holds files ({shown}) but no checkpoint to resume; "
            "choose another logdir, or overwrite=True (--overwrite) to replace that run"
        )
    old, new = read_config(logdir), config
    structural = _differences(
        {k: old.get(k) for k in _STRUCTURAL}, {k: new.get(k) for k in _STRUCTURAL}
    )
    if structural:
        raise ValueError(
            f"logdir: {logdir!r} holds a run of agent={old.get('agent')!r} on "
            f"env={old.get('env_id')!r} whose checkpoint this command cannot resume; it differs "
            f"in {'; '.join(structural)}. Choose another logdir, or overwrite=True (--overwrite)"
        )
    changed = _differences(old, new)
    if changed:
        n = 1
        while os.path.exists(os.path.join(logdir, f"config.before-resume-{n}.json")):
            n += 1
        kept = os.path.join(logdir, f"config.before-resume-{n}.json")
        shutil.copyfile(os.path.join(logdir, "config.json"), kept)
        print(
            f"Resuming {logdir} with a changed config ({'; '.join(changed)}); the previous "
            f"config is kept as {os.path.basename(kept)}.",
            file=sys.stderr,
        )
    return "resume"


def finished_row(logdir: str, run, step: int) -> dict | None:
    """The final row of the run in ``logdir`` if it already ended at ``step`` (the restored
    checkpoint's) and ``run`` asks for nothing more; else None.

    Nothing more: ``step >= run.total_steps``, or the run was solved (``solve_step``) and
    ``run.stop_return`` is at most the return it reached. The row gains
    ``already_finished: True``.
    """
    path = os.path.join(logdir, "final.json")
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            final = json.load(f)
    except (OSError, json.JSONDecodeError):
        return None
    if final.get("step") != step:
        return None
    solved = (
        final.get("solve_step") is not None
        and run.stop_return is not None
        and final.get("eval_return") is not None
        and final["eval_return"] >= run.stop_return
    )
    if step < run.total_steps and not solved:
        return None
    return {**final, "already_finished": True}


_STOP = threading.Event()


def request_stop() -> None:
    """Asks every training loop of this process to stop at its next step: the safe way for a
    signal handler (``experiments.train`` calls it on Ctrl-C and SIGTERM), since an exception
    raised inside TensorFlow's C++ calls can crash the process."""
    _STOP.set()


def stop_requested() -> bool:
    return _STOP.is_set()


def check_stop() -> None:
    """Raises ``KeyboardInterrupt`` once :func:`request_stop` was called (clearing the
    request); training loops call it once per step, inside :func:`checkpoint_on_interrupt`."""
    if _STOP.is_set():
        _STOP.clear()
        raise KeyboardInterrupt("stop requested")


class RunInterrupted(KeyboardInterrupt):
    """Training stopped by Ctrl-C or SIGTERM after a checkpoint was written.

    Attributes: ``step`` (environment steps saved) and ``path`` (the checkpoint).
    """

    def __init__(self, step: int, path: str):
        super().__init__(f"interrupted at step {step}; checkpoint {path}")
        self.step, self.path = step, path


@contextlib.contextmanager
def checkpoint_on_interrupt(trainer, step: Callable[[], int]):
    """Inside, a ``KeyboardInterrupt`` first saves ``trainer`` (``save()``, then its
    ``metrics`` are closed) and is re-raised as :class:`RunInterrupted`; ``step()`` gives the
    environment steps it saved. Re-running the same command resumes from that checkpoint."""
    try:
        yield
    except RunInterrupted:
        raise
    except KeyboardInterrupt:
        path = trainer.save()
        trainer.metrics.close()
        raise RunInterrupted(int(step()), path) from None
