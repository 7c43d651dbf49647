"""The composed actor-critic network: torso -> [meta-RL inputs] -> [LSTM core] -> heads.

One model serves acting (one step, ``net(inputs, state)``) and learning (``net.unroll`` over
``[T, B]``, resetting the LSTM where ``first``), as in IMPALA (Espeholt et al. 2018,
https://arxiv.org/abs/1802.01561) and the meta-RL A3C of Wang et al. 2016
(https://arxiv.org/abs/1611.05763), whose core input is ``[features, one_hot(a_{t-1}),
r_{t-1}, t]``. ``prev_action`` and ``prev_reward`` are zeroed inside the network where
``first`` is true, so an episode never sees the previous episode's last action or reward.

Shapes (one step / unroll): observation ``[B, *obs]`` / ``[T, B, *obs]`` (float32, uint8, or
int32 ids for a Discrete observation space; for a Dict / Tuple space a dict / tuple of such
leaves, encoded by ``multi_input.MultiInputTorso``), first ``[B]`` bool, prev_action ``[B]``
int32 (discrete), ``[B, A]`` float32 (Box) or ``[B, D]`` int32 (MultiDiscrete, MultiBinary),
prev_reward ``[B]`` float32. Outputs: policy params
``[B, A]`` each, value ``[B]`` (with the discrete Q head ``sum_a pi(a|s) Q(s, a)``, ACER's V),
q ``[B, A]`` (discrete Q head) or ``[B]`` (the stochastic dueling Q of the given ``actions``)
or None, state a tuple of float32 ``[B, k]`` (``()`` when feed-forward). Gradients flow into
every weight; inputs receive none. A Dict observation's ``action_mask`` entry masks the
policy's logits and is no input of the torso (``action_masks.py``).

A torso of one's own (``NetworkConfig.torso="package.module:Name"``,
:mod:`~tfagents_vtrace.networks.user_layers`) receives the observation preprocessed
(:func:`~tfagents_vtrace.networks.multi_input.preprocess`: float32, uint8 scaled, Discrete
one-hot, a Dict / Tuple as the nest of such leaves) and returns ``[N, features]``; a core of
one's own is a Keras RNN cell run by :class:`~tfagents_vtrace.networks.core.CellCore`. A
config's ``torso="auto"`` is resolved for the observation space here when a run has not
resolved it already (:func:`~tfagents_vtrace.networks.multi_input.auto_torso`).

ACER's unshared models (Wang et al. 2016, https://arxiv.org/abs/1611.01224; chainerrl's
``ACERSeparateModel`` / ``ACERSDNSeparateModel``): ``q_hidden_sizes`` gives the Q head (or
the SDN's V) an MLP of its own on the observation, and the SDN's advantage A(s, a) then
reads the flattened observation instead of the policy's features.
"""

from __future__ import annotations

import collections
import dataclasses

import gymnasium as gym
import keras
import numpy as np
import tensorflow as tf

from tfagents_vtrace.networks import (
    action_spaces,
    distributions,
    heads,
    multi_input,
    normalization,
    torsos,
    user_layers,
)
from tfagents_vtrace.networks.action_masks import (
    MASK_KEY,
    check_mask_spaces,
    mask_policy,
    without_mask,
)
from tfagents_vtrace.networks.config import CONV_TORSOS, NetworkConfig
from tfagents_vtrace.networks.core import CellCore, LSTMCore
from tfagents_vtrace.networks.precision import compute_dtype_choice

NetInputs = collections.namedtuple(
    "NetInputs", ["observation", "first", "prev_action", "prev_reward"]
)
NetOutput = collections.namedtuple("NetOutput", ["policy", "value", "q", "state"])


def _merge_time(x: tf.Tensor) -> tf.Tensor:
    """``[T, B, ...] -> [T * B, ...]``."""
    return tf.reshape(x, tf.concat([[-1], tf.shape(x)[2:]], 0))


