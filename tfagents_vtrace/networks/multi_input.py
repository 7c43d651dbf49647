"""Observation specs of gymnasium spaces and the multi-input torso of ``Dict`` / ``Tuple``
observations.

A ``Dict`` or ``Tuple`` observation travels through the library as a nest (dict / tuple) of
arrays, one leaf per sub-space, time-major ``[T, B, ...]`` per leaf. Each leaf is a ``Box``
(float, or uint8) or a ``Discrete`` (int32 ids). The multi-input torso encodes each leaf on
its own and concatenates the codes, the pattern of Stable-Baselines3's ``CombinedExtractor``
(https://github.com/DLR-RM/stable-baselines3, ``common/torch_layers.py``):

* a grid leaf (:func:`is_grid`: a ``Box`` of rank 3, ``[H, W, C]``, of any dtype: a uint8
  image, or a board's planes) goes through a conv torso of its own whenever the network's
  torso is a conv torso, as a plain rank-3 observation does (:func:`conv_torso`: that torso,
  or the MinAtar grid CNN where its strides do not fit the leaf; a leaf too small for both,
  below 3x3, is flattened). The conv torso is the one ``NetworkConfig.torso`` names, or
  ``torso="auto"``'s choice, which is a conv torso only for a uint8 image leaf of at least
  36x36 (:func:`auto_torso`), but then encodes every grid leaf of 3x3 or more, whatever its
  dtype. With the MLP torso (and ``"auto"`` without such an image) grid leaves are
  flattened;
* a ``Discrete`` leaf is one-hot encoded, any other ``Box`` leaf flattened (uint8 scaled as
  :func:`~tfagents_vtrace.networks.torsos.input_scale_for` says);

then the concatenation goes through dense layers of ``NetworkConfig.hidden_sizes``. A
top-level ``Dict``'s ``action_mask`` entry (a ``MultiBinary`` or a ``Box``) is an input of the
network but no feature: the torso leaves it out, the policy head's logits are masked with it
(:mod:`~tfagents_vtrace.networks.action_masks`).

Small images: a conv torso whose strides would shrink the image below 1x1 (the Nature CNN's
8x8/4 first layer needs 8x8 inputs) is replaced by the grid CNN of MinAtar (conv 16x3x3/1,
valid; 3x3 and larger), and an image smaller than that is flattened.
"""

from __future__ import annotations

import gymnasium as gym
import keras
import numpy as np
import tensorflow as tf

from tfagents_vtrace.networks import action_masks, torsos
from tfagents_vtrace.networks.config import CONV_TORSOS, NetworkConfig

NESTED_SPACES = (gym.spaces.Dict, gym.spaces.Tuple)


def is_nested(space) -> bool:
    """Whether ``space`` is a ``Dict`` or ``Tuple`` observation space."""
    return isinstance(space, NESTED_SPACES)


def is_image(space) -> bool:
    """A uint8 ``Box`` of rank 3 (``[H, W, C]``)."""
    return is_grid(space) and space.dtype == np.uint8


def is_grid(space) -> bool:
    """A ``Box`` of rank 3 (``[H, W, C]``) of any dtype: an image, or a board game's planes
    (Connect Four's ``int8`` ``6x7x2``). The network's conv torso, named or ``"auto"``'s
    choice, encodes it (:func:`conv_torso`)."""
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 3


def space_nest(space, where: str = "observation_space", top: bool = True):
    """The leaf spaces of ``space`` as plain dicts / tuples (a gymnasium ``Dict`` is a
    Mapping that ``tf.nest`` would try to rebuild). Raises ValueError naming ``where`` for a
    leaf that is not a ``Box`` or ``Discrete`` (or, as a top-level ``Dict``'s
    ``action_mask``, a ``MultiBinary``: :mod:`~tfagents_vtrace.networks.action_masks`)."""
    if isinstance(space, gym.spaces.Dict):
        return {
            k: v
            if top and k == action_masks.MASK_KEY and isinstance(v, gym.spaces.MultiBinary)
            else space_nest(v, f"{where}[{k!r}]", top=False)
            for k, v in space.spaces.items()
        }
    if isinstance(space, gym.spaces.Tuple):
        return tuple(space_nest(v, f"{where}[{i}]", top=False) for i, v in enumerate(space.spaces))
    if isinstance(space, gym.spaces.Box | gym.spaces.Discrete):
        return space
    raise ValueError(
        f"{where} must be Box, Discrete, or a Dict / Tuple of those, got {type(space).__name__}"
    )


def leaf_spec(space, name: str) -> tf.TensorSpec:
    """Spec of one (unbatched) leaf: int32 ``[]`` ids (Discrete), uint8 or float32 (Box),
    float32 (a MultiBinary action mask)."""
    if isinstance(space, gym.spaces.Discrete):
        return tf.TensorSpec([], tf.int32, name=name)
    if isinstance(space, gym.spaces.MultiBinary):
        return tf.TensorSpec(space.shape, tf.float32, name=name)
    dtype = tf.uint8 if space.dtype == np.uint8 else tf.float32
    return tf.TensorSpec(space.shape, dtype, name=name)


