"""prune_replays also removes the replay-<step>.tmp.npz that a save killed before its rename
leaves (it was never pruned: its name does not parse as an archive's)."""

import os

import numpy as np

from tfagents_vtrace.replay import storage


def test_prune_removes_leftover_temporary_archives(tmp_path):
    arrays = {"x": np.arange(6, dtype=np.float32)}
    for step in (100, 200):
        storage.save_arrays(storage.replay_path(str(tmp_path), step), arrays)
    ckpt = tmp_path / "checkpoints"
    (ckpt / "replay-300.tmp.npz").write_bytes(b"PK\x03\x04 cut by a kill")
    (ckpt / "notes.npz").write_bytes(b"not ours")
    removed = storage.prune_replays(str(tmp_path), [200])
    assert sorted(os.path.basename(p) for p in removed) == ["replay-100.npz", "replay-300.tmp.npz"]
    assert sorted(os.listdir(ckpt)) == ["notes.npz", "replay-200.npz"]
    arrays_back, _ = storage.load_arrays(storage.replay_path(str(tmp_path), 200))
    np.testing.assert_array_equal(arrays_back["x"], arrays["x"])
