"""``tf.distribute`` strategy selection for the learners.

* "default": the default (single-device) strategy; the train step may be XLA-compiled.
* "mirrored": ``MirroredStrategy`` over every logical CPU/GPU device. On a CPU-only machine
  call :func:`configure_cpu_devices` first (before TensorFlow initialises) to split the CPU
  into N logical devices, which is how the tests exercise it.
* "multi_worker": ``MultiWorkerMirroredStrategy``, configured by the ``TF_CONFIG``
  environment variable (a single worker when it is unset).
"""

from __future__ import annotations

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