def observation_spec(space):
    """A nest of ``tf.TensorSpec`` of one observation of a ``Dict`` / ``Tuple`` space; leaf
    names are ``observation_<key>`` (``observation_<i>`` in a tuple, ``_``-joined paths:
    :func:`named_leaves`)."""
    nest = space_nest(space)
    specs = [leaf_spec(s, name) for name, s in named_leaves(nest)]
    return tf.nest.pack_sequence_as(nest, specs)


def named_leaves(nest, prefix: str = "observation") -> list:
    """``(name, leaf)`` of a nest of dicts / tuples in ``tf.nest.flatten`` order (dict keys
    sorted), named ``prefix_<key>_<i>...`` by their paths: the flat input names of an
    exported policy's observation (a plain leaf is ``prefix`` itself)."""
    return [("_".join([prefix, *map(str, p)]), leaf) for p, leaf in _paths(nest)]


def _paths(nest, prefix=()):
    """``(path, leaf)`` pairs in ``tf.nest.flatten`` order (dict keys sorted)."""
    if isinstance(nest, dict):  # a gymnasium observation's OrderedDict too
        for k in sorted(nest):
            yield from _paths(nest[k], (*prefix, k))
    elif isinstance(nest, tuple):
        for i, v in enumerate(nest):
            yield from _paths(v, (*prefix, i))
    else:
        yield prefix, nest


def _convs_fit(convs, padding: str, height: int, width: int) -> bool:
    """Whether valid convolutions ``(filters, kernel, stride)`` leave at least 1x1."""
    if padding == "same":
        return True
    for _, k, s in convs:
        height, width = (height - k) // s + 1, (width - k) // s + 1
        if height < 1 or width < 1:
            return False
    return True


_CONV_TORSOS = {
    "nature_cnn": (torsos.NatureCNN, 512),
    "small_atari_cnn": (torsos.SmallAtariCNN, None),
    "universe_cnn": (torsos.UniverseCNN, None),
}


def conv_torso(config: NetworkConfig, shape, input_scale: float) -> keras.layers.Layer | None:
    """The conv torso ``config.torso`` names for ``[H, W, C]`` images of ``shape``; the
    MinAtar grid CNN where its strides do not fit the image; None (flatten the image) where
    neither fits (smaller than 3x3). ``config.torso`` must be a conv torso."""
    conv = {"init": config.cnn_init, "compute_dtype": config.cnn_compute_dtype}
    height, width = int(shape[0]), int(shape[1])
    if config.torso in _CONV_TORSOS:
        cls, default = _CONV_TORSOS[config.torso]
        if _convs_fit(cls.CONVS, cls.PADDING, height, width):
            size = config.cnn_dense_size or default
            return cls(size, input_scale=input_scale, **conv)
    elif config.torso == "impala_resnet":  # same padding: any size
        return torsos.ImpalaResNet(
            dense_size=config.cnn_dense_size or 256, input_scale=input_scale, **conv
        )
    if not _convs_fit(torsos.MinAtarCNN.CONVS, "valid", height, width):
        return None
    size = config.cnn_dense_size or 128
    return torsos.MinAtarCNN(dense_size=size, input_scale=input_scale, **conv)


# "auto" torso: the smallest side of a uint8 image from which the Atari CNN is chosen (the
# Nature CNN's smallest input; the DQN 2013 / A3C network, a third of its work, is the one the
# shipped Pong config trains with), and from which the MinAtar grid CNN is (its 3x3 kernel).
AUTO_ATARI_MIN_SIDE = 36
AUTO_GRID_MIN_SIDE = 3


