"""A torso of your own over a set of entities: self-attention on a Dict observation
(docs/guide/extending.md), and a small game to train it on.

``Pick-v0``: each step shows ``entities``, ``N`` entities of ``F`` features each (a
``Box((N, F))``), and ``goal``, a weight vector (``Box((F,))``). The action picks an entity
(``Discrete(N)``); the reward is 1 when it is the entity whose features score highest against
the goal, else 0; an episode is 10 picks. Picking at random earns ``10 / N``. The right pick
depends on the goal and on every entity at once: the relation attention computes.

``EntityAttention`` embeds each entity with the goal beside it, lets the entities attend to
each other (``keras.layers.MultiHeadAttention``, one block with a residual and LayerNorm),
and returns the per-entity codes flattened, in entity order, so that the policy head can name
an entity by its place::

    import tfagents_vtrace as tv
    tv.train("impala", env="attention_torso:Pick-v0", logdir="runs/pick",
             torso="attention_torso:EntityAttention")

    tfv-train --agent=impala --env=attention_torso:Pick-v0 \\
        --torso=attention_torso:EntityAttention --logdir=runs/pick

(with this file's directory on PYTHONPATH). The exported policy holds the attention layers and
loads without this file.

    python examples/attention_torso.py --logdir=runs/pick [--total_steps=60000]
"""

import gymnasium as gym
import keras
import numpy as np

N, F = 5, 4


class EntityAttention(keras.layers.Layer):
    """``{"entities": [B, N, F], "goal": [B, F]}`` -> ``[B, N * width]``: each entity
    embedded with the goal, one self-attention block over the entities, flattened."""

    def __init__(self, width=32, heads=2, **kw):
        super().__init__(**kw)
        self.width = width
        self.embed = keras.layers.Dense(width, activation="relu")
        self.attention = keras.layers.MultiHeadAttention(heads, width // heads)
        self.norm = keras.layers.LayerNormalization()
        self.out = keras.layers.Dense(width, activation="relu")
        self.flatten = keras.layers.Flatten()

    def call(self, observation):
        entities, goal = observation["entities"], observation["goal"]
        goal = keras.ops.repeat(keras.ops.expand_dims(goal, 1), keras.ops.shape(entities)[1], 1)
        x = self.embed(keras.ops.concatenate([entities, goal], axis=-1))
        x = self.norm(x + self.attention(x, x))
        return self.flatten(self.out(x))


class Pick(gym.Env):
    """Pick the entity scoring highest against the goal (module docstring)."""

    metadata = {"render_modes": []}

    def __init__(self, render_mode=None):
        self.observation_space = gym.spaces.Dict(
            {
                "entities": gym.spaces.Box(-1.0, 1.0, (N, F), np.float32),
                "goal": gym.spaces.Box(-1.0, 1.0, (F,), np.float32),
            }
        )
        self.action_space = gym.spaces.Discrete(N)
        self._t = 0

    def _observe(self):
        self._obs = {
            "entities": self.np_random.uniform(-1, 1, (N, F)).astype(np.float32),
            "goal": self.np_random.uniform(-1, 1, (F,)).astype(np.float32),
        }
        return self._obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self._observe(), {}

    def step(self, action):
        best = int(np.argmax(self._obs["entities"] @ self._obs["goal"]))
        reward = float(int(action) == best)
        self._t += 1
        return self._observe(), reward, False, self._t >= 10, {}


if "Pick-v0" not in gym.registry:
    gym.register("Pick-v0", entry_point=Pick)


if __name__ == "__main__":
    import argparse

    import tfagents_vtrace as tv

    parser = argparse.ArgumentParser()
    parser.add_argument("--logdir", default="runs/pick")
    parser.add_argument("--total_steps", type=int, default=60_000)
    args = parser.parse_args()
    # Run as a script this file is __main__: the torso and the game are named by path.
    final = tv.train(
        "impala", env="attention_torso:Pick-v0", logdir=args.logdir,
        torso="attention_torso:EntityAttention", total_steps=args.total_steps, seed=0,
    )  # fmt: skip
    print(f"greedy return at the end: {final['eval_return']} (random: {10 / N:.1f}, best: 10)")
