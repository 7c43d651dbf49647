"""Replay archives: round trip, atomic writes, and corruption reported, never loaded."""

import os
import zipfile

import numpy as np
import pytest

from tfagents_vtrace.replay import storage


def _arrays():
    rng = np.random.default_rng(0)
    return {
        "observation": rng.normal(size=(7, 4)).astype(np.float32),
        "action": rng.integers(0, 3, size=7).astype(np.int32),
        "done": np.array([0, 0, 1, 0, 0, 0, 1], bool),
    }


def test_round_trip_keeps_values_dtypes_and_meta(tmp_path):
    path = storage.replay_path(str(tmp_path), 1200)
    assert path.endswith(os.path.join("checkpoints", "replay-1200.npz"))
    storage.save_arrays(path, _arrays(), {"size": 7, "cursor": 3})
    arrays, meta = storage.load_arrays(path)
    assert meta == {"size": 7, "cursor": 3}
    for name, value in _arrays().items():
        assert arrays[name].dtype == value.dtype
        np.testing.assert_array_equal(arrays[name], value)
    assert storage.latest_replay_path(str(tmp_path), 1200) == path
    assert storage.latest_replay_path(str(tmp_path), 1300) is None
    assert not [p for p in os.listdir(tmp_path / "checkpoints") if ".tmp" in p]


def _rewrite_members(path: str, edit) -> None:
    """Rewrites the archive's zip members as ``edit(dict name -> bytes)`` returns them."""
    with zipfile.ZipFile(path) as z:
        members = edit({n: z.read(n) for n in z.namelist()})
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)


def _flip_last_byte(members: dict) -> dict:
    raw = bytearray(members["observation.npy"])
    raw[-1] ^= 0xFF
    return {**members, "observation.npy": bytes(raw)}


def test_flipped_byte_raises(tmp_path):
    path = str(tmp_path / "r.npz")
    storage.save_arrays(path, _arrays())
    # Rewrite one member with a changed value but a valid zip: only the checksum can tell.
    _rewrite_members(path, _flip_last_byte)
    with pytest.raises(storage.ReplayCorruptError, match="checksum mismatch in 'observation'"):
        storage.load_arrays(path)


def test_truncated_file_raises(tmp_path):
    path = str(tmp_path / "r.npz")
    storage.save_arrays(path, _arrays())
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size // 2)
    with pytest.raises(storage.ReplayCorruptError, match="r.npz"):
        storage.load_arrays(path)


def test_missing_member_and_missing_header_raise(tmp_path):
    path = str(tmp_path / "r.npz")
    np.savez(path, a=np.zeros(3))  # a plain npz: no header
    with pytest.raises(storage.ReplayCorruptError, match="header"):
        storage.load_arrays(path)
    storage.save_arrays(path, _arrays())
    _rewrite_members(path, lambda members: {n: d for n, d in members.items() if n != "done.npy"})
    with pytest.raises(storage.ReplayCorruptError, match="differ"):
        storage.load_arrays(path)


def test_bad_input_names_the_argument(tmp_path):
    with pytest.raises(ValueError, match="path"):
        storage.save_arrays(str(tmp_path / "r.bin"), _arrays())
    with pytest.raises(ValueError, match=r"arrays\['x'\]"):
        storage.save_arrays(str(tmp_path / "r.npz"), {"x": np.array([object()])})
    with pytest.raises(ValueError, match="meta"):
        storage.save_arrays(str(tmp_path / "r.npz"), _arrays(), {"f": object()})
    with pytest.raises(FileNotFoundError, match="path"):
        storage.load_arrays(str(tmp_path / "none.npz"))


def test_prune_keeps_only_listed_steps(tmp_path):
    for step in (100, 200, 300):
        storage.save_arrays(storage.replay_path(str(tmp_path), step), _arrays())
    removed = storage.prune_replays(str(tmp_path), [200, 300])
    assert [os.path.basename(p) for p in removed] == ["replay-100.npz"]
    assert sorted(os.listdir(tmp_path / "checkpoints")) == ["replay-200.npz", "replay-300.npz"]