def _split_time(x: tf.Tensor, t: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """``[T * B, ...] -> [T, B, ...]``."""
    return tf.reshape(x, tf.concat([[t, b], tf.shape(x)[1:]], 0))


class ActorCriticNetwork(keras.Model):
    """Actor-critic network built from a :class:`NetworkConfig` and gymnasium spaces.

    Attributes:
      config, observation_space, action_space: as given.
      is_discrete: Discrete action space. num_actions (discrete) or action_dim (Box,
        MultiDiscrete, MultiBinary: the action vector's length).
      policy_kind: "categorical" | "gaussian" | "tanh_gaussian" | "multi_categorical"
        (MultiDiscrete) | "multi_binary" (MultiBinary).
      observation_spec / action_spec: ``tf.TensorSpec`` of one (unbatched) observation/action
        (observation: a nest of them for a Dict / Tuple space).
      nested_observation: the observation space is a Dict / Tuple (the multi-input torso).
      nvec: the categories of each MultiDiscrete action dimension, else None.
      state_sizes: last-dim size of each state tensor (``()`` when feed-forward).
    """

    def __init__(self, config: NetworkConfig, observation_space, action_space, **kw):
        super().__init__(**kw)
        if config.torso == "auto":  # a config made outside a run (a run records the name)
            torso, _ = multi_input.auto_torso(observation_space)
            config = dataclasses.replace(config, torso=torso)
        self.config = config
        self.observation_space = observation_space
        self.action_space = action_space
        self._setup_spaces(config, observation_space, action_space)
        # A torso of one's own receives the preprocessed observation (_features).
        self.user_torso = user_layers.is_user_path(config.torso)
        # The conv torsos' arithmetic on this machine ("auto" resolved once, here) and why.
        self.cnn_compute_dtype, self.cnn_compute_dtype_reason = "float32", "not a conv torso"
        if config.torso in CONV_TORSOS:
            self.cnn_compute_dtype, self.cnn_compute_dtype_reason = compute_dtype_choice(
                config.cnn_compute_dtype
            )
            if config.cnn_compute_dtype != self.cnn_compute_dtype:
                config = dataclasses.replace(config, cnn_compute_dtype=self.cnn_compute_dtype)
        self.observation_normalizers = self._make_normalizers(config)
        self.torso = self._make_torso(config)
        self.core = None
        if config.core == "lstm":
            self.core = LSTMCore(config.lstm_size, config.use_time_step, config.time_step_scale)
        elif user_layers.is_user_path(config.core):
            self.core = CellCore(user_layers.build(config.core, observation_space, "core"))
        n_out = self.num_actions if self.is_discrete else self.action_dim
        if self.policy_kind == "categorical":
            self.policy_head = heads.CategoricalHead(n_out, config.policy_init_scale)
        elif self.policy_kind in ("multi_categorical", "multi_binary"):
            self.policy_head = action_spaces.policy_head(
                self.policy_kind, self.nvec, n_out, config.policy_init_scale
            )
        else:
            self.policy_head = heads.GaussianHead(
                n_out, config.gaussian_std, config.init_std, config.min_std,
                config.policy_init_scale,
            )  # fmt: skip
        self.q_head = None
        self.value_head = None
        self.value_torso = None
        if config.value_hidden_sizes is not None:
            self.value_torso = self._mlp(config.value_hidden_sizes)
        self.q_torso = self.adv_torso = None
        if config.q_hidden_sizes is not None:  # unshared Q (and SDN V) network
            self.q_torso = self._mlp(config.q_hidden_sizes)
        if config.q_head == "stochastic_dueling":
            self.q_head = heads.StochasticDuelingHead(
                config.sdn_hidden_sizes, config.mlp_activation
            )
            if self.q_torso is not None:  # A(s, a) on [observation, action]
                self.adv_torso = self._mlp(())
        elif config.q_head == "discrete":
            self.q_head = heads.DiscreteQHead(self.num_actions)  # V = sum_a pi(a) Q(s, a)
        else:
            self.value_head = heads.ValueHead()
        # Build every variable now (checkpoints, get_weights, MirroredStrategy scopes).
        actions = self.dummy_actions(1) if config.q_head == "stochastic_dueling" else None
        self(self.dummy_inputs(1), self.initial_state(1), actions=actions)

    def build(self, *args, **kwargs):
        """Sublayers build on the first call (made by ``__init__``)."""
        self.built = True

    # ----------------------------------------------------------------- construction helpers
    def _setup_spaces(self, config, observation_space, action_space) -> None:
        self.nested_observation = multi_input.is_nested(observation_space)
        self.nvec = None
        if self.nested_observation:  # a nest of specs; the multi-input torso encodes it
            self.obs_categories, self.input_scale = None, 1.0
            self._observation_spec = None  # built from the space (a Keras-untracked nest)
        elif isinstance(observation_space, gym.spaces.Discrete):
            self.obs_categories = int(observation_space.n)
            self.input_scale = 1.0
            self._observation_spec = tf.TensorSpec([], tf.int32, name="observation")
        elif isinstance(observation_space, gym.spaces.Box):
            self.obs_categories = None
            self.input_scale = torsos.input_scale_for(observation_space)
            dtype = tf.uint8 if observation_space.dtype == np.uint8 else tf.float32
            self._observation_spec = tf.TensorSpec(observation_space.shape, dtype, "observation")
        else:
            raise ValueError(
                "observation_space must be Box, Discrete, or a Dict / Tuple of those, got "
                f"{type(observation_space)}"
            )
        self.action_low = self.action_high = None
        if isinstance(action_space, gym.spaces.Discrete):
            self.is_discrete, self.num_actions, self.action_dim = True, int(action_space.n), None
            self.action_spec = tf.TensorSpec([], tf.int32, name="action")
            kind = "categorical" if config.policy_head == "auto" else config.policy_head
            if kind != "categorical":
                raise ValueError(f"policy_head={kind!r} needs a Box action space, got Discrete")
        elif isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
            self.is_discrete, self.num_actions = False, None
            self.action_dim = int(action_space.shape[0])
            self.action_spec = tf.TensorSpec([self.action_dim], tf.float32, name="action")
            self.action_low = np.asarray(action_space.low, np.float32)
            self.action_high = np.asarray(action_space.high, np.float32)
            kind = "gaussian" if config.policy_head == "auto" else config.policy_head
            if kind == "categorical":
                raise ValueError("policy_head='categorical' needs a Discrete action space, got Box")
            if kind == "tanh_gaussian":
                distributions.check_bounds(self.action_low, self.action_high)
        elif action_spaces.is_vector_discrete(action_space):
            self.is_discrete, self.num_actions = False, None
            kind, self.nvec, self.action_dim = action_spaces.setup(config, action_space)
            self.action_spec = tf.TensorSpec([self.action_dim], tf.int32, name="action")
        else:
            raise ValueError(
                "action_space must be Discrete, a rank-1 Box, MultiDiscrete or MultiBinary, "
                f"got {action_space!r}"
            )
        if config.q_head == "discrete" and not self.is_discrete:
            raise ValueError("q_head='discrete' needs a Discrete action space, got Box")
        if config.q_hidden_sizes is not None and config.q_head is None:
            raise ValueError(
                "NetworkConfig.q_hidden_sizes needs a Q head (an ACER network), got q_head=None"
            )
        self.policy_kind = kind
        check_mask_spaces(observation_space, action_space)

    def _mlp(self, hidden_sizes: tuple[int, ...]) -> keras.layers.Layer:
        """An MLP of its own on the observation (``()``: the flattened observation)."""
        cfg = self.config
        if self.nested_observation:  # every leaf flattened, images too
            return multi_input.MultiInputTorso(
                self.observation_space, cfg, hidden_sizes, use_conv=False
            )
        return torsos.MLPTorso(
            hidden_sizes, cfg.mlp_activation, self.obs_categories, self.input_scale
        )

    def _make_normalizers(self, config: NetworkConfig) -> dict:
        """``{leaf index: RunningNormalizer}`` of the observation's float leaves (in
        ``tf.nest.flatten`` order; an ``action_mask`` is no feature) when
        ``normalize_observations``, else empty."""
        if not config.normalize_observations:
            return {}
        leaves = tf.nest.flatten(self.observation_spec)
        out = {
            str(i): normalization.RunningNormalizer(spec.shape, name=f"observation_norm_{i}")
            for i, spec in enumerate(leaves)
            if normalization.normalizable(spec) and spec.name != f"observation_{MASK_KEY}"
        }
        for i, layer in out.items():  # attributes: TensorFlow checkpoints follow them
            setattr(self, f"observation_norm_{i}", layer)
        if not out:
            raise ValueError(
                "normalize_observations: the observation space has no float features to "
                "normalise (uint8 images and Discrete observations are not): "
                f"{self.observation_space}"
            )
        return out

    def normalize_observation(self, observation):
        """``observation`` (a nest like :attr:`observation_spec`, any leading dims) with its
        float leaves normalised by the running statistics (as it is when unchanged)."""
        if not self.observation_normalizers:
            return observation
        flat = tf.nest.flatten(observation)
        flat = [
            self.observation_normalizers[str(i)](x) if str(i) in self.observation_normalizers
            else x
            for i, x in enumerate(flat)
        ]  # fmt: skip
        return tf.nest.pack_sequence_as(observation, flat)

    @property
    def prepares_observations(self) -> bool:
        """Whether :meth:`prepare_observation` converts: uint8 images into a built-in conv
        torso, which nothing else reads (no normaliser, no separate value or Q torso)."""
        return (
            isinstance(self.torso, torsos.ConvTorso)
            and not self.user_torso
            and not self.nested_observation
            and not self.observation_normalizers
            and self.value_torso is None
            and self.q_torso is None
            and self.adv_torso is None
            and self._observation_spec.dtype == tf.uint8
        )

    def prepare_observation(self, observation: tf.Tensor) -> tf.Tensor:
        """uint8 images ``[..., H, W, C]`` as the conv torso's first layer takes them (scaled,
        in its compute dtype: ``ConvTorso.prepare``), for :meth:`unroll` with
        ``prepared=True``: a learner that passes over a batch many times (epochs, minibatches)
        converts it once. Only where :attr:`prepares_observations`."""
        if not self.prepares_observations:
            raise ValueError(
                "prepare_observation: this network takes its observations as they are "
                "(prepares_observations is False)"
            )
        return self.torso.prepare(observation)

    def update_observation_statistics(self, observation) -> None:
        """Merges ``observation`` (numpy or tensors, a nest like :attr:`observation_spec` with
        any leading dims) into the running statistics; nothing without normalisation."""
        for i, x in enumerate(tf.nest.flatten(observation)):
            if str(i) in self.observation_normalizers:
                self.observation_normalizers[str(i)].update(x)

    def _make_torso(self, config: NetworkConfig) -> keras.layers.Layer:
        if user_layers.is_user_path(config.torso):  # the action mask is no input of it
            return user_layers.build(config.torso, without_mask(self.observation_space), "torso")
        if self.nested_observation:
            return multi_input.MultiInputTorso(self.observation_space, config, config.hidden_sizes)
        rank = len(self.observation_spec.shape)
        scale = self.input_scale
        if config.torso == "mlp":
            return torsos.MLPTorso(
                config.hidden_sizes, config.mlp_activation, self.obs_categories, scale
            )
        if rank != 3:
            raise ValueError(
                f"torso={config.torso!r} needs [H, W, C] observations, got shape "
                f"{tuple(self.observation_spec.shape)}"
            )
        torso = multi_input.conv_torso(config, self.observation_spec.shape, scale)
        if torso is None:
            raise ValueError(
                f"torso={config.torso!r} needs images of at least 3x3, got shape "
                f"{tuple(self.observation_spec.shape)}"
            )
        return torso

    # ------------------------------------------------------------------------ public API
    @property
    def observation_spec(self):
        """``tf.TensorSpec`` of one (unbatched) observation; a dict / tuple of them
        (``observation_<key>``) for a Dict / Tuple observation space."""
        if self.nested_observation:
            return multi_input.observation_spec(self.observation_space)
        return self._observation_spec

    @property
    def state_sizes(self) -> tuple[int, ...]:
        """Last-dim size of each recurrent state tensor; ``()`` for feed-forward networks."""
        return self.core.state_sizes if self.core is not None else ()

    def initial_state(self, batch_size) -> tuple[tf.Tensor, ...]:
        """Zero recurrent state for ``batch_size`` (int or scalar tensor); ``()`` if none."""
        return self.core.initial_state(batch_size) if self.core is not None else ()

    def dummy_inputs(self, batch_size: int, time: int | None = None) -> NetInputs:
        """All-zero inputs ``[B, ...]`` (or ``[T, B, ...]`` when ``time`` is given), first=True."""
        lead = [batch_size] if time is None else [time, batch_size]
        obs = tf.nest.map_structure(
            lambda s: tf.zeros(lead + list(s.shape), s.dtype), self.observation_spec
        )
        return NetInputs(
            observation=obs,
            first=tf.ones(lead, tf.bool),
            prev_action=self.dummy_actions(batch_size, time),
            prev_reward=tf.zeros(lead, tf.float32),
        )

    def dummy_actions(self, batch_size: int, time: int | None = None) -> tf.Tensor:
        """Zero actions ``[B]`` int32 / ``[B, A]`` float32 (with a leading T if given)."""
        lead = [batch_size] if time is None else [time, batch_size]
        return tf.zeros(lead + list(self.action_spec.shape), self.action_spec.dtype)

    def distribution(self, policy: dict[str, tf.Tensor]):
        """``tfp`` distribution of the policy params, see distributions.py."""
        return distributions.make_distribution(
            self.policy_kind, policy, self.action_low, self.action_high, self.nvec
        )

    def greedy_action(self, policy: dict[str, tf.Tensor]) -> tf.Tensor:
        """Deterministic action: argmax (int32), loc, or ``mid + half_range * tanh(loc)``."""
        return distributions.greedy_action(
            self.policy_kind, policy, self.action_low, self.action_high, self.nvec
        )

    def encode_action(self, action: tf.Tensor) -> tf.Tensor:
        """Actions as float vectors: one-hot ``[..., num_actions]`` or float32 ``[..., A]``
        (MultiDiscrete: the concatenated one-hots; MultiBinary: the bits)."""
        if self.policy_kind in ("multi_categorical", "multi_binary"):
            return action_spaces.encode(self.policy_kind, action, self.nvec)
        if self.is_discrete:
            return tf.one_hot(tf.cast(action, tf.int32), self.num_actions, dtype=tf.float32)
        return tf.cast(action, tf.float32)

    def call(self, inputs: NetInputs, state=(), actions=None, training=None) -> NetOutput:
        """One step. See the module docstring for shapes. ``actions`` ``[B]``/``[B, A]`` is
        used only by the stochastic dueling head (q = Q~(s, actions), else q is None)."""
        inputs = self._check_inputs(inputs, state, ["B"])
        observation = self.normalize_observation(inputs.observation)
        x = self._core_input(self._features(observation), inputs)
        new_state = ()
        if self.core is not None:
            x, new_state = self.core.step(x, inputs.first, tuple(state))
        policy, value, q = self._heads(x, actions, observation)
        return NetOutput(policy, value, q, new_state)

    def unroll(self, inputs: NetInputs, state=(), actions=None, prepared=False) -> NetOutput:
        """Unroll over ``[T, B]`` (T >= 1), resetting the core where ``first``; equals T steps.

        ``prepared``: the observation is :meth:`prepare_observation`'s output.
        Returns NetOutput with ``[T, B, ...]`` policy/value/q and the final state ``[B, k]``.
        """
        inputs = self._check_inputs(inputs, state, ["T", "B"])
        obs = tf.nest.map_structure(_merge_time, inputs.observation)
        if not prepared:
            obs = self.normalize_observation(obs)
        lead = tf.shape(tf.nest.flatten(inputs.observation)[0])
        t, b = lead[0], lead[1]
        feats = _split_time(self._features(obs, prepared), t, b)
        x = self._core_input(feats, inputs)
        new_state = ()
        if self.core is not None:
            x, new_state = self.core.unroll(x, inputs.first, tuple(state))
        flat_actions = None if actions is None else _merge_time(tf.convert_to_tensor(actions))
        policy, value, q = self._heads(_merge_time(x), flat_actions, obs)
        split = lambda v: None if v is None else _split_time(v, t, b)
        policy = {k: split(v) for k, v in policy.items()}
        return NetOutput(policy, split(value), split(q), new_state)

    # ------------------------------------------------------------------------ internals
    def _check_inputs(self, inputs, state, lead: list[str]) -> NetInputs:
        """Converts inputs to tensors; ValueError naming the argument on a static mismatch."""
        observation, *rest = inputs
        if self.nested_observation:
            try:
                tf.nest.assert_same_structure(self.observation_spec, observation, False)
            except (ValueError, TypeError):
                dots = lambda nest: tf.nest.map_structure(lambda _: "...", nest)  # noqa: E731
                raise ValueError(
                    f"observation: expected the structure {dots(self.observation_spec)}, got "
                    f"{dots(observation)}"
                ) from None
        observation = tf.nest.map_structure(tf.convert_to_tensor, observation)
        inputs = NetInputs(observation, *(tf.convert_to_tensor(x) for x in rest))
        specs = tf.nest.flatten(self.observation_spec)  # (name, tensor, expected tail)
        expected = [(s.name, x, list(s.shape)) for s, x in zip(specs, tf.nest.flatten(observation))]
        expected += [
            ("first", inputs.first, []),
            ("prev_action", inputs.prev_action, list(self.action_spec.shape)),
            ("prev_reward", inputs.prev_reward, []),
        ]
        for name, x, tail in expected:
            shape = x.shape
            if shape.rank is None:
                continue
            if shape.rank != len(lead) + len(tail) or not shape[len(lead) :].is_compatible_with(
                tail
            ):
                raise ValueError(f"{name}: expected shape {lead + tail}, got {shape.as_list()}")
        state = tuple(state)
        sizes = [s.shape[-1] if s.shape.rank else None for s in map(tf.convert_to_tensor, state)]
        if len(state) != len(self.state_sizes) or any(
            n is not None and n != k for n, k in zip(sizes, self.state_sizes)
        ):
            raise ValueError(
                f"state: expected {len(self.state_sizes)} tensors [B, k] with k in "
                f"{list(self.state_sizes)}, got last dims {sizes}"
            )
        return inputs

    def _features(self, observation, prepared: bool = False) -> tf.Tensor:
        """The torso's ``[N, F]`` float32 features of ``[N, ...]`` observations (``prepared``:
        :meth:`prepare_observation`'s). A torso of one's own receives them preprocessed
        (``multi_input.preprocess``: float32, uint8 scaled, Discrete one-hot, a Dict / Tuple as
        the nest of such leaves) and must return ``[N, F]``."""
        if prepared:
            return self.torso(observation, prepared=True)
        if not self.user_torso:
            return self.torso(observation)
        features = self.torso(
            multi_input.preprocess(without_mask(observation), without_mask(self.observation_space))
        )
        if not isinstance(features, tf.Tensor) or features.shape.rank != 2:
            got = getattr(features, "shape", type(features).__name__)
            raise ValueError(
                f"torso: {self.config.torso!r} must return one [N, features] tensor, returned {got}"
            )
        return tf.cast(features, tf.float32)

    def _core_input(self, features: tf.Tensor, inputs: NetInputs) -> tf.Tensor:
        """Concatenates the (first-masked) previous action and reward to ``[..., F]``."""
        cfg = self.config
        if not (cfg.use_prev_action or cfg.use_prev_reward):
            return features
        keep = 1.0 - tf.cast(inputs.first, tf.float32)
        parts = [features]
        if cfg.use_prev_action:
            parts.append(self.encode_action(inputs.prev_action) * keep[..., None])
        if cfg.use_prev_reward:
            parts.append((tf.cast(inputs.prev_reward, tf.float32) * keep)[..., None])
        return tf.concat(parts, axis=-1)

    def _heads(self, x: tf.Tensor, actions, observation: tf.Tensor):
        """Heads on ``[N, F]`` -> (policy dict, value ``[N]``, q or None).

        ``observation`` ``[N, *obs]`` feeds the separate value or Q torso when there is one;
        its ``action_mask`` entry, if any, masks the policy (networks/action_masks.py)."""
        policy = mask_policy(self.policy_head(x), observation, self.policy_kind)
        q = None
        q_x = x if self.q_torso is None else self.q_torso(observation)
        if self.config.q_head == "stochastic_dueling":
            if actions is None:
                value = self.q_head.value_head(q_x)
            else:
                dist = self.distribution(policy)
                sampled = tf.stop_gradient(dist.sample(self.config.sdn_num_samples))
                adv_x = q_x if self.adv_torso is None else self.adv_torso(observation)
                q, value = self.q_head(
                    q_x, self.encode_action(actions), self.encode_action(sampled), adv_x
                )
        elif self.config.q_head == "discrete":
            q = self.q_head(q_x)
            value = tf.reduce_sum(tf.nn.softmax(policy["logits"]) * q, axis=-1)
        else:
            value_features = x if self.value_torso is None else self.value_torso(observation)
            value = self.value_head(value_features)
        return policy, value, q


def make_network(config: NetworkConfig, observation_space, action_space) -> ActorCriticNetwork:
    """Builds (and runs once, creating all variables) the network named by ``config``.

    Args:
      config: a :class:`NetworkConfig`.
      observation_space: gymnasium Box (float or uint8), Discrete, or a Dict / Tuple of those.
      action_space: gymnasium Discrete, rank-1 Box, MultiDiscrete or MultiBinary (rank 1).
    Raises:
      ValueError: when the config and the spaces don't fit together.
    """
    if not isinstance(config, NetworkConfig):
        raise ValueError(f"config must be a NetworkConfig, got {type(config).__name__}")
    return ActorCriticNetwork(config, observation_space, action_space)
