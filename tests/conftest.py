"""Test-session setup shared by every test module.

TensorFlow's logical devices can only be configured before the runtime initialises, so the
two logical CPU devices used by the MirroredStrategy tests are created here, once per test
process, before any test touches TensorFlow.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

_cpus = tf.config.list_physical_devices("CPU")
try:
    tf.config.set_logical_device_configuration(
        _cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2
    )
except RuntimeError:  # already initialised (e.g. a plugin touched TF first)
    pass


@pytest.fixture
def rng():
    """A numpy Generator with a fixed seed, for reproducible random test inputs."""
    return np.random.default_rng(0)
