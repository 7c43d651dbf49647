"""Network configuration: one frozen dataclass that names every architectural choice.

Agents and experiments choose networks by name through :class:`NetworkConfig` and
:func:`tfagents_vtrace.networks.make_network`. The architectures follow the papers:

* Nature CNN: Mnih et al. 2015, "Human-level control through deep RL" (Nature 518).
* IMPALA deep ResNet: Espeholt et al. 2018, https://arxiv.org/abs/1802.01561.
* Meta-RL inputs (previous action, previous reward, time step into the LSTM):
  Wang et al. 2016, https://arxiv.org/abs/1611.05763.
* Stochastic dueling network: Wang et al. 2016 (ACER), https://arxiv.org/abs/1611.01224.
"""

from __future__ import annotations

import dataclasses

from tfagents_vtrace.networks.precision import CNN_COMPUTE_DTYPES
from tfagents_vtrace.utils.validation import check_choice as _check_choice
from tfagents_vtrace.utils.validation import check_positive as _check_positive

CNN_INITS = ("glorot", "orthogonal")
TORSOS = ("mlp", "nature_cnn", "small_atari_cnn", "universe_cnn", "minatar_cnn", "impala_resnet")
# The built-in conv torsos (cnn_init and cnn_compute_dtype apply to these).
CONV_TORSOS = tuple(t for t in TORSOS if t != "mlp")
CORES = (None, "lstm")
POLICY_HEADS = ("auto", "categorical", "gaussian", "tanh_gaussian")
GAUSSIAN_STDS = ("state", "global")
Q_HEADS = (None, "discrete", "stochastic_dueling")
# The default separate value network (see NetworkConfig.value_hidden_sizes).
DEFAULT_VALUE_HIDDEN_SIZES = (64, 64)


