"""Acting policies: one batched step over all of an actor's environments per call.

IMPALA actors (Espeholt et al. 2018, https://arxiv.org/abs/1802.01561) run the current
policy on many environments at once. Two implementations share one interface:

* :class:`TFPolicy`: a private copy of the network and one compiled ``tf.function`` step
  (any torso, LSTM core, continuous actions). Each call costs the ~100-200 us ``tf.function``
  overhead, so all environments go through one call.
* :class:`NumpyMLPPolicy`: for feed-forward MLP categorical policies only, the same forward
  pass in numpy (about 10x cheaper per call at CartPole sizes). It reads the weights of the
  network's own layers, so it stays exact; tests compare it with the TF network.

Both take and return numpy arrays: ``step(obs [B, ...], first [B], prev_action [B(, A)],
prev_reward [B], state) -> (action [B(, A)], policy params dict of [B, ...], new state)``,
and ``set_weights(list_of_numpy)`` in ``network.get_weights()`` order.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfagents_vtrace.networks import NetInputs

_NP_ACTIVATIONS = {
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0.0),
    "linear": lambda x: x,
    None: lambda x: x,
}


class TFPolicy:
    """Compiled one-step policy over a batch of environments (see module docstring).

    Args:
      network: the actor's own network (an ``ActorCriticNetwork``); its weights are replaced
        by ``set_weights``.
      greedy: act with the distribution's mode instead of sampling.
      seed: seeds the stateless sampling (the same seed gives the same actions).
      jit_compile: compile the step with XLA.
    """

    def __init__(self, network, greedy: bool = False, seed: int = 0, jit_compile: bool = False):
        self.network = network
        self.greedy = greedy
        self._seed = int(seed)
        self._calls = 0
        self._step = tf.function(self._tf_step, jit_compile=jit_compile, autograph=False)

    def initial_state(self, batch_size: int) -> tuple[np.ndarray, ...]:
        """Zero recurrent state as numpy arrays (``()`` for feed-forward networks)."""
        return tuple(s.numpy() for s in self.network.initial_state(batch_size))

    def set_weights(self, weights: list[np.ndarray]) -> None:
        """Loads weights in ``network.get_weights()`` order."""
        self.network.set_weights(weights)

    def _tf_step(self, obs, first, prev_action, prev_reward, state, seed):
        out = self.network(NetInputs(obs, first, prev_action, prev_reward), state)
        if self.greedy:
            action = self.network.greedy_action(out.policy)
        elif "logits" in out.policy:
            logits = out.policy["logits"]
            action = tf.random.stateless_categorical(logits, 1, seed, dtype=tf.int32)[:, 0]
        else:
            action = self.network.distribution(out.policy).sample(seed=seed)
        return action, out.policy, out.state

    def step(self, obs, first, prev_action, prev_reward, state):
        """One batched step; returns numpy ``(action, policy_params, new_state)``."""
        self._calls += 1
        seed = np.array([self._seed, self._calls], np.int64)
        action, policy, new_state = self._step(
            obs, first, prev_action, prev_reward, tuple(state), seed
        )
        return (
            action.numpy(),
            {k: v.numpy() for k, v in policy.items()},
            tuple(s.numpy() for s in new_state),
        )


class NumpyMLPPolicy:
    """Numpy forward pass of a feed-forward MLP categorical network (see module docstring)."""

    def __init__(self, network, greedy: bool = False, seed: int = 0):
        if not self.supports(network):
            raise ValueError("network: NumpyMLPPolicy needs a feed-forward MLP categorical net")
        self.greedy = greedy
        self._rng = np.random.default_rng(seed)
        self._act = _NP_ACTIVATIONS[network.config.activation]
        index = {id(v): i for i, v in enumerate(network.weights)}
        pairs = [(d.kernel, d.bias) for d in network.torso.dense_layers]
        head = network.policy_head.logits
        pairs.append((head.kernel, head.bias))
        self._index = [(index[id(k)], index[id(b)]) for k, b in pairs]
        self._layers: list[tuple[np.ndarray, np.ndarray]] = []
        self.set_weights(network.get_weights())

    @staticmethod
    def supports(network) -> bool:
        """True for an MLP torso, no core or meta-RL inputs, categorical head, float obs."""
        cfg = getattr(network, "config", None)
        return bool(
            cfg is not None
            and cfg.torso == "mlp"
            and cfg.core is None
            and not (cfg.use_prev_action or cfg.use_prev_reward)
            and cfg.q_head is None
            and getattr(network, "policy_kind", None) == "categorical"
            and getattr(network, "obs_categories", None) is None
            and network.observation_spec.dtype == tf.float32
            and cfg.activation in _NP_ACTIVATIONS
        )

    def initial_state(self, batch_size: int) -> tuple:
        """Feed-forward: the empty state."""
        return ()

    def set_weights(self, weights: list[np.ndarray]) -> None:
        """Loads weights in ``network.get_weights()`` order."""
        self._layers = [
            (np.asarray(weights[k], np.float32), np.asarray(weights[b], np.float32))
            for k, b in self._index
        ]

    def logits(self, obs: np.ndarray) -> np.ndarray:
        """Policy logits ``[B, A]`` of observations ``[B, ...]``."""
        h = np.asarray(obs, np.float32).reshape(len(obs), -1)
        for w, b in self._layers[:-1]:
            h = self._act(h @ w + b)
        w, b = self._layers[-1]
        return h @ w + b

    def step(self, obs, first, prev_action, prev_reward, state):
        """One batched step; returns numpy ``(action, {"logits": ...}, ())``."""
        logits = self.logits(obs)
        if self.greedy:
            action = np.argmax(logits, axis=-1)
        else:  # Gumbel-max sampling
            u = self._rng.random(logits.shape, dtype=np.float32)
            action = np.argmax(logits - np.log(-np.log(u + 1e-20) + 1e-20), axis=-1)
        return action.astype(np.int32), {"logits": logits}, ()


def make_policy(network, impl: str = "auto", greedy: bool = False, seed: int = 0):
    """``impl``: "tf", "numpy" (MLP categorical only) or "auto" (numpy when supported)."""
    if impl not in ("auto", "tf", "numpy"):
        raise ValueError(f"policy_impl: expected 'auto', 'tf' or 'numpy', received {impl!r}")
    if impl == "numpy" or (impl == "auto" and NumpyMLPPolicy.supports(network)):
        return NumpyMLPPolicy(network, greedy=greedy, seed=seed)
    return TFPolicy(network, greedy=greedy, seed=seed)
