"""Recording evaluation episodes as MP4 videos (``tv.evaluate(..., video_dir=DIR)``,
``tfv-evaluate --video=DIR``).

The evaluation's vector of environments is then a sync vector whose sub-environments are
made with ``render_mode="rgb_array"`` (gymnasium renders such an environment only when
``render()`` is called: https://gymnasium.farama.org/api/env/#gymnasium.Env.render), and
:class:`RecordFirst` renders sub-environment 0 after its reset and after every step. Every
episode that sub-environment plays for the evaluation becomes one file,
``DIR/episode-<k>.mp4`` (k = 0, 1, ... in the order they were played), written beside as
``DIR/.episode-<k>.mp4.part`` and renamed when the episode ends. The frames are encoded as
they come (H.264 at the environment's ``render_fps``, 30 without one) by PyAV
(https://pyav.basswood-io.com), the ``video`` extra, which also brings pygame, the renderer
of gymnasium's classic-control tasks (``gymnasium[classic-control]``).

Refused with one line naming ``video_dir`` (the command says ``--video``): PyAV missing (the
extra to install), a file of the recording already there (nothing is overwritten), an
environment without ``rgb_array`` rendering, and a render that is not an RGB image.
"""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
import numpy as np

EXTRA = "video"
INSTALL = f"pip install 'tfagents_vtrace[{EXTRA}]'"


def check_video_extra(name: str = "video_dir") -> None:
    """Raises ``ValueError("<name>: ...")`` naming the extra when PyAV is not installed."""
    import importlib.util

    if importlib.util.find_spec("av") is None:
        raise ValueError(f"{name}: recording videos needs PyAV, which is not installed: {INSTALL}")


def video_paths(directory: str | os.PathLike, count: int) -> list[str]:
    """The files of ``count`` recorded episodes: ``directory/episode-<k>.mp4``."""
    return [os.path.join(os.fspath(directory), f"episode-{k}.mp4") for k in range(count)]


def check_video_dir(directory: str | os.PathLike, count: int, name: str = "video_dir") -> None:
    """Raises ``ValueError("<name>: ...")`` when ``directory`` is a file or already holds one
    of the recording's files (:func:`video_paths`): nothing is overwritten."""
    directory = os.fspath(directory)
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise ValueError(f"{name}: {directory} is a file, expected a directory")
    for path in video_paths(directory, count):
        if os.path.exists(path):
            raise ValueError(
                f"{name}: {path} exists (an earlier recording?); remove it or choose another "
                "directory"
            )


class EpisodeWriter:
    """One MP4 file (H.264, yuv420p) written frame by frame to ``path + ".part"`` beside
    ``path``, renamed to ``path`` by :meth:`close`. Frames are ``[H, W, 3]`` uint8 of one
    size; an odd height or width is padded by one edge row / column (yuv420p needs even
    sizes)."""

    def __init__(self, path: str, fps: float):
        import av

        self.path, self.frames = path, 0
        self._part = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".part")
        self._container = av.open(self._part, mode="w", format="mp4")
        self._fps, self._stream = fps, None

    def add(self, frame: np.ndarray) -> None:
        import av

        frame = np.asarray(frame, np.uint8)
        pad = [(0, frame.shape[0] % 2), (0, frame.shape[1] % 2), (0, 0)]
        if any(p[1] for p in pad):
            frame = np.pad(frame, pad, mode="edge")
        if self._stream is None:
            from fractions import Fraction

            rate = Fraction(self._fps).limit_denominator(1000)
            self._stream = self._container.add_stream("libx264", rate=rate)
            self._stream.height, self._stream.width = frame.shape[:2]
            self._stream.pix_fmt = "yuv420p"
        image = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")
        for packet in self._stream.encode(image):
            self._container.mux(packet)
        self.frames += 1

    def close(self) -> str:
        """Flushes the encoder, closes the file and renames it into place; returns ``path``."""
        if self._stream is not None:
            for packet in self._stream.encode():
                self._container.mux(packet)
        self._container.close()
        os.replace(self._part, self.path)
        return self.path

    def abandon(self) -> None:
        """Closes and removes the unfinished file."""
        try:
            self._container.close()
        finally:
            if os.path.exists(self._part):
                os.remove(self._part)


