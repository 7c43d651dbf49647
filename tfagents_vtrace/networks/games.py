"""Torsos for the shipped configs' games, named by import path like a torso of one's own.

``SpreadRelations`` is the torso of ``configs/impala_simple_spread.cfg``
(``--torso=tfagents_vtrace.networks.games:SpreadRelations``) for ``simple_spread`` (mpe2).

An agent of ``simple_spread`` (``N`` agents, ``N`` landmarks) observes, flat: its velocity (2),
its position (2), each landmark's offset from it (``N`` x 2), each other agent's offset from it
(``N - 1`` x 2), the others' messages (``N - 1`` x 2) and, with ``agent_ids``, its one-hot index
(``N``). Covering the landmarks well is an assignment: which landmark is whose depends on every
agent's distance to every landmark. ``SpreadRelations`` computes those offsets (landmark minus
agent, for this agent and each other one) and their lengths, makes each landmark an entity of
them, embeds each landmark with one layer they share, and reads the landmark codes (in
landmark order) with the agent's own velocity and index through two tanh layers of 128. The
config gives the value an MLP of its own on the observation, its loss clipped as PPO2's.
Results: docs/results/multi_agent.md.
"""

import keras

N = 3


def landmark_relations(x, n=N):
    """``[B, n, 3n]``: for each landmark (in landmark order), its offset from this agent and
    from each other agent (in the observation's order), each followed by its length
    (``dx, dy, length`` per agent), read from an agent's flat observation ``x`` ``[B, ...]``
    (module docstring)."""
    ops = keras.ops
    landmarks = ops.reshape(x[:, 4 : 4 + 2 * n], (-1, n, 1, 2))  # from this agent
    others = ops.reshape(x[:, 4 + 2 * n : 4 + 2 * n + 2 * (n - 1)], (-1, 1, n - 1, 2))
    offsets = ops.concatenate([landmarks, landmarks - others], axis=2)  # [B, n, n, 2]
    lengths = ops.sqrt(ops.sum(offsets * offsets, axis=-1, keepdims=True) + 1e-8)
    return ops.reshape(ops.concatenate([offsets, lengths], -1), (-1, n, 3 * n))


class SpreadRelations(keras.layers.Layer):
    """``[B, 4 + 2n + 4(n - 1) (+ n)]`` -> ``[B, 128]`` (module docstring). Given the run's
    ``observation_space``, a ``ValueError`` names any other width: a game of another ``N``
    needs ``n=`` to match."""

    def __init__(self, width=64, n=N, observation_space=None, **kw):
        super().__init__(**kw)
        shape = getattr(observation_space, "shape", None)
        if observation_space is not None and shape not in ((6 * n,), (7 * n,)):
            raise ValueError(
                f"torso: SpreadRelations reads simple_spread of {n} agents, whose observations "
                f"are ({6 * n},), or ({7 * n},) with agent_ids; received shape {shape}"
            )
        self.n, self.width = n, width
        self.embed = keras.layers.Dense(width, activation="tanh")  # shared by the landmarks
        self.flatten = keras.layers.Flatten()
        self.mlp = [keras.layers.Dense(128, activation="tanh") for _ in range(2)]

    def call(self, x):
        n = self.n
        codes = self.flatten(self.embed(landmark_relations(x, n)))
        tail = x[:, 4 + 2 * n + 4 * (n - 1) :]  # the agent's index, if given
        h = keras.ops.concatenate([codes, x[:, 0:2], tail], axis=-1)
        for layer in self.mlp:
            h = layer(h)
        return h
