"""Input validation shared by the ops: static rank/shape/dtype checks with clear errors.

Every check raises ``ValueError`` naming the argument, what was expected and what was
received, before any arithmetic runs. Checks use static shapes, so they cost nothing inside
``tf.function``; dimensions unknown at trace time are accepted.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf


def to_float(name: str, value, dtype: tf.DType | None = None) -> tf.Tensor:
    """Converts ``value`` to a floating tensor; rejects integer and boolean tensors.

    Python floats and numpy float arrays convert to ``dtype`` (default float32). Integer
    *tensors/arrays* are rejected rather than silently cast, since integer values or
    discounts usually mean the wrong array was passed. Rewards go through
    `rewards_to_float` instead.
    """
    if isinstance(value, np.ndarray | np.generic) and value.dtype.kind != "f":
        # convert_to_tensor(int_array, dtype_hint=float32) would cast silently.
        raise ValueError(f"`{name}` must be a floating-point tensor, got dtype {value.dtype}.")
    if isinstance(value, tf.Tensor | tf.Variable):
        t = tf.convert_to_tensor(value)
    else:
        t = tf.convert_to_tensor(value, dtype_hint=dtype or tf.float32)
    if not t.dtype.is_floating:
        raise ValueError(f"`{name}` must be a floating-point tensor, got dtype {t.dtype.name}.")
    if dtype is not None and t.dtype != dtype:
        t = tf.cast(t, dtype)
    return t


def rewards_to_float(name: str, value, dtype: tf.DType | None = None) -> tf.Tensor:
    """`to_float` for rewards: integer rewards are cast to ``dtype`` (default float32).

    Both reference documents accept integer rewards: scalable_agent converts ``rewards``
    to float32 and DI-engine documents ``reward`` as a LongTensor (torch promotes it).
    Boolean rewards are still rejected.
    """
    if isinstance(value, np.ndarray | np.generic) and value.dtype.kind in "iu":
        return tf.convert_to_tensor(value.astype((dtype or tf.float32).as_numpy_dtype))
    if isinstance(value, tf.Tensor | tf.Variable) and value.dtype.is_integer:
        return tf.cast(value, dtype or tf.float32)
    return to_float(name, value, dtype)


def check_rank(name: str, t: tf.Tensor, rank: int | Sequence[int]) -> None:
    """Raises ValueError unless ``t`` has the given rank (or one of the given ranks)."""
    ranks = (rank,) if isinstance(rank, int) else tuple(rank)
    r = t.shape.rank
    if r is not None and r not in ranks:
        want = " or ".join(str(x) for x in ranks)
        raise ValueError(
            f"`{name}` must have rank {want}, got rank {r} with shape {t.shape.as_list()}."
        )


def check_min_rank(name: str, t: tf.Tensor, rank: int) -> None:
    """Raises ValueError unless ``t`` has rank >= ``rank``."""
    r = t.shape.rank
    if r is not None and r < rank:
        raise ValueError(
            f"`{name}` must have rank >= {rank}, got rank {r} with shape {t.shape.as_list()}."
        )


def check_shape(
    name: str, t: tf.Tensor, expected: Sequence[int | None] | tf.TensorShape, ref: str = ""
) -> None:
    """Raises ValueError unless ``t``'s static shape is compatible with ``expected``.

    ``ref`` names where the expected shape comes from (e.g. "rewards"), for the message.
    """
    expected = tf.TensorShape(expected)
    if not t.shape.is_compatible_with(expected):
        src = f" (the shape of `{ref}`)" if ref else ""
        raise ValueError(
            f"`{name}` must have shape {expected.as_list()}{src}, got {t.shape.as_list()}."
        )


def check_same_shape(name: str, t: tf.Tensor, ref_name: str, ref: tf.Tensor) -> None:
    """Raises ValueError unless ``t`` and ``ref`` have compatible static shapes."""
    check_shape(name, t, ref.shape, ref=ref_name)