def auto_torso(observation_space) -> tuple[str, str]:
    """``(torso, why)``: what ``NetworkConfig.torso="auto"`` means for ``observation_space``.

    A uint8 ``[H, W, C]`` image (:func:`is_image`) gets ``"small_atari_cnn"`` when its smaller
    side is at least :data:`AUTO_ATARI_MIN_SIDE` (84x84 Atari frames), ``"minatar_cnn"`` when
    at least :data:`AUTO_GRID_MIN_SIDE` (MinAtar's 10x10 grids). A ``Dict`` / ``Tuple``
    observation gets ``"small_atari_cnn"`` when one of its uint8 image leaves is that large,
    else ``"mlp"`` (all its leaves flattened, as before "auto"). Only uint8 images decide,
    but with ``"small_atari_cnn"`` the multi-input torso encodes every grid leaf
    (:func:`is_grid`: each rank-3 ``Box`` leaf of any dtype, board planes and float maps
    too) of at least 3x3 with the conv torso that fits it (:func:`conv_torso`: the Atari
    CNN, else the MinAtar grid CNN), and flattens the smaller ones.
    Anything else is ``"mlp"``: float vectors, Discrete ids, float or tiny images. ``why`` says
    what decided, for the line a run prints (``torso auto -> small_atari_cnn (84x84x3 uint8
    images)``).
    """
    nested = is_nested(observation_space)
    leaves = tf.nest.flatten(space_nest(observation_space)) if nested else [observation_space]
    images = [s for s in leaves if is_image(s)]
    kind = type(observation_space).__name__
    if not images:
        if nested:
            return "mlp", f"{kind} observations without uint8 images"
        shape = getattr(observation_space, "shape", ())
        dtype = "Discrete" if kind == "Discrete" else str(getattr(observation_space, "dtype", ""))
        return "mlp", f"{dtype} observations of shape {tuple(shape)}"
    image = max(images, key=lambda s: min(s.shape[:2]))
    side = min(int(image.shape[0]), int(image.shape[1]))
    what = "x".join(str(int(d)) for d in image.shape) + " uint8 image"
    what += f"s in a {kind} observation" if nested else "s"
    if side >= AUTO_ATARI_MIN_SIDE:
        return "small_atari_cnn", what
    if nested:
        return "mlp", f"{what}, smaller than {AUTO_ATARI_MIN_SIDE}x{AUTO_ATARI_MIN_SIDE}"
    if side >= AUTO_GRID_MIN_SIDE:
        return "minatar_cnn", what
    return "mlp", f"{what}, smaller than {AUTO_GRID_MIN_SIDE}x{AUTO_GRID_MIN_SIDE}"


def preprocess(observation, observation_space):
    """The observation as a torso of one's own receives it: each leaf float32, uint8 scaled
    as the built-in torsos scale it (:func:`~tfagents_vtrace.networks.torsos.input_scale_for`:
    1/255 for 0-255 images, 1 for 0/1 grids), Discrete ids one-hot; a ``Dict`` / ``Tuple``
    observation stays the dict / tuple of its leaves so processed."""

    def leaf(x, space):
        if isinstance(space, gym.spaces.Discrete):
            return torsos.preprocess_observation(x, int(space.n))
        return torsos.preprocess_observation(x, input_scale=torsos.input_scale_for(space))

    if not is_nested(observation_space):
        return leaf(observation, observation_space)
    structure = space_nest(observation_space)
    spaces = tf.nest.flatten(structure)
    leaves = [leaf(x, s) for x, s in zip(tf.nest.flatten(observation), spaces)]
    return tf.nest.pack_sequence_as(structure, leaves)


class MultiInputTorso(keras.layers.Layer):
    """One encoder per leaf of a ``Dict`` / ``Tuple`` observation, concatenated, then dense
    layers (module docstring): a nest of ``[N, ...]`` leaves -> ``[N, hidden_sizes[-1]]``
    (the concatenation itself with empty ``hidden_sizes``).

    Args:
      observation_space: the ``Dict`` / ``Tuple`` space.
      config: its ``torso`` picks the grid leaves' encoders, ``activation`` the dense
        layers'.
      hidden_sizes: the dense layers after the concatenation.
      use_conv: encode grid leaves (:func:`is_grid`) with conv torsos (False: flatten them,
        as the MLP does).
    Gradients flow into every weight (not the observation).
    """

    def __init__(
        self,
        observation_space,
        config: NetworkConfig,
        hidden_sizes: tuple[int, ...],
        use_conv: bool = True,
        **kw,
    ):
        super().__init__(**kw)
        # The action mask is no feature (networks/action_masks.py): its leaf is left out.
        self.structure = space_nest(action_masks.without_mask(observation_space))
        conv = use_conv and config.torso in CONV_TORSOS
        self.encoders = []
        for space in tf.nest.flatten(self.structure):
            scale = 1.0 if isinstance(space, gym.spaces.Discrete) else torsos.input_scale_for(space)
            encoder = conv_torso(config, space.shape, scale) if conv and is_grid(space) else None
            if encoder is None:  # flatten (one-hot for Discrete)
                cats = int(space.n) if isinstance(space, gym.spaces.Discrete) else None
                encoder = torsos.MLPTorso((), config.mlp_activation, cats, scale)
            self.encoders.append(encoder)
        torsos.track_layers(self, "encoder", self.encoders)
        self.mlp = torsos.MLPTorso(hidden_sizes, config.mlp_activation, input_scale=1.0)

    def build(self, input_shape):
        self.built = True  # sublayers build on the first call

    def call(self, observation) -> tf.Tensor:
        leaves = tf.nest.flatten(action_masks.without_mask(observation))
        if len(leaves) != len(self.encoders):
            raise ValueError(
                f"observation: expected {len(self.encoders)} leaves, got {len(leaves)}"
            )
        codes = [encoder(x) for encoder, x in zip(self.encoders, leaves)]
        return self.mlp(tf.concat(codes, axis=-1))
