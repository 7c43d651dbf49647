"""A run touches only what is its own: a ``checkpoints/`` folder holding anything a run does not
write, and a symbolic link in place of a run's entry, are refused in one line naming the path
before anything is written; a start that fails removes only the entries it added (its record,
``run_dir.START_RECORD``), never a file that was there before it."""

import json
import os
import stat
import subprocess
import sys

import pytest

from tests.runtime.test_actor_learner import AGENT, NET, _run
from tfagents_vtrace.runtime.driver import train
from tfagents_vtrace.runtime.rundir import checkpoint_files as files
from tfagents_vtrace.runtime.rundir import config_io, run_dir

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = {"agent": "impala", "env_id": "CartPole-v1", "network_config": {"hidden_sizes": [16]}}
STATE = 'model_checkpoint_path: "ckpt-10"\nall_model_checkpoint_paths: "ckpt-10"\n'


def _tree(path) -> dict:
    """Every path under ``path`` with its content (files), its target (links) or None (dirs)."""
    out = {}
    for root, dirs, names in os.walk(path):
        for name in dirs + names:
            full = os.path.join(root, name)
            rel = os.path.relpath(full, path)
            if os.path.islink(full):
                out[rel] = "-> " + os.readlink(full)
            elif os.path.isfile(full):
                out[rel] = open(full, "rb").read()
            else:
                out[rel] = None
    return out


