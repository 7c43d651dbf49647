"""``tf.distribute`` strategy selection for the learners.

* "default": the default (single-device) strategy; the train step may be XLA-compiled.
* "mirrored": ``MirroredStrategy`` over every logical CPU/GPU device. On a CPU-only machine
  call :func:`configure_cpu_devices` first (before TensorFlow initialises) to split the CPU
  into N logical devices, which is how the tests exercise it.
* "multi_worker": ``MultiWorkerMirroredStrategy``, configured by the ``TF_CONFIG``
  environment variable (a single worker when it is unset).

Run directories under "multi_worker" follow TensorFlow's multi-worker custom-training-loop
guide (``tutorials/distribute/multi_worker_with_ctl``): every worker takes part in saving
(saving may involve collectives, and saving only on the chief can deadlock), but workers
must not write to the same paths, so only the chief (:func:`is_chief`) writes the run
directory (config.json, metrics.jsonl, TensorBoard events, checkpoints, policy/); every other
worker writes the same files into a temporary directory of its own (:func:`write_dir`,
removed when the process exits) and restores from the chief's checkpoints
(:func:`restore_checkpoint`), so all workers resume from the same step.
"""

from __future__ import annotations

import atexit
import dataclasses
import shutil
import tempfile

import tensorflow as tf

STRATEGIES = ("default", "mirrored", "multi_worker")


def configure_cpu_devices(num_devices: int) -> None:
    """Splits the first physical CPU into ``num_devices`` logical devices (before TF init)."""
    if num_devices < 1:
        raise ValueError(f"num_devices: expected >= 1, received {num_devices}")
    cpus = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration()] * num_devices
        )
    except RuntimeError as error:  # already initialised: keep what exists
        current = len(tf.config.list_logical_devices("CPU"))
        if current != num_devices:
            raise RuntimeError(
                f"cannot create {num_devices} logical CPUs: TensorFlow is already initialised "
                f"with {current}"
            ) from error


def make_strategy(name: str) -> tf.distribute.Strategy:
    """The strategy called ``name`` (one of STRATEGIES)."""
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        devices = [d.name for d in tf.config.list_logical_devices("GPU")]
        if not devices:
            devices = [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(
            devices=devices, cross_device_ops=tf.distribute.ReductionToOneDevice()
        )
    if name == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise ValueError(f"strategy: expected one of {STRATEGIES}, received {name!r}")


@dataclasses.dataclass(frozen=True)
class WorkerRole:
    """Where this process sits in a multi-worker cluster (``TF_CONFIG``'s ``task``)."""

    task_type: str | None = None
    """"chief", "worker", ... or None outside a cluster."""
    task_id: int = 0
    """Index of the task within its type."""
    is_chief: bool = True
    """Whether this process writes the run directory (see :func:`is_chief`)."""

    @property
    def seed_offset(self) -> int:
        """Added to the actors' base seed so each worker collects different experience:
        0 for the chief (single-process runs keep their seeds), ``(task_id + 1) * 1_000_033``
        for every other task (distinct whether or not the cluster has a "chief" job)."""
        return 0 if self.is_chief else (self.task_id + 1) * 1_000_033


def is_chief(task_type: str | None, task_id: int | None, cluster: dict | None) -> bool:
    """TensorFlow's chief rule: no cluster task, the "chief" task, or worker 0 when the
    cluster has no "chief" job.

    Args:
      task_type: ``cluster_resolver.task_type`` (None outside a cluster).
      task_id: ``cluster_resolver.task_id``.
      cluster: ``cluster_resolver.cluster_spec().as_dict()`` (job name -> addresses).
    """
    if task_type is None or task_type == "chief":
        return True
    return task_type == "worker" and int(task_id or 0) == 0 and "chief" not in (cluster or {})


def role_from_resolver(resolver) -> WorkerRole:
    """The :class:`WorkerRole` of a ``tf.distribute.cluster_resolver.ClusterResolver``
    (None: not in a cluster, the chief)."""
    if resolver is None or resolver.task_type is None:
        return WorkerRole()
    cluster = resolver.cluster_spec().as_dict()
    task_id = int(resolver.task_id or 0)
    return WorkerRole(resolver.task_type, task_id, is_chief(resolver.task_type, task_id, cluster))


def role_from_tf_config() -> WorkerRole:
    """The role ``TF_CONFIG`` (environment variable) gives this process, read with
    ``TFConfigClusterResolver`` as ``MultiWorkerMirroredStrategy`` does (no server started)."""
    return role_from_resolver(tf.distribute.cluster_resolver.TFConfigClusterResolver())


def worker_role(strategy: tf.distribute.Strategy | None) -> WorkerRole:
    """The role of this process under ``strategy``: from its cluster resolver for
    multi-worker strategies, the chief for every other strategy (and for None)."""
    return role_from_resolver(getattr(strategy, "cluster_resolver", None))


def any_worker(strategy: tf.distribute.Strategy | None, flag: bool) -> bool:
    """Whether ``flag`` is true on any worker of ``strategy``'s cluster: a collective
    all-reduce, so every worker must call it at the same point of its loop (a stop signal
    reaches the workers at different moments; they stop at the same update)."""
    strategy = strategy or tf.distribute.get_strategy()
    value = strategy.run(lambda: tf.constant(1.0 if flag else 0.0))
    return bool(strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None).numpy() > 0)


def write_dir(logdir: str, role: WorkerRole) -> str:
    """Where this process writes run files: ``logdir`` for the chief; for any other worker a
    fresh temporary directory outside ``logdir`` (deleted when the process exits)."""
    if role.is_chief:
        return logdir
    path = tempfile.mkdtemp(prefix=f"tfagents_vtrace_{role.task_type}{role.task_id}_")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def restore_checkpoint(checkpointer, logdir: str, role: WorkerRole, accept=None) -> bool:
    """Restores the latest checkpoint of run directory ``logdir`` into ``checkpointer`` (a
    ``checkpointing.Checkpointer``, which may write elsewhere); returns whether one was restored.

    The chief restores through its own manager (``Checkpointer.restore(accept)``: the newest
    intact checkpoint, damaged newer ones moved aside); other workers read the chief's
    ``logdir/checkpoints`` so every worker resumes from the same step.
    """
    if role.is_chief:
        return checkpointer.restore(accept)
    from tfagents_vtrace.runtime.rundir.checkpointing import has_checkpoint, intact_checkpoint

    if not has_checkpoint(logdir):
        return False
    with intact_checkpoint(logdir) as latest:
        checkpointer.checkpoint.restore(latest).assert_existing_objects_matched()
    return True
