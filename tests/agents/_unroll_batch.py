"""A hand-made batch in the runtime's unroll layout, shared by the IMPALA and A2C tests."""

import numpy as np


def unroll_batch(rng, t, b, num_actions, truncate=(), terminate=()):
    """``T = t`` steps of ``B = b`` envs with 3-dim observations and ``num_actions`` actions.

    ``truncate``/``terminate`` hold ``(env, step)`` pairs whose episode ends at that step: the
    next observation is a reset step (``reset``, zero reward) and the one after it is
    ``first``.
    """
    batch = {
        "observation": rng.normal(size=(t + 1, b, 3)).astype(np.float32),
        "first": np.zeros((t + 1, b), bool),
        "reset": np.zeros((t + 1, b), bool),
        "prev_action": np.zeros((t + 1, b), np.int32),
        "prev_reward": np.zeros((t + 1, b), np.float32),
        "action": rng.integers(0, num_actions, (t, b)).astype(np.int32),
        "reward": rng.normal(size=(t, b)).astype(np.float32),
        "terminated": np.zeros((t, b), bool),
        "truncated": np.zeros((t, b), bool),
        "policy": {"logits": rng.normal(size=(t, b, num_actions)).astype(np.float32)},
        "state": (),
    }
    batch["first"][0] = True
    for key, pairs in (("truncated", truncate), ("terminated", terminate)):
        for env, step in pairs:
            batch[key][step, env] = True
            batch["reset"][step + 1, env] = True  # the next observation is the final one
            if step + 1 < t:
                batch["reward"][step + 1, env] = 0.0  # reset steps earn nothing
            if step + 2 <= t:
                batch["first"][step + 2, env] = True
    return batch
