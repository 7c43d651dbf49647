"""SavedModel export of a policy module, loadable with plain TensorFlow.

The SavedModel holds the module's ``tf.function`` s and serving signatures
(:mod:`tfagents_vtrace.export.policy_module`); it needs neither this package nor TensorFlow
Probability to load and run (sampling is traced into graph ops)::

    policy = tf.saved_model.load(path)
    state = policy.get_initial_state(batch_size=tf.constant(B))
    out = policy.action(observation=obs, first=first, prev_action=prev_action,
                        prev_reward=prev_reward, state=state)

It is written beside ``path`` and renamed into place (:mod:`tfagents_vtrace.export.target`).
Every format takes a Dict / Tuple observation here (one input per leaf in the serving
signatures); LiteRT and ONNX do not.
"""

from __future__ import annotations

import os

import tensorflow as tf

from tfagents_vtrace.export.actor_critic import as_policy_module
from tfagents_vtrace.export.target import check_export_path, write_atomically


def export_policy(policy, path: str | os.PathLike, *, overwrite: bool = False) -> str:
    """Writes ``policy`` as a SavedModel at ``path``; a failed save keeps the previous one.

    Args:
      policy: a :class:`~tfagents_vtrace.export.policy_module.PolicyModule` or a built
        :class:`~tfagents_vtrace.networks.ActorCriticNetwork` (``make_network`` output).
      path: output directory.
      overwrite: replace an existing SavedModel at ``path``.
    Returns:
      ``path`` as a string.
    Raises:
      ValueError: ``policy`` is neither; ``path`` is a file, a symbolic link or a non-empty
        directory that is not a SavedModel (even with ``overwrite``), or a SavedModel and
        ``overwrite`` is False.
    """
    path = os.fspath(path)
    module = as_policy_module(policy)
    check_export_path(path, overwrite)  # before anything is traced

    def write(directory: str) -> None:
        tf.saved_model.save(module, directory, signatures=module.serving_signatures())

    return write_atomically(path, write, overwrite=overwrite)
