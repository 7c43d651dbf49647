"""Policy export never deletes what it did not write: a SavedModel is written beside the
target and renamed into place; anything else at the target is refused, even with overwrite."""

import os

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tfagents_vtrace.export.saved_model import export_policy
from tfagents_vtrace.export.target import check_export_path, write_atomically
from tfagents_vtrace.networks import NetInputs, NetworkConfig, make_network

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Discrete(2)


def _net():
    return make_network(NetworkConfig(hidden_sizes=(4,)), OBS, ACT)


def test_overwrite_refuses_a_directory_that_is_not_a_saved_model(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("mine")
    for path in (work, "."):  # `--output=. --overwrite` from inside a working directory
        monkeypatch.chdir(work)
        with pytest.raises(ValueError, match=r"^path: .* not a SavedModel \(no saved_model\.pb\)"):
            export_policy(_net(), path, overwrite=True)
        assert (work / "notes.txt").read_text() == "mine"
    assert sorted(os.listdir(work)) == ["notes.txt"]  # no temporary directory left either
    assert sorted(os.listdir(tmp_path)) == ["work"]


def test_overwrite_refuses_a_file_and_a_symlink(tmp_path):
    target = tmp_path / "policy.txt"
    target.write_text("mine")
    with pytest.raises(ValueError, match=r"^path: .* is a file"):
        export_policy(_net(), target, overwrite=True)
    assert target.read_text() == "mine"
    saved = tmp_path / "saved"
    export_policy(_net(), saved)
    link = tmp_path / "link"
    link.symlink_to(saved)
    with pytest.raises(ValueError, match=r"^path: .* symbolic link"):
        export_policy(_net(), link, overwrite=True)
    assert link.is_symlink() and (saved / "saved_model.pb").exists()


def test_overwrite_replaces_a_saved_model_and_an_empty_directory(tmp_path):
    (tmp_path / "empty").mkdir()
    export_policy(_net(), tmp_path / "empty")  # an empty directory needs no overwrite
    assert (tmp_path / "empty" / "saved_model.pb").exists()
    target = tmp_path / "policy"
    export_policy(_net(), target)
    with pytest.raises(ValueError, match=r"^path: .* pass overwrite=True"):
        export_policy(_net(), target)
    net = _net()
    export_policy(net, target, overwrite=True)
    policy = tf.saved_model.load(str(target))
    obs = np.random.default_rng(0).uniform(-1, 1, (5, 3)).astype(np.float32)
    first, prev_action, prev_reward = np.ones(5, bool), np.zeros(5, np.int32), np.zeros(5)
    state = policy.get_initial_state(batch_size=tf.constant(5))
    out = policy.greedy_action(observation=obs, first=first, prev_action=prev_action,
                               prev_reward=prev_reward.astype(np.float32), state=state)  # fmt: skip
    expected = net(NetInputs(obs, first, prev_action, prev_reward.astype(np.float32)), ())
    # the new network, not the one replaced (another initialisation differs by ~0.1)
    np.testing.assert_allclose(out["value"].numpy(), expected.value.numpy(), rtol=1e-5, atol=1e-6)
    assert sorted(os.listdir(tmp_path)) == ["empty", "policy"]  # nothing left beside


def test_a_failed_save_keeps_the_previous_policy(tmp_path, monkeypatch):
    target = tmp_path / "policy"
    export_policy(_net(), target)
    before = {p: (target / p).stat().st_mtime_ns for p in os.listdir(target)}
    real_save = tf.saved_model.save

    def failing_save(module, directory, signatures=None):
        real_save(module, directory, signatures=signatures)  # half of the files written...
        raise OSError("disk full")  # ...then the save fails

    monkeypatch.setattr(tf.saved_model, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        export_policy(_net(), target, overwrite=True)
    assert {p: (target / p).stat().st_mtime_ns for p in os.listdir(target)} == before
    assert sorted(os.listdir(tmp_path)) == ["policy"]  # the temporary directory is gone
    tf.saved_model.load(str(target))  # still a whole SavedModel


def test_write_atomically_renames_into_place(tmp_path):
    target = tmp_path / "out"
    seen = []

    def write(directory):
        seen.append(directory)
        assert os.path.dirname(directory) == str(tmp_path) and os.listdir(directory) == []
        open(os.path.join(directory, "saved_model.pb"), "w").close()

    assert write_atomically(target, write) == str(target)
    assert os.path.basename(seen[0]).startswith(f"out.tmp-{os.getpid()}-")
    assert write_atomically(target, write, overwrite=True) == str(target)
    assert os.listdir(tmp_path) == ["out"]
    assert check_export_path(tmp_path / "absent", False) is False
    assert check_export_path(target, True, name="output") is True
    with pytest.raises(ValueError, match=r"^output: "):
        check_export_path(target, False, name="output")


def test_taac_export_is_atomic_too(tmp_path, monkeypatch):
    """TAAC's policy module goes through the same writer."""
    from tfagents_vtrace.agents.taac import TaacConfig, TaacLearner, TaacPolicyModule

    small = dict(actor_hidden_sizes=(8,), critic_hidden_sizes=(8,))
    learner = TaacLearner(TaacConfig(**small), (3,), 1, seed=0)
    module = TaacPolicyModule(learner, gym.spaces.Box(-2.0, 2.0, (1,), np.float32))
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"^path: .* not a SavedModel"):
        export_policy(module, str(work), overwrite=True)
    assert sorted(os.listdir(work)) == ["notes.txt"]
    target = str(tmp_path / "policy")
    export_policy(module, target)
    before = sorted(os.listdir(target))

    def failing_save(module, directory, signatures=None):
        raise OSError("disk full")

    monkeypatch.setattr(tf.saved_model, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        export_policy(module, target, overwrite=True)
    assert sorted(os.listdir(target)) == before and "saved_model.pb" in before
    assert sorted(os.listdir(tmp_path)) == ["policy", "work"]