def _frame(env, env_id: str) -> np.ndarray:
    """``env.render()`` as an ``[H, W, 3]`` uint8 image; ValueError naming ``video_dir`` when
    it is not one (or pygame, the classic-control renderer, is missing)."""
    try:
        frame = env.render()
    except gym.error.DependencyNotInstalled as e:
        raise ValueError(f"video_dir: rendering {env_id} needs {e}; or: {INSTALL}") from e
    frame = None if frame is None else np.asarray(frame)
    if frame is None or frame.ndim != 3 or frame.shape[-1] != 3:
        got = "None" if frame is None else f"an array of shape {frame.shape}"
        raise ValueError(
            f"video_dir: {env_id} does not render RGB images (render() returned {got} with "
            "render_mode='rgb_array'), so its episodes cannot be recorded"
        )
    if frame.dtype != np.uint8:
        frame = np.clip(frame, 0, 255).astype(np.uint8)
    return frame


def check_renders(env: Any, env_id: str) -> None:
    """Raises ValueError naming ``video_dir`` unless ``env`` (one environment) was made with
    ``render_mode="rgb_array"`` and lists it among its ``render_modes``."""
    modes = list(env.metadata.get("render_modes") or [])
    if env.render_mode != "rgb_array" or "rgb_array" not in modes:
        raise ValueError(
            f"video_dir: {env_id} has no rgb_array rendering (its render_modes: {modes}), so "
            "its episodes cannot be recorded"
        )


class RecordFirst(gym.vector.VectorWrapper):
    """Records episodes of sub-environment 0 of ``env``, a sync vector (NEXT_STEP autoreset)
    whose sub-environments were made with ``render_mode="rgb_array"``: the first
    ``episodes`` that begin after :meth:`reset`, one :class:`EpisodeWriter` each (module
    docstring). ``videos`` lists the files written, ``frames`` their frame counts.

    Args:
      env: the vector (its ``envs[0]`` is rendered).
      env_id: named in errors.
      directory: where the files go (made if missing).
      episodes: how many episodes to record.
    """

    def __init__(self, env: Any, env_id: str, directory: str | os.PathLike, episodes: int):
        super().__init__(env)
        sub_envs = getattr(env, "envs", None)
        if not sub_envs:
            raise ValueError(f"video_dir: the vector of {env_id} has no sub-environment to render")
        self.env_id, self._first = env_id, sub_envs[0]
        check_renders(self._first, env_id)
        self.directory = os.fspath(directory)
        self._paths = video_paths(self.directory, episodes)
        self._fps = float(self._first.metadata.get("render_fps") or 30)
        self._writer: EpisodeWriter | None = None
        self._was_done = False
        self.videos: list[str] = []
        self.frames: list[int] = []

    def _start(self) -> None:
        """Opens the next episode's file with its first frame (none once all are written)."""
        if len(self.videos) < len(self._paths):
            frame = _frame(self._first, self.env_id)  # before a file exists: errors leave none
            os.makedirs(self.directory, exist_ok=True)
            self._writer = EpisodeWriter(self._paths[len(self.videos)], self._fps)
            self._writer.add(frame)

    def reset(self, *, seed=None, options=None):
        result = self.env.reset(seed=seed, options=options)
        self.discard()
        self._was_done = False
        self._start()
        return result

    def step(self, actions):
        result = self.env.step(actions)
        terminated, truncated = result[2], result[3]
        if self._was_done:  # NEXT_STEP: this step reset sub-environment 0
            self._start()
        elif self._writer is not None:
            self._writer.add(_frame(self._first, self.env_id))
        self._was_done = bool(terminated[0] or truncated[0])
        if self._was_done and self._writer is not None:
            self.frames.append(self._writer.frames)
            self.videos.append(self._writer.close())
            self._writer = None
        return result

    def discard(self) -> None:
        """Removes an episode file still being written (its episode did not end)."""
        if self._writer is not None:
            self._writer.abandon()
            self._writer = None

    def close(self, **kwargs) -> None:
        self.discard()
        self.env.close(**kwargs)
