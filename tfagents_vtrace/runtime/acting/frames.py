"""Frames shipped once: a stacked-frame observation as each frame once, and back, exactly.

An Atari unroll's observation is ``[T+1, B, H, W, S]`` uint8, the last ``S`` frames stacked
on the last axis, newest last (:mod:`tfagents_vtrace.envs.atari`). Step ``t``'s stack is
usually step ``t - 1``'s slid by one with one new frame, so the plain array carries every
frame ``S`` times. :func:`pack` keeps, per column ``b``, a sequence of frames:

* at ``t = 0`` and wherever the stack did not slide (``obs[t, b, ..., :S-1] !=
  obs[t-1, b, ..., 1:]``: a reset, a restarted environment, anything), the whole stack;
* wherever it slid, only the newest frame ``obs[t, b, ..., S-1]``;

as ``frames [L, B, H, W]`` (each column's sequence, padded with zeros to the longest, ``L``)
and ``index [T+1, B]`` int32, the position in ``frames`` of step ``t``'s newest frame in
column ``b``. Step ``t``'s stack is then ``frames[index[t, b] - S + 1 .. index[t, b], b]``,
moved to the last axis, which is what :func:`unpack` gathers: the result is the original
array bit for bit, whatever the environment did at its resets, since a step is
stored from its own stack whenever the slide does not hold.

:func:`pack` leaves anything else as it is: a Dict / Tuple observation, another dtype, a
last axis of 1, or an array whose stacks slide at most at half the steps (no frame stack:
the packed form would not be smaller).

Actors that ship unrolls to the learner (``RunConfig.ship_frames_once``: a Ray cluster's
actors by default, others on request) pack them with :func:`pack_unroll` as an unroll ends,
and the learner's process unpacks them with :func:`unpack_unroll` before the learner takes
them (the Ray pool's thread as they arrive, the unroll source for actor threads), so the
learner, the replay and the statistics see the plain layout of
:mod:`~tfagents_vtrace.runtime.acting.actor`. Both make a few passes over the unroll's
bytes: :func:`slid` compares each step's bytes with the step before's, contiguously, and
:func:`unpack` fills one step at a time, while its frames are in the cache.
"""

from __future__ import annotations

import dataclasses

import numpy as np

MIN_SLID = 0.5
""":func:`pack` packs only when more than this fraction of the stacks after the first step
slid (else the array is no frame stack, and its packed form would be no smaller)."""


@dataclasses.dataclass(frozen=True)
class PackedFrames:
    """A stacked-frame observation with each frame once (module docstring)."""

    frames: np.ndarray
    """``[L, B, H, W]`` (any frame shape after ``B``): each column's frame sequence."""
    index: np.ndarray
    """``[T+1, B]`` int32: the position in ``frames`` of each step's newest frame."""
    stack: int
    """``S``, the frames per stack."""

    @property
    def nbytes(self) -> int:
        return self.frames.nbytes + self.index.nbytes


def packable(observation) -> bool:
    """Whether :func:`pack` considers ``observation``: a uint8 array ``[T+1, B, ..., S]``
    with ``S >= 2``."""
    return (
        isinstance(observation, np.ndarray)
        and observation.dtype == np.uint8
        and observation.ndim >= 3
        and observation.shape[-1] >= 2
    )


def slid(observation: np.ndarray) -> np.ndarray:
    """``[T, B]`` bool: step ``t + 1``'s stack is step ``t``'s slid by one frame.

    Compares each step's flat bytes with the previous step's one byte further on (frame
    ``k`` against the previous frame ``k + 1`` of the same pixel), which the newest frame,
    having no successor, skips: contiguous comparisons, one step at a time."""
    steps, b, s = observation.shape[0], observation.shape[1], observation.shape[-1]
    flat = np.ascontiguousarray(observation).reshape(steps, -1)
    newest = np.zeros(flat.shape[1], bool)
    newest.reshape(-1, s)[:, -1] = True
    same = np.zeros(flat.shape[1], bool)
    out = np.empty((steps - 1, b), bool)
    for t in range(steps - 1):
        np.equal(flat[t + 1, :-1], flat[t, 1:], out=same[:-1])
        same |= newest
        out[t] = same.reshape(b, -1).all(axis=1)
    return out


def pack(observation):
    """``observation`` with each frame once (a :class:`PackedFrames`), or ``observation``
    itself where packing does not apply (module docstring)."""
    if not packable(observation):
        return observation
    s = observation.shape[-1]
    moved = slid(observation)
    if moved.size and moved.mean() <= MIN_SLID:
        return observation
    whole = np.concatenate([np.ones((1, moved.shape[1]), bool), ~moved])  # [T+1, B]
    index = (np.cumsum(np.where(whole, s, 1), axis=0) - 1).astype(np.int32)
    b = observation.shape[1]
    cols = np.arange(b)
    frames = np.zeros((int(index[-1].max()) + 1, b, *observation.shape[2:-1]), np.uint8)
    frames[index, cols] = observation[..., -1]
    steps, where = np.nonzero(whole)
    for k in range(s - 1):
        frames[index[steps, where] - (s - 1 - k), where] = observation[steps, where, ..., k]
    return PackedFrames(frames, index, s)


def unpack(packed: PackedFrames) -> np.ndarray:
    """The observation :func:`pack` packed, ``[T+1, B, ..., S]`` uint8.

    Raises:
      TypeError: ``packed`` is not a :class:`PackedFrames`.
      ValueError: its arrays do not fit together (shapes, an index outside ``frames``).
    """
    if not isinstance(packed, PackedFrames):
        raise TypeError(f"unpack: expected PackedFrames, received {type(packed).__name__}")
    frames, index, s = packed.frames, np.asarray(packed.index), int(packed.stack)
    if frames.ndim < 2 or index.ndim != 2 or index.shape[1] != frames.shape[1] or s < 2:
        raise ValueError(
            f"unpack: expected frames [L, B, ...], index [T+1, B] and stack >= 2, received "
            f"frames {frames.shape}, index {index.shape}, stack {s}"
        )
    if index.size and (index.min() < s - 1 or index.max() >= frames.shape[0]):
        raise ValueError(
            f"unpack: index must lie in [{s - 1}, {frames.shape[0] - 1}] (stack {s}, "
            f"{frames.shape[0]} frames), received [{index.min()}, {index.max()}]"
        )
    out = np.empty((*index.shape, *frames.shape[2:], s), frames.dtype)
    cols = np.arange(index.shape[1])
    for t in range(index.shape[0]):  # a step at a time: its frames stay in the cache
        for k in range(s):
            out[t, ..., k] = frames[index[t] - (s - 1 - k), cols]
    return out


def pack_unroll(unroll: dict) -> dict:
    """``unroll`` with its observation packed (:func:`pack`)."""
    return {**unroll, "observation": pack(unroll["observation"])}


def unpack_unroll(unroll: dict) -> dict:
    """``unroll`` with a packed observation unpacked (:func:`unpack`); any other unroll as
    it is."""
    if isinstance(unroll.get("observation"), PackedFrames):
        return {**unroll, "observation": unpack(unroll["observation"])}
    return unroll
