"""Run modes every op test parameterises over: eager, graph, and XLA-compiled graph."""

import tensorflow as tf

RUN_MODES = ("eager", "function", "xla")


def run_in_mode(fn, mode):
    """Wraps ``fn`` for the given run mode (one of RUN_MODES)."""
    if mode == "eager":
        return fn
    if mode == "function":
        return tf.function(fn)
    if mode == "xla":
        return tf.function(fn, jit_compile=True)
    raise ValueError(f"unknown mode {mode!r}")
