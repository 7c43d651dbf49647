"""A torso of your own (an MLP with layer normalisation) and a core of your own (a GRU cell)
for the actor-critic network (docs/guide/extending.md).

Train with it from Python (the class, or its path)::

    import tfagents_vtrace as tv
    from layernorm_torso import LayerNormMLP

    tv.train("impala", env="CartPole-v1", logdir="runs/ln", torso=LayerNormMLP)

or from the command line, with this file's directory on PYTHONPATH (the module is imported
because you named it)::

    tfv-train --config=impala_cartpole --torso=layernorm_torso:LayerNormMLP --logdir=runs/ln

A run records the torso as ``"layernorm_torso:LayerNormMLP"``; resuming the run, or
``tfv-export`` of it, needs the same ``--torso`` again (a run directory never imports code).
The exported policy holds the layers and loads without this file.

    python examples/layernorm_torso.py --logdir=runs/ln [--total_steps=100000]
"""

import keras


class LayerNormMLP(keras.layers.Layer):
    """Dense -> LayerNorm -> tanh, twice: ``[N, *obs]`` float32 -> ``[N, 64]``.

    The network gives it the observation as float32 (uint8 images scaled to [0, 1], Discrete
    ids one-hot; a Dict observation as the dict of such tensors) and reads ``[N, features]``.
    """

    def __init__(self, sizes=(64, 64), **kw):
        super().__init__(**kw)
        self.flatten = keras.layers.Flatten()
        self.blocks = []
        for i, size in enumerate(sizes):
            dense = keras.layers.Dense(size, kernel_initializer=keras.initializers.Orthogonal())
            norm = keras.layers.LayerNormalization()
            setattr(self, f"dense_{i}", dense)  # attributes: checkpoints follow them
            setattr(self, f"norm_{i}", norm)
            self.blocks.append((dense, norm))

    def call(self, x):
        x = self.flatten(x)
        for dense, norm in self.blocks:
            x = keras.activations.tanh(norm(dense(x)))
        return x


class GRU64(keras.layers.GRUCell):
    """A recurrent core of your own: a GRU cell of 64 units (``state_size`` 64, one state
    tensor ``[B, 64]``, reset to zeros where an episode starts)."""

    def __init__(self, **kw):
        super().__init__(64, **kw)


if __name__ == "__main__":
    import argparse

    import tfagents_vtrace as tv

    parser = argparse.ArgumentParser()
    parser.add_argument("--logdir", default="runs/layernorm_cartpole")
    parser.add_argument("--total_steps", type=int, default=100_000)
    args = parser.parse_args()
    # The class must be importable by its path: from this file run as a script it is
    # __main__.LayerNormMLP, so it is passed by its module's name instead.
    final = tv.train(
        "impala", env="CartPole-v1", logdir=args.logdir, total_steps=args.total_steps,
        torso="layernorm_torso:LayerNormMLP", seed=0,
    )  # fmt: skip
    print("greedy return at the end:", final["eval_return"])
