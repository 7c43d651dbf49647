"""Feature extractors ("torsos") mapping a batch of observations to a feature vector.

* :class:`MLPTorso`: dense layers on the flattened observation.
* :class:`NatureCNN`: the DQN network of Mnih et al. 2015 (Nature 518, 529-533):
  conv 32x8x8/4, conv 64x4x4/2, conv 64x3x3/1, dense 512, relu throughout.
* :class:`SmallAtariCNN`: the DQN network of Mnih et al. 2013, also A3C's on Atari:
  conv 16x8x8/4, conv 32x4x4/2, dense 256, relu throughout.
* :class:`MinAtarCNN`: the MinAtar network of Young & Tian 2019
  (https://arxiv.org/abs/1903.03176): conv 16x3x3/1 (valid), dense 128, relu throughout.
* :class:`ImpalaResNet`: the deep ResNet of IMPALA (Espeholt et al. 2018,
  https://arxiv.org/abs/1802.01561, Fig. 3): three stages with 16, 32, 32 channels, each
  conv 3x3 -> max-pool 3x3/2 -> two residual blocks (relu, conv, relu, conv, + skip),
  then relu, flatten and dense 256 with relu.

All torsos take ``[N, *obs_shape]`` (float32, or uint8) and return ``[N, output_size]``
float32; the input is cast to float32 and multiplied by ``input_scale`` (the network sets
1/255 for image-like uint8 observations in 0-255 and 1 for 0/1 grids such as MinAtar's, from
the observation space's bounds; a torso built alone, ``input_scale=None``, scales uint8 by
1/255 and nothing else). Gradients flow into all their weights (not the input).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from tfagents_vtrace.networks.config import CNN_INITS
from tfagents_vtrace.networks.precision import resolve_compute_dtype


def preprocess_observation(
    observation: tf.Tensor, num_categories: int | None = None, input_scale: float | None = None
) -> tf.Tensor:
    """Casts observations to float32 times ``input_scale``; integer ids -> one-hot if
    ``num_categories``.

    Args:
      observation: ``[N, *obs_shape]`` (any dtype), or ``[N]`` integer ids when
        ``num_categories`` is given (a Discrete observation space).
      input_scale: multiplies the float32 observation; None: 1/255 for uint8, else 1.
    Returns:
      float32 ``[N, *obs_shape]`` or ``[N, num_categories]``.
    """
    if num_categories is not None:
        return tf.one_hot(tf.cast(observation, tf.int32), num_categories, dtype=tf.float32)
    if input_scale is None:
        input_scale = 1.0 / 255.0 if observation.dtype == tf.uint8 else 1.0
    x = tf.cast(observation, tf.float32)
    return x if input_scale == 1.0 else x * float(input_scale)


def input_scale_for(space) -> float:
    """1/255 for a uint8 Box whose values reach above 1 (images), else 1.0.

    MinAtar's grids are 0/1 channels stored as uint8 (``high == 1``): dividing them by 255
    would feed the network 0 or 0.004.
    """
    import numpy as np

    if getattr(space, "dtype", None) == np.uint8 and float(np.max(space.high)) > 1.0:
        return 1.0 / 255.0
    return 1.0


def track_layers(owner: keras.layers.Layer, prefix: str, layers) -> None:
    """Also sets each layer of a (nested) list as an attribute ``{prefix}_{i}[_{j}]``.

    Keras 3 tracks layers held in lists for ``weights``, but ``tf.train.Checkpoint`` follows
    only attributes: without this, checkpoints silently skip list-held layers.
    """
    for i, layer in enumerate(layers):
        if isinstance(layer, list | tuple):
            track_layers(owner, f"{prefix}_{i}", layer)
        else:
            setattr(owner, f"{prefix}_{i}", layer)


class MLPTorso(keras.layers.Layer):
    """Flatten, then dense layers: ``[N, *obs_shape] -> [N, hidden_sizes[-1]]``.

    With empty ``hidden_sizes`` the output is the flattened observation. With
    ``num_categories`` the input is ``[N]`` integer ids (a Discrete space), one-hot encoded.
    """

    def __init__(
        self,
        hidden_sizes: tuple[int, ...] = (64, 64),
        activation: str = "tanh",
        num_categories: int | None = None,
        input_scale: float | None = None,
        **kw,
    ):
        super().__init__(**kw)
        self.input_scale = input_scale
        self.hidden_sizes = tuple(hidden_sizes)
        self.num_categories = num_categories
        self.dense_layers = [
            keras.layers.Dense(
                h, activation=activation, kernel_initializer=keras.initializers.Orthogonal(1.0)
            )
            for h in self.hidden_sizes
        ]
        track_layers(self, "dense", self.dense_layers)

    def build(self, input_shape):
        self.built = True  # sublayers build on the first call

    def call(self, x: tf.Tensor) -> tf.Tensor:
        x = preprocess_observation(x, self.num_categories, self.input_scale)
        flat = 1
        for d in x.shape[1:]:
            flat *= int(d)
        x = tf.reshape(x, [-1, flat])
        for layer in self.dense_layers:
            x = layer(x)
        return x


def _kernel_init(init: str):
    """Keras's default ``glorot_uniform``, or ``Orthogonal(sqrt(2))`` (the relu gain used by
    OpenAI Baselines' and CleanRL's Atari networks)."""
    if init == "orthogonal":
        return keras.initializers.Orthogonal(2.0**0.5)
    if init == "glorot":
        return "glorot_uniform"
    raise ValueError(f"cnn_init: expected one of {CNN_INITS}, received {init!r}")


def _dtype_policy(compute_dtype: str):
    """float32 throughout, or bfloat16 arithmetic on float32 variables (Keras's
    "mixed_bfloat16": oneDNN's AVX-512 BF16 / AMX kernels on CPUs that have them); "auto"
    resolves to one of them for this machine (:mod:`tfagents_vtrace.networks.precision`)."""
    if resolve_compute_dtype(compute_dtype) == "float32":
        return None
    return keras.DTypePolicy("mixed_bfloat16")


class ConvTorso(keras.layers.Layer):
    """Valid-padded relu convolutions, flatten, one relu dense layer: ``[N, H, W, C]`` ->
    ``[N, dense_size]``. ``convs``: ``(filters, kernel, stride)`` per layer (a subclass may
    build and apply other layers from them: :meth:`_build_convs`, :meth:`_apply_convs`). A
    subclass with ``DENSE_SIZE = None`` ends at the flattened features unless ``dense_size``
    is given."""

    CONVS: tuple[tuple[int, int, int], ...] = ()
    DENSE_SIZE: int | None = 256
    PADDING = "valid"
    ACTIVATION = "relu"

    def __init__(
        self,
        dense_size: int | None = None,
        input_scale: float | None = None,
        convs: tuple[tuple[int, int, int], ...] | None = None,
        init: str = "glorot",
        compute_dtype: str = "float32",
        **kw,
    ):
        # No input cast by Keras: ``call`` converts (a prepared bfloat16 batch stays bfloat16).
        kw.setdefault("autocast", False)
        super().__init__(**kw)
        self.input_scale = input_scale
        policy = _dtype_policy(compute_dtype)
        self.prepared_dtype = tf.float32 if policy is None else tf.bfloat16
        self._build_convs(convs or self.CONVS, init, policy)
        self.flatten = keras.layers.Flatten(dtype=policy)
        size = dense_size or self.DENSE_SIZE
        self.dense = None
        if size is not None:
            self.dense = keras.layers.Dense(
                size, activation="relu", kernel_initializer=_kernel_init(init), dtype=policy
            )

    def _build_convs(self, convs, init: str, policy) -> None:
        """The layers before the flatten, from ``convs``."""
        self.convs = [
            keras.layers.Conv2D(
                filters,
                kernel,
                strides=stride,
                padding=self.PADDING,
                activation=self.ACTIVATION,
                kernel_initializer=_kernel_init(init),
                dtype=policy,
            )
            for filters, kernel, stride in convs
        ]
        track_layers(self, "conv", self.convs)

    def _apply_convs(self, x: tf.Tensor) -> tf.Tensor:
        for conv in self.convs:
            x = conv(x)
        return x

    def build(self, input_shape):
        self.built = True  # sublayers build on the first call

    def prepare(self, x: tf.Tensor) -> tf.Tensor:
        """``x`` as the first layer takes it: :func:`preprocess_observation`'s float32 in
        :attr:`prepared_dtype` (the layers' compute dtype), the same numbers ``call`` makes.
        Done once, a batch that is passed over many times skips the conversion in each pass
        (``call(..., prepared=True)``)."""
        x = preprocess_observation(x, input_scale=self.input_scale)
        return tf.cast(x, self.prepared_dtype)

    def call(self, x: tf.Tensor, prepared: bool = False) -> tf.Tensor:
        """``prepared``: ``x`` is :meth:`prepare`'s output."""
        if not prepared:
            x = preprocess_observation(x, input_scale=self.input_scale)
        x = self._apply_convs(x)
        x = self.flatten(x)
        x = x if self.dense is None else self.dense(x)
        return tf.cast(x, tf.float32)


class NatureCNN(ConvTorso):
    """The Nature DQN torso: conv 32x8x8/4, 64x4x4/2, 64x3x3/1, dense 512 (relu)."""

    CONVS = ((32, 8, 4), (64, 4, 2), (64, 3, 1))
    DENSE_SIZE = 512


class SmallAtariCNN(ConvTorso):
    """The DQN network of Mnih et al. 2013 ("Playing Atari with Deep Reinforcement
    Learning", https://arxiv.org/abs/1312.5602), also A3C's on Atari (Mnih et al. 2016):
    conv 16x8x8/4, 32x4x4/2, dense 256 (relu), about a third of the Nature CNN's
    multiply-adds on 84x84x4 frames."""

    CONVS = ((16, 8, 4), (32, 4, 2))
    DENSE_SIZE = 256


class UniverseCNN(ConvTorso):
    """The A3C meta-RL fork's Atari torso (``a3c_meta_rl.txt``: ``LSTMPolicy``, from
    OpenAI's universe-starter-agent): four conv 32x3x3 stride 2, "same" padding, ELU, then
    flatten (no dense layer; the fork feeds the 288 features of a 42x42 frame, 42 -> 21 ->
    11 -> 6 -> 3, straight to its LSTM(256)). ``cnn_dense_size`` adds a relu dense layer.
    Train it on 42x42 frames with ``--screen_size=42``."""

    CONVS = ((32, 3, 2),) * 4
    DENSE_SIZE = None
    PADDING = "same"
    ACTIVATION = "elu"


class MinAtarCNN(ConvTorso):
    """The MinAtar torso: ``[N, 10, 10, C]`` grids -> ``[N, dense_size]`` (relu).

    One conv 16x3x3 stride 1 (valid padding, 10x10 -> 8x8) and one dense layer, the network
    of the MinAtar paper's actor-critic baselines.
    """

    CONVS = ((16, 3, 1),)
    DENSE_SIZE = 128

    def __init__(self, channels: int = 16, dense_size: int = 128, **kw):
        super().__init__(dense_size, convs=((channels, 3, 1),), **kw)


class _ResidualBlock(keras.layers.Layer):
    """``x + conv(relu(conv(relu(x))))`` with 3x3 same-padded convolutions."""

    def __init__(self, channels: int, init: str = "glorot", policy=None, **kw):
        super().__init__(**kw)
        conv = lambda: keras.layers.Conv2D(  # noqa: E731
            channels, 3, padding="same", kernel_initializer=_kernel_init(init), dtype=policy
        )
        self.conv0, self.conv1 = conv(), conv()

    def build(self, input_shape):
        self.built = True  # sublayers build on the first call

    def call(self, x: tf.Tensor) -> tf.Tensor:
        y = self.conv0(tf.nn.relu(x))
        y = self.conv1(tf.nn.relu(y))
        return x + y


class ImpalaResNet(ConvTorso):
    """The IMPALA deep ResNet torso: ``[N, H, W, C]`` -> ``[N, dense_size]``.

    Each stage (``channels`` 16, 32, 32): conv 3x3 same, max-pool 3x3 stride 2 same, then two
    residual blocks; a relu after the last stage. Spatial size shrinks by ~2 per stage
    (84 -> 42 -> 21 -> 11). ``input_scale``, ``init`` and ``compute_dtype`` as
    :class:`ConvTorso`'s (kernel initializer of every conv and the dense layer; bfloat16
    arithmetic on float32 variables, float32 features out).
    """

    DENSE_SIZE = 256

    def __init__(self, channels: tuple[int, ...] = (16, 32, 32), dense_size: int = 256, **kw):
        super().__init__(dense_size, convs=channels, **kw)

    def _build_convs(self, channels, init: str, policy) -> None:
        self.stage_convs = [
            keras.layers.Conv2D(
                ch, 3, padding="same", kernel_initializer=_kernel_init(init), dtype=policy
            )
            for ch in channels
        ]
        self.stage_pools = [
            keras.layers.MaxPooling2D(pool_size=3, strides=2, padding="same", dtype=policy)
            for _ in channels
        ]
        self.stage_blocks = [
            [_ResidualBlock(ch, init, policy, dtype=policy) for _ in range(2)] for ch in channels
        ]
        track_layers(self, "stage_conv", self.stage_convs)
        track_layers(self, "stage_block", self.stage_blocks)

    def _apply_convs(self, x: tf.Tensor) -> tf.Tensor:
        for conv, pool, (block0, block1) in zip(
            self.stage_convs, self.stage_pools, self.stage_blocks
        ):
            x = block1(block0(pool(conv(x))))
        return tf.nn.relu(x)