def _write(path, text="mine"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def _fake_checkpoint(ckpt_dir, step=10):
    for name in (f"ckpt-{step}.index", f"ckpt-{step}.data-00000-of-00001"):
        _write(os.path.join(ckpt_dir, name), "")
    _write(os.path.join(ckpt_dir, "checkpoint"), STATE.replace("10", str(step)))


# Contents of a user's own checkpoints/ folder (relative path -> content; None: a directory),
# and the path the refusal names.
FOREIGN = {
    "notes": ({"notes.txt": "mine"}, "notes.txt"),
    "a_checkpoint_file_that_is_no_state_file": ({"checkpoint": "my text\n"}, "checkpoint"),
    "a_binary_checkpoint_file": ({"checkpoint": "\x00\x01"}, "checkpoint"),
    "a_nested_folder": ({"runs/old/data.csv": "1,2"}, "runs"),
    "an_empty_folder": ({"empty": None}, "empty"),
    "a_file_named_damaged": ({"damaged": "mine"}, "damaged"),
    "notes_in_damaged": ({"damaged/ckpt-0.index": "", "damaged/notes.txt": "x"},
                         "damaged/notes.txt"),
    "a_file_in_a_shard_folder": ({"ckpt-3_temp/mine.txt": "x"}, "ckpt-3_temp/mine.txt"),
    "a_folder_named_like_a_checkpoint": ({"ckpt-3.index": None}, "ckpt-3.index"),
    "a_near_miss_name": ({"ckpt-3.index.bak": "x"}, "ckpt-3.index.bak"),
    "a_replay_lookalike": ({"replay-3.npz.zip": "x"}, "replay-3.npz.zip"),
}  # fmt: skip


def _populate(ckpt_dir, contents):
    for rel, text in contents.items():
        path = os.path.join(ckpt_dir, rel)
        if text is None:
            os.makedirs(path, exist_ok=True)
        else:
            _write(path, text)


@pytest.mark.parametrize("with_run_checkpoint", [False, True], ids=["new", "resume"])
@pytest.mark.parametrize("case", FOREIGN)
def test_a_checkpoints_folder_holding_other_files_is_refused_naming_the_file(
    tmp_path, case, with_run_checkpoint
):
    contents, named = FOREIGN[case]
    logdir = tmp_path / "run"
    ckpt_dir = logdir / "checkpoints"
    ckpt_dir.mkdir(parents=True)
    if with_run_checkpoint:  # even beside a run's own checkpoint, or with --overwrite
        config_io.write_config(str(logdir), CONFIG)
        _fake_checkpoint(str(ckpt_dir), 30)
    _populate(str(ckpt_dir), contents)
    before = _tree(logdir)
    for overwrite in (False, True):
        with pytest.raises(ValueError) as raised:
            run_dir.prepare_logdir(str(logdir), CONFIG, overwrite=overwrite)
        message = str(raised.value)
        assert message.startswith("logdir: ") and "\n" not in message, message
        if with_run_checkpoint or not overwrite:  # else: "no run's config.json" comes first
            assert repr(str(ckpt_dir / named)) in message, message
        assert _tree(logdir) == before


def test_a_fifo_in_the_checkpoints_folder_is_refused(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    os.mkfifo(tmp_path / "checkpoints" / "ckpt-1.index")
    with pytest.raises(ValueError, match=r"^logdir: .*ckpt-1\.index' is not a run's checkpoint"):
        run_dir.prepare_logdir(str(tmp_path), CONFIG)
    assert stat.S_ISFIFO(os.lstat(tmp_path / "checkpoints" / "ckpt-1.index").st_mode)


# What a run itself leaves in checkpoints/ (kills included) is its own: a new run starts there.
OWN = {
    "empty": {},
    "a_state_file": {"checkpoint": STATE},
    "an_empty_state_file": {"checkpoint": ""},
    "a_torn_state_file": {"checkpoint": 'model_checkpoint_path: "ckpt-6'},
    "a_state_file_torn_in_its_key": {"checkpoint": STATE + "all_model_checkpoint_ti"},
    "temporary_state_files": {"checkpoint.tmp": "", "checkpoint.tmpb8c2251b8b9e49fe": ""},
    "a_shard_folder": {"ckpt-3_temp/part-00000-of-00001.data-00000-of-00001": ""},
    "a_shard_folder_of_folders": {"ckpt-3_temp/part-00000-of-00001": None},
    "a_tempstate_file": {"ckpt-3.index.tempstate123456": ""},
    "incomplete_checkpoint": {"ckpt-3.data-00000-of-00002": ""},
    "replay_archives": {"replay-3.npz": "", "replay-4.tmp.npz": ""},
    "damaged_files_and_copies": {"damaged/ckpt-0.index": "", "damaged/ckpt-0.index.1": "",
                                 "damaged/replay-0.npz.2": "", "damaged/ckpt-2_temp": None},
}  # fmt: skip


@pytest.mark.parametrize("case", OWN)
def test_what_a_run_leaves_in_its_checkpoints_folder_is_its_own(tmp_path, case):
    ckpt_dir = tmp_path / "checkpoints"
    ckpt_dir.mkdir()
    _populate(str(ckpt_dir), OWN[case])
    assert files.foreign_entry(str(ckpt_dir)) is None
    assert run_dir.prepare_logdir(str(tmp_path), CONFIG) == "new"


@pytest.mark.parametrize("target", ["empty", "state_file", "run_checkpoint"])
def test_a_symlinked_checkpoints_folder_is_refused_and_its_target_untouched(tmp_path, target):
    outside, logdir = tmp_path / "outside", tmp_path / "run"
    outside.mkdir()
    logdir.mkdir()
    if target == "state_file":  # the case: a `checkpoint` file in the link's target
        _write(str(outside / "checkpoint"), "precious")
    elif target == "run_checkpoint":
        _fake_checkpoint(str(outside))
        config_io.write_config(str(logdir), CONFIG)
    (logdir / "checkpoints").symlink_to(outside)
    before = _tree(tmp_path)
    with pytest.raises(ValueError, match=r"^logdir: .*checkpoints' is a symbolic link \(to "):
        run_dir.prepare_logdir(str(logdir), CONFIG)
    assert _tree(tmp_path) == before
    with pytest.raises(ValueError, match=r"^logdir: .*checkpoints' is a symbolic link"):
        _checkpointer(str(logdir))  # the checkpointer itself refuses it too
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("entry", ["config.json", "metrics.jsonl", "policy", "final.json",
                                   "events.out.tfevents.1.host", "checkpoints/checkpoint",
                                   "checkpoints/ckpt-10.index", "checkpoints/damaged"])  # fmt: skip
def test_a_symlinked_entry_of_the_run_is_refused(tmp_path, entry):
    outside, logdir = tmp_path / "outside", tmp_path / "run"
    _write(str(outside / "keep.txt"), "keep")
    config_io.write_config(str(logdir), CONFIG)
    _fake_checkpoint(str(logdir / "checkpoints"))
    link = logdir / entry
    if link.exists():
        link.unlink()
    link.symlink_to(outside if entry in ("policy", "checkpoints/damaged") else outside / "keep.txt")
    before = _tree(tmp_path)
    with pytest.raises(ValueError, match=rf"^logdir: .*{entry.split('/')[-1]}' is a symbolic link"):
        run_dir.prepare_logdir(str(logdir), CONFIG)
    assert _tree(tmp_path) == before


def _checkpointer(logdir):
    import tensorflow as tf

    from tfagents_vtrace.runtime.rundir.checkpointing import Checkpointer

    return Checkpointer(logdir, {"network": tf.Variable(1.0)})


def test_the_checkpointer_does_not_rewrite_a_state_file_of_a_folder_not_the_runs(tmp_path):
    ckpt_dir = tmp_path / "checkpoints"
    _write(str(ckpt_dir / "checkpoint"), "my own notes\n")
    _write(str(ckpt_dir / "notes" / "a.txt"))
    before = _tree(tmp_path)
    with pytest.raises(ValueError, match=r"^logdir: .*checkpoint' is not a run's checkpoint"):
        _checkpointer(str(tmp_path))
    assert _tree(tmp_path) == before


# ------------------------------------------------------------------ a start that fails
def _broken(num_envs, seed):
    raise RuntimeError("reset failed")


def _fail_start(logdir):
    with pytest.raises(RuntimeError, match="reset failed"):
        train(_run(1024), AGENT, AGENT.Config(), NET, str(logdir), env_factory=_broken)


def test_a_failed_start_leaves_the_directory_as_it_was(tmp_path):
    logdir = tmp_path / "run"
    # What was there before the start, some with the names a run writes: all kept.
    (logdir / "checkpoints" / "damaged").mkdir(parents=True)
    _write(str(logdir / "checkpoints" / "damaged" / "ckpt-0.index"), "")
    _write(str(logdir / "checkpoints" / "replay-7.npz"), "")
    for name in ("notes.txt", "events.out.tfevents.1.mine", "config.before-resume-1.json",
                 "metrics.jsonl.tmp", "policy.tmp-1-x"):  # fmt: skip
        _write(str(logdir / name))
    before = _tree(logdir)
    _fail_start(logdir)
    assert _tree(logdir) == before


def test_a_failed_start_in_a_new_directory_leaves_nothing(tmp_path):
    _fail_start(tmp_path / "run")
    assert not (tmp_path / "run").exists() or os.listdir(tmp_path / "run") == []


def test_a_killed_start_is_undone_from_its_record_keeping_what_was_there(tmp_path):
    logdir = tmp_path / "run"
    _write(str(logdir / "checkpoints" / "damaged" / "ckpt-0.index"), "")
    before = _tree(logdir)
    run_dir.record_start(str(logdir), run_dir.start_snapshot(str(logdir)))
    # What the start wrote before it was killed.
    config = config_io.run_config_dict("impala", _run(1024), AGENT.Config(), NET)
    config_io.write_config(str(logdir), config)
    _write(str(logdir / "metrics.jsonl"), "")
    _write(str(logdir / "events.out.tfevents.2.host"), "")
    _write(str(logdir / "checkpoints" / "ckpt-0.data-00000-of-00001"), "")
    assert run_dir.prepare_logdir(str(logdir), config) == "new"
    assert _tree(logdir) == before  # the record too is gone
    # The start then runs, fails, and again leaves the directory as it was.
    _fail_start(logdir)
    assert _tree(logdir) == before


def test_a_record_is_not_rewritten_and_a_foreign_file_by_its_name_is_refused(tmp_path):
    run_dir.record_start(str(tmp_path), {"before": ["a"], "checkpoints_before": None})
    run_dir.record_start(str(tmp_path), {"before": ["a", "b"], "checkpoints_before": None})
    assert run_dir.read_start_record(str(tmp_path))["before"] == ["a"]  # the older one stays
    run_dir.end_start(str(tmp_path))
    assert os.listdir(tmp_path) == []
    _write(str(tmp_path / run_dir.START_RECORD), '{"mine": true}')
    with pytest.raises(ValueError, match=r"^logdir: .*\.tfv-start\.json' is not a run's start"):
        run_dir.record_start(str(tmp_path), {"before": [], "checkpoints_before": None})
    with pytest.raises(ValueError, match=r"already holds files \(\.tfv-start\.json\)"):
        run_dir.prepare_logdir(str(tmp_path), CONFIG)
    run_dir.discard_start_files(str(tmp_path))  # not a record: not removed
    assert json.loads((tmp_path / run_dir.START_RECORD).read_text()) == {"mine": True}


def test_an_empty_record_is_a_start_killed_as_it_wrote_it(tmp_path):
    (tmp_path / run_dir.START_RECORD).write_text("")
    assert run_dir.prepare_logdir(str(tmp_path), CONFIG) == "new"
    run_dir.record_start(str(tmp_path), {"before": [], "checkpoints_before": None})
    assert run_dir.read_start_record(str(tmp_path)) is not None


def test_a_run_that_checkpointed_has_no_record(tmp_path):
    logdir = str(tmp_path / "run")
    final = train(_run(256), AGENT, AGENT.Config(), NET, logdir)
    assert final["step"] >= 256
    assert run_dir.START_RECORD not in os.listdir(logdir)


# ------------------------------------------------------------------ as the issue ran it
BROKEN_ENV = """
import gymnasium as gym
import numpy as np


class BrokenReset(gym.Env):
    observation_space = gym.spaces.Box(-1, 1, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        raise RuntimeError("reset is broken")

    def step(self, action):
        raise RuntimeError("never")


gym.register("BrokenReset-v0", entry_point=BrokenReset)
"""


@pytest.mark.slow  # a subprocess importing TensorFlow
def test_the_command_refuses_a_users_checkpoints_folder_and_a_symlinked_one(tmp_path):
    (tmp_path / "brokenenv_own.py").write_text(BROKEN_ENV)
    logdir, outside = tmp_path / "run", tmp_path / "outside"
    _write(str(logdir / "checkpoints" / "notes.txt"))
    _write(str(logdir / "checkpoints" / "checkpoint"), "mine\n")
    _write(str(outside / "checkpoint"), "precious")
    other = tmp_path / "run2"
    other.mkdir()
    (other / "checkpoints").symlink_to(outside)
    before = _tree(tmp_path)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=f"{tmp_path}:{ROOT}")
    for target, named in ((logdir, "checkpoint"), (other, "checkpoints")):
        out = subprocess.run(
            [sys.executable, "-m", "experiments.train", "--config=impala_cartpole",
             "--env=brokenenv_own:BrokenReset-v0", f"--logdir={target}", "--total_steps=100",
             "--nojit_compile", "--noexport", "--eval_episodes=1"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        lines = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
        assert out.returncode == 2 and len(lines) == 1, out.stderr[-2000:]
        assert lines[0].startswith("error: --logdir: ") and f"{named}'" in lines[0], lines[0]
        assert "Traceback" not in out.stderr
    assert _tree(tmp_path) == before


# ------------------------------------------------------------------ the run's policy/
@pytest.mark.parametrize(
    "contents, named",
    [
        ({"notes.txt": "mine"}, "notes.txt"),
        ({"variables/variables.index": "", "mine/a.txt": "x"}, "mine"),
        ({"variables/my_weights.h5": "x"}, "variables/my_weights.h5"),
    ],
)
def test_a_policy_folder_that_an_export_did_not_write_is_refused_and_kept(
    tmp_path, contents, named
):
    logdir = tmp_path / "run"
    config_io.write_config(str(logdir), CONFIG)
    _fake_checkpoint(str(logdir / "checkpoints"))
    _populate(str(logdir / "policy"), contents)
    before = _tree(logdir)
    with pytest.raises(ValueError, match=r"^logdir: .* is not a file of an exported policy") as e:
        run_dir.prepare_logdir(str(logdir), CONFIG)
    assert repr(str(logdir / "policy" / named)) in str(e.value)
    exported = []
    run_dir.export_into_run(str(logdir / "policy"), exported.append)  # left to export to refuse
    assert exported == [str(logdir / "policy")] and _tree(logdir) == before


def test_a_policy_cut_by_a_kill_is_the_runs_and_is_replaced(tmp_path):
    logdir = tmp_path / "run"
    config_io.write_config(str(logdir), CONFIG)
    _fake_checkpoint(str(logdir / "checkpoints"))
    _populate(str(logdir / "policy"), {"variables/variables.index": "", "assets": None})
    assert run_dir.prepare_logdir(str(logdir), CONFIG) == "resume"
    run_dir.export_into_run(str(logdir / "policy"), lambda path: os.makedirs(path))
    assert os.listdir(logdir / "policy") == []


def test_a_file_named_checkpoints_is_refused(tmp_path):
    _write(str(tmp_path / "checkpoints"), "my notes")
    with pytest.raises(ValueError, match=r"^logdir: .*checkpoints' is not a directory"):
        run_dir.prepare_logdir(str(tmp_path), CONFIG)
    with pytest.raises(ValueError, match=r"^logdir: .*checkpoints' is not a directory"):
        _checkpointer(str(tmp_path))
    assert (tmp_path / "checkpoints").read_text() == "my notes"
