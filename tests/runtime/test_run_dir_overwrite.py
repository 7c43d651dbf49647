"""--overwrite removes only a run's own entries: never a non-run directory's checkpoints/ or
policy/, never through a symbolic link; partial *.tmp writes are neither left nor counted."""

import json
import os

import pytest

from tfagents_vtrace.runtime.rundir import config_io, run_dir

CONFIG = {"agent": "impala", "env_id": "CartPole-v1", "network_config": {"hidden_sizes": [16]}}


def _tree(path):
    return sorted(
        os.path.relpath(os.path.join(root, name), path)
        for root, dirs, files in os.walk(path)
        for name in dirs + files
    )


def test_overwrite_keeps_the_checkpoints_and_policy_of_a_directory_that_is_not_a_run(tmp_path):
    for name in ("checkpoints", "policy"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "mine.txt").write_text("mine")
    (tmp_path / "config.json").write_text('{"learning_rate": 0.1}')  # some other tool's
    before = _tree(tmp_path)
    with pytest.raises(ValueError, match=r"^logdir: .* holds checkpoints, config\.json, policy "
                                         r"but no run's config\.json; overwrite"):  # fmt: skip
        run_dir.prepare_logdir(str(tmp_path), CONFIG, overwrite=True)
    assert _tree(tmp_path) == before
    (tmp_path / "config.json").unlink()
    with pytest.raises(ValueError, match=r"holds checkpoints, policy but no run's config\.json"):
        run_dir.prepare_logdir(str(tmp_path), CONFIG, overwrite=True)
    assert (tmp_path / "policy" / "mine.txt").read_text() == "mine"


def test_overwrite_unlinks_symlinked_entries_without_following_them(tmp_path):
    logdir, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    config_io.write_config(str(logdir), CONFIG)
    (logdir / "policy").symlink_to(outside)
    (logdir / "checkpoints").symlink_to(outside)
    (logdir / "metrics.jsonl").symlink_to(outside / "keep.txt")
    (logdir / "notes.txt").write_text("mine")
    assert run_dir.prepare_logdir(str(logdir), CONFIG, overwrite=True) == "new"
    assert sorted(os.listdir(logdir)) == ["notes.txt"]
    assert (outside / "keep.txt").read_text() == "keep"


def test_overwrite_of_a_run_removes_its_history_and_partial_writes(tmp_path):
    logdir = tmp_path / "run [1]"  # glob metacharacters in the name
    config_io.write_config(str(logdir), CONFIG)
    for name in ("config.before-resume-1.json", "events.out.tfevents.1.host", "final.json.tmp"):
        (logdir / name).write_text("{}")
    assert run_dir.prepare_logdir(str(logdir), CONFIG, overwrite=True) == "new"
    assert os.listdir(logdir) == []


def test_partial_writes_are_not_counted_as_files(tmp_path):
    (tmp_path / "config.json.tmp").write_text('{"agent": ')  # a write cut by a kill
    assert run_dir.prepare_logdir(str(tmp_path), CONFIG) == "new"


def test_write_config_leaves_no_tmp_file_when_it_fails(tmp_path):
    with pytest.raises(TypeError):
        config_io.write_config(str(tmp_path), {"fn": print})
    assert os.listdir(tmp_path) == []
    config_io.write_config(str(tmp_path), CONFIG)
    with pytest.raises(TypeError):
        config_io.write_config(str(tmp_path), {"fn": print})
    assert os.listdir(tmp_path) == ["config.json"]
    assert json.load(open(tmp_path / "config.json")) == CONFIG  # the previous one is intact


def test_overwrite_removes_an_export_cut_by_a_kill(tmp_path):
    config_io.write_config(str(tmp_path), CONFIG)
    (tmp_path / "policy.tmp-123-abc" / "variables").mkdir(parents=True)
    (tmp_path / "policy.old-123-def").mkdir()
    assert run_dir.prepare_logdir(str(tmp_path), CONFIG, overwrite=True) == "new"
    assert os.listdir(tmp_path) == []


def test_the_end_of_a_run_replaces_its_own_partial_policy(tmp_path):
    """A policy/ without saved_model.pb (an export cut by a kill, before exports were
    atomic) is the run's own: the end of the run replaces it instead of refusing it."""
    import gymnasium as gym
    import numpy as np

    from tfagents_vtrace.export.saved_model import export_policy
    from tfagents_vtrace.networks import NetworkConfig, make_network
    from tfagents_vtrace.runtime.rundir.run_dir import export_into_run

    net = make_network(NetworkConfig(hidden_sizes=(4,)), gym.spaces.Box(-1, 1, (3,), np.float32),
                       gym.spaces.Discrete(2))  # fmt: skip
    (tmp_path / "policy" / "variables").mkdir(parents=True)
    export_into_run(str(tmp_path / "policy"), lambda p: export_policy(net, p, overwrite=True))
    assert (tmp_path / "policy" / "saved_model.pb").exists()
    assert sorted(os.listdir(tmp_path)) == ["policy"]