def _is_path(value) -> bool:
    """An import path ``"package.module:Name"`` of a layer of one's own (not a built-in name)."""
    return isinstance(value, str) and ":" in value


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """Architecture of an actor-critic network (see ``make_network``).

    The forward pass is ``observation -> torso -> [meta-RL inputs] -> [core] -> heads``.
    """

    # Torso: "mlp" (dense layers on the flattened observation), "nature_cnn" (3 convs + dense
    # `cnn_dense_size` or 512), "small_atari_cnn" (DQN 2013 / A3C: conv 16x8x8/4, 32x4x4/2,
    # dense `cnn_dense_size` or 256; a third of the Nature CNN's work), "universe_cnn" (the
    # A3C meta-RL fork's: 4 x conv 32x3x3/2 "same" ELU, flattened, no dense unless
    # `cnn_dense_size`; for 42x42 frames, `--screen_size=42`), "minatar_cnn" (conv
    # 16x3x3/1 + dense `cnn_dense_size` or 128, the MinAtar paper's), "impala_resnet" (3
    # stages 16/32/32 of conv + max-pool + 2 residual blocks, then dense `cnn_dense_size` or
    # 256). uint8 images (values up to 255) are scaled to [0, 1] inside every torso, 0/1
    # uint8 grids (MinAtar) enter as 0/1; Discrete observations are one-hot encoded.
    # "auto" (the default) picks by the observation space where the network's spaces are
    # known (networks/multi_input.py auto_torso): small_atari_cnn for uint8 images of at
    # least 36x36 (also as a Dict / Tuple leaf), minatar_cnn for smaller ones down to 3x3
    # (MinAtar's 10x10 grids; not in a Dict / Tuple), else mlp;
    # a run records and prints the name it resolved to. Or a layer of your own: its import
    # path "package.module:Name" (a keras.layers.Layer subclass, or a function
    # (observation_space) -> layer; networks/user_layers.py, docs/guide/extending.md).
    torso: str = "auto"
    # Hidden layer sizes of the MLP torso (ignored by the CNN torsos), and of the dense layers
    # after the concatenated per-key codes of a Dict / Tuple observation (every torso).
    hidden_sizes: tuple[int, ...] = (64, 64)
    # Separate value network: None (the value head shares the torso) or the hidden sizes of
    # an MLP of its own on the observation (SB3's default actor-critic layout: the value
    # gradient then never moves the policy's features; on a shared torso the value loss can
    # collapse a continuous-action policy to one action, docs/defaults.md). Feed-forward
    # networks with the plain value head only (core=None, q_head=None). The default (64, 64)
    # applies to the MLP torso of those and means None (shared) for any other network: a
    # conv torso, a torso of your own, a core or a Q head.
    value_hidden_sizes: tuple[int, ...] | None = DEFAULT_VALUE_HIDDEN_SIZES
    # Activation of the MLP torso layers and of the dense layers after a Dict / Tuple
    # observation's codes (any Keras activation name; CNNs use relu), or "auto": the agent's
    # (relu for IMPALA, whose default clipped sample reuse keeps a relu policy stable; tanh
    # for the others, whose plain policy-gradient steps do not; docs/defaults.md). A run
    # records the resolved name; a network built outside a run resolves "auto" to tanh.
    activation: str = "auto"
    # Width of the dense layer that ends a CNN torso; None = the paper's (512 Nature, 256 IMPALA).
    cnn_dense_size: int | None = None
    # Kernel initializer of the conv torsos' convolutions and dense layer ("nature_cnn",
    # "small_atari_cnn", "universe_cnn", "minatar_cnn", "impala_resnet"; not "mlp"): "glorot"
    # (Keras's glorot_uniform)
    # or "orthogonal" (Orthogonal with the relu gain sqrt(2), as OpenAI Baselines' and
    # CleanRL's Atari networks). Biases start at 0 either way.
    cnn_init: str = "glorot"
    # Arithmetic of the same conv torsos: "float32", "bfloat16" (Keras's mixed_bfloat16:
    # bfloat16 convolutions and dense layer on float32 weights, features cast back to float32
    # for the heads; fast on CPUs with AVX-512 BF16 or AMX, several times slower than float32
    # on others) or "auto": bfloat16 where the hardware computes it natively (a GPU of
    # compute capability >= 8.0, a CPU with avx512_bf16 or amx_bf16), else float32; resolved
    # where the network is built (networks/precision.py), so a moved run resolves again. An
    # exported policy of an "auto" network computes in float32 (it runs on any machine).
    cnn_compute_dtype: str = "auto"
    # Normalise the float Box observations (every float leaf of a Dict / Tuple) by a running
    # mean and variance, clipped to +-10 (SB3 VecNormalize's defaults), inside the network:
    # the statistics are model state (checkpointed, published to the actors with the
    # weights, applied inside every exported policy, which then takes raw observations),
    # updated by the learner from the observations of the unrolls it trains on and frozen
    # in evaluation. For observations in the thousands or of very different scales.
    normalize_observations: bool = False
    # Recurrent core: None (feed-forward, state is ()), "lstm", or a Keras RNN cell of your
    # own by its import path "package.module:Name" (networks/user_layers.py; reset to zeros
    # where an episode starts, as the LSTM).
    core: str | None = None
    # Number of LSTM units.
    lstm_size: int = 128
    # Concatenate the previous action (one-hot when discrete) to the core input (meta-RL).
    use_prev_action: bool = False
    # Concatenate the previous reward to the core input (meta-RL).
    use_prev_reward: bool = False
    # Concatenate the time step within the episode (counted in the recurrent state, reset
    # where `first`) to the core input; requires core="lstm".
    use_time_step: bool = False
    # The time-step input is `t * time_step_scale`. 1.0 feeds the raw step, as the A3C
    # meta-RL fork does; 0.01 keeps the input O(1) on long episodes (the bandit flagfiles).
    time_step_scale: float = 1.0
    # Policy head: "categorical" (Discrete actions), "gaussian" (diagonal Normal),
    # "tanh_gaussian" (Normal squashed by tanh into the Box bounds) or "auto" (categorical
    # for Discrete, gaussian for Box).
    policy_head: str = "auto"
    # Gaussian std: "state" (a dense output of the features) or "global" (a learned vector,
    # state-independent: exploration noise that the features cannot collapse).
    gaussian_std: str = "global"
    # Initial std of the Gaussian heads (sets the bias / global parameter at construction);
    # 0.5 explores a [-1, 1] action box without most samples landing outside it.
    init_std: float = 0.5
    # Lower bound added to the Gaussian std: scale = softplus(raw) + min_std.
    min_std: float = 1e-3
    # Scale of the orthogonal initializer of the policy output layer (small = near-uniform).
    policy_init_scale: float = 0.01
    # Q head: None, "discrete" (Q(s, .) for Discrete actions; the network's value is then
    # V(s) = sum_a pi(a|s) Q(s, a), ACER's, with no V head of its own) or "stochastic_dueling"
    # (ACER's SDN: Q(s,a) = V(s) + A(s,a) - mean_i A(s,a'_i), a'_i ~ pi).
    q_head: str | None = None
    # Separate Q network (ACER's unshared models): None (the Q head shares the torso with the
    # policy, chainerrl's ACERSharedModel / ACERSDNSharedModel) or the hidden sizes of an MLP
    # of its own on the observation. With q_head="discrete" it gives Q(s, .) (chainerrl's
    # ACERSeparateModel(pi, q)); with "stochastic_dueling" it gives V(s), and A(s, a) is an
    # MLP of sdn_hidden_sizes on [observation, action] (ACERSDNSeparateModel(pi, v, adv)).
    # The policy keeps the torso. Feed-forward networks (core=None) with a Q head only.
    q_hidden_sizes: tuple[int, ...] | None = None
    # Number of sampled actions a'_i in the stochastic dueling network.
    sdn_num_samples: int = 5
    # Hidden sizes of the advantage MLP A(s, a) of the stochastic dueling network.
    sdn_hidden_sizes: tuple[int, ...] = (64,)

    @property
    def mlp_activation(self) -> str:
        """The activation the dense layers use: ``activation``, with "auto" as tanh."""
        return "tanh" if self.activation == "auto" else self.activation

    def __post_init__(self):
        if not _is_path(self.torso):  # a path: the layer is checked where it is resolved
            _check_choice("torso", self.torso, ("auto", *TORSOS))
        if not _is_path(self.core):
            _check_choice("core", self.core, CORES)
        _check_choice("cnn_init", self.cnn_init, CNN_INITS)
        _check_choice("cnn_compute_dtype", self.cnn_compute_dtype, CNN_COMPUTE_DTYPES)
        conv = CONV_TORSOS  # every conv torso implements both
        # float32 and auto are what an MLP torso computes (an older config.json holds float32)
        allowed = {"cnn_init": ("glorot",), "cnn_compute_dtype": ("auto", "float32")}
        for name, values in allowed.items():
            if self.torso == "auto":
                break  # checked again once resolved
            if getattr(self, name) not in values and self.torso not in conv:
                raise ValueError(
                    f"NetworkConfig.{name}={getattr(self, name)!r} applies to the torsos "
                    f"{conv}, not torso={self.torso!r}"
                )
        _check_choice("policy_head", self.policy_head, POLICY_HEADS)
        _check_choice("gaussian_std", self.gaussian_std, GAUSSIAN_STDS)
        _check_choice("q_head", self.q_head, Q_HEADS)
        # Lists (e.g. from JSON) become tuples so the config stays hashable.
        object.__setattr__(self, "hidden_sizes", tuple(int(h) for h in self.hidden_sizes))
        object.__setattr__(self, "sdn_hidden_sizes", tuple(int(h) for h in self.sdn_hidden_sizes))
        for h in self.hidden_sizes:
            _check_positive("hidden_sizes", h)
        if self.value_hidden_sizes is not None:
            sizes = tuple(int(h) for h in self.value_hidden_sizes)
            # "auto" keeps the default until it is resolved (the config is made again then)
            mlp = self.torso in ("mlp", "auto")
            feed_forward_mlp = mlp and self.core is None and self.q_head is None
            if sizes == DEFAULT_VALUE_HIDDEN_SIZES and not feed_forward_mlp:
                sizes = None  # the default: the value shares the torso of these networks
            object.__setattr__(self, "value_hidden_sizes", sizes)
        if self.value_hidden_sizes is not None:
            sizes = self.value_hidden_sizes
            for h in sizes:
                _check_positive("value_hidden_sizes", h)
            if self.core is not None or self.q_head is not None:
                raise ValueError(
                    "NetworkConfig.value_hidden_sizes needs a feed-forward network with the "
                    f"plain value head (core=None, q_head=None), got core={self.core!r}, "
                    f"q_head={self.q_head!r}"
                )
        if self.q_hidden_sizes is not None:
            sizes = tuple(int(h) for h in self.q_hidden_sizes)
            object.__setattr__(self, "q_hidden_sizes", sizes)
            for h in sizes:
                _check_positive("q_hidden_sizes", h)
            if self.core is not None:  # the Q head is checked with the network (ACER sets it)
                raise ValueError(
                    "NetworkConfig.q_hidden_sizes needs a feed-forward network (core=None), "
                    f"got core={self.core!r}"
                )
        for h in self.sdn_hidden_sizes:
            _check_positive("sdn_hidden_sizes", h)
        if self.cnn_dense_size is not None:
            _check_positive("cnn_dense_size", self.cnn_dense_size)
        _check_positive("lstm_size", self.lstm_size)
        _check_positive("time_step_scale", self.time_step_scale)
        _check_positive("init_std", self.init_std)
        _check_positive("min_std", self.min_std, allow_zero=True)
        if self.min_std >= self.init_std:
            raise ValueError(
                f"NetworkConfig.min_std ({self.min_std}) must be < init_std ({self.init_std})"
            )
        _check_positive("policy_init_scale", self.policy_init_scale)
        _check_positive("sdn_num_samples", self.sdn_num_samples)
        if self.use_time_step and self.core != "lstm":
            raise ValueError(
                f"NetworkConfig.use_time_step=True requires core='lstm', got {self.core!r}"
            )

    def __reduce__(self):
        """Pickles as ``to_dict`` plus the registered objects of a torso or core of one's own,
        which pickle by reference (module and name): the config rebuilds them in another
        process of the same run (a Ray actor) without a run directory importing anything."""
        from tfagents_vtrace.networks import user_layers

        objects = {
            path: user_layers.registered(path)
            for path in (self.torso, self.core)
            if _is_path(path) and user_layers.registered(path) is not None
        }
        return _unpickle, (self.to_dict(), objects)

    def to_dict(self) -> dict:
        """A JSON-serialisable dict (tuples become lists); inverse of ``from_dict``."""
        return {
            k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()
        }

    @classmethod
    def from_dict(cls, d: dict) -> NetworkConfig:
        """Builds a config from ``to_dict`` output; unknown keys raise ValueError."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"NetworkConfig.from_dict: unknown fields {unknown}")
        return cls(**d)


def _unpickle(data: dict, objects: dict) -> NetworkConfig:
    """The config :meth:`NetworkConfig.__reduce__` pickled, its user objects registered."""
    from tfagents_vtrace.networks import user_layers

    for path, obj in objects.items():
        user_layers.register(path, obj)
    return NetworkConfig.from_dict(data)
