"""Test-session setup shared by every test module.

TensorFlow's logical devices can only be configured before the runtime initialises, so the
two logical CPU devices used by the MirroredStrategy tests are created here, once per test
process, before any test touches TensorFlow. ``waits`` records the sleeps of a test's own
thread (environment failures' backoffs) instead of sleeping them.
"""

import os
import threading
import time

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


@pytest.fixture
def waits(monkeypatch):
    """The backoffs the test's own thread sleeps, recorded instead of slept. ``time.sleep``
    is one function for the whole process: a thread another test left behind (a watchdog's
    poll) keeps sleeping for real, rather than spinning and filling the list."""
    recorded, real_sleep, own = [], time.sleep, threading.get_ident()

    def sleep(seconds):
        if threading.get_ident() == own:
            recorded.append(seconds)
        else:
            real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    return recorded


def pytest_collection_modifyitems(config, items):
    """Modules holding a test marked ``slow`` (subprocesses, Ray, training runs) come first,
    each module's tests kept together and in order. ``make test``'s ``--dist loadgroup``
    hands out the xdist groups first, then single tests in this order: the long ones start
    early and short ones fill the end, rather than one worker finishing a long test alone
    while the other waits."""
    slow = {item.module.__name__ for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.module.__name__ not in slow)  # stable: order kept
