"""Resume finds the newest intact checkpoint from the directory itself: a garbled or empty
state file, a truncated data file, a garbled index and a replay archive that fails its
checksum are passed over (moved to checkpoints/damaged/, one warning line) for the next older
complete checkpoint; a run never restarts at step 0 while one exists."""

import json
import os
import shutil

import pytest

from tests.runtime.test_actor_learner import AGENT, NET, _rows, _run
from tfagents_vtrace.agents import get_agent
from tfagents_vtrace.envs import env_spaces
from tfagents_vtrace.runtime.driver import make_driver, train
from tfagents_vtrace.runtime.rundir import checkpoint_files as files
from tfagents_vtrace.runtime.rundir.checkpointing import CheckpointError, has_checkpoint

# One xdist worker runs the module (make test: --dist loadgroup), so its module-scoped
# fixture is built once, not once per worker.
pytestmark = pytest.mark.xdist_group("checkpoint_fallback")


def _steps(logdir):
    return files.complete_steps(os.path.join(logdir, "checkpoints"))


def _train(logdir, total_steps, agent=AGENT, config=None, **kw):
    run = _run(total_steps, checkpoint_every_s=1e-6, **kw)
    return train(run, agent, config or agent.Config(), NET, logdir)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """An IMPALA run with three checkpoints, copied per test."""
    logdir = str(tmp_path_factory.mktemp("impala") / "run")
    _train(logdir, 1024)
    assert len(_steps(logdir)) == 3
    return logdir


@pytest.fixture
def run_copy(trained, tmp_path):
    logdir = str(tmp_path / "run")
    shutil.copytree(trained, logdir)
    return logdir


def _damage_state(logdir, text):
    with open(os.path.join(logdir, "checkpoints", "checkpoint"), "w") as f:
        f.write(text)


@pytest.mark.parametrize("text", ['model_checkpoint_path: "ckpt-6', ""])
def test_a_garbled_or_empty_state_file_hides_no_checkpoint(run_copy, text):
    newest = _steps(run_copy)[0]
    _damage_state(run_copy, text)
    final = _train(run_copy, 2048)
    assert final["resumed"] and final["step"] >= 2048
    steps = [r["step"] for r in _rows(run_copy)]
    assert steps == sorted(set(steps)) and newest in steps  # history kept, no duplicates


def _truncate(path):
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size // 2)


def _garble(path):
    with open(path, "r+b") as f:
        f.write(b"\x00garbage\xff" * 8)


@pytest.mark.parametrize(
    "damage, suffix", [(_truncate, ".data-00000-of-00001"), (_garble, ".index")]
)
def test_a_damaged_newest_checkpoint_falls_back_to_the_previous_one(
    run_copy, capsys, damage, suffix
):
    newest, older = _steps(run_copy)[:2]
    damage(os.path.join(run_copy, "checkpoints", f"ckpt-{newest}{suffix}"))
    driver = make_driver(_run(2048), AGENT, AGENT.Config(), NET, run_copy)
    assert driver.resumed and driver.counters.env_steps == older
    err = capsys.readouterr().err
    assert f"resuming from ckpt-{older}: skipped ckpt-{newest}" in err
    assert len([line for line in err.splitlines() if line.startswith("warning:")]) == 1
    damaged = os.listdir(os.path.join(run_copy, "checkpoints", files.DAMAGED_DIR))
    assert f"ckpt-{newest}{suffix}" in damaged  # moved aside, not deleted
    assert all(r["step"] <= older for r in _rows(run_copy))  # rows past it were dropped
    final = driver.run()
    assert final["resumed"] and final["step"] >= 2048


def test_no_intact_checkpoint_is_one_error_and_nothing_is_deleted(run_copy):
    for step in _steps(run_copy):
        _truncate(os.path.join(run_copy, "checkpoints", f"ckpt-{step}.data-00000-of-00001"))
    with pytest.raises(CheckpointError, match=r"no checkpoint in .* reads back whole"):
        make_driver(_run(2048), AGENT, AGENT.Config(), NET, run_copy)
    assert len(os.listdir(os.path.join(run_copy, "checkpoints", files.DAMAGED_DIR))) == 6
    assert not has_checkpoint(run_copy)
    with pytest.raises(ValueError, match=r"no checkpoint to resume"):  # never a silent restart
        from tfagents_vtrace.runtime.rundir import config_io, run_dir

        run_dir.prepare_logdir(run_copy, config_io.read_config(run_copy))


def test_a_checkpoint_without_all_its_shards_is_not_complete(run_copy):
    newest = _steps(run_copy)[0]
    os.remove(os.path.join(run_copy, "checkpoints", f"ckpt-{newest}.data-00000-of-00001"))
    assert _steps(run_copy)[0] != newest


def test_a_replay_archive_that_fails_its_checksum_falls_back_with_its_checkpoint(tmp_path, capsys):
    acer = get_agent("acer")
    logdir = str(tmp_path / "acer")
    config = acer.Config(t_max=5, replay_start_size=10, n_times_replay=1)
    net = acer.network_config_for(NET, config, env_spaces("CartPole-v1"))
    train(_run(800, checkpoint_every_s=1e-6), acer, config, net, logdir)
    newest, older = _steps(logdir)[:2]
    archive = os.path.join(logdir, "checkpoints", f"replay-{newest}.npz")
    with open(archive, "r+b") as f:
        f.seek(os.path.getsize(archive) // 2)
        f.write(b"\xde\xad\xbe\xef" * 4)
    capsys.readouterr()
    driver = make_driver(_run(1600), acer, config, net, logdir)
    assert driver.counters.env_steps == older and driver.extra_restored > 0
    err = capsys.readouterr().err
    assert f"skipped ckpt-{newest} (replay archive" in err
    assert len([line for line in err.splitlines() if line.startswith("warning:")]) == 1
    damaged = os.listdir(os.path.join(logdir, "checkpoints", files.DAMAGED_DIR))
    assert f"replay-{newest}.npz" in damaged and f"ckpt-{newest}.index" in damaged
    driver.run()


def test_leftovers_of_killed_saves_are_removed_on_the_next_start(run_copy):
    ckpt = os.path.join(run_copy, "checkpoints")
    os.makedirs(os.path.join(ckpt, "ckpt-999_temp", "part-00000-of-00001"))
    os.makedirs(os.path.join(run_copy, "policy.tmp-123-abc"))
    make_driver(_run(2048), AGENT, AGENT.Config(), NET, run_copy)
    assert not os.path.exists(os.path.join(ckpt, "ckpt-999_temp"))
    assert not os.path.exists(os.path.join(run_copy, "policy.tmp-123-abc"))


def test_an_unterminated_last_row_is_repaired_before_appending(run_copy):
    path = os.path.join(run_copy, "metrics.jsonl")
    text = open(path).read().rstrip("\n")
    open(path, "w").write(text + '\n{"step": 99999, "sps"')  # a row torn by a kill
    _train(run_copy, 2048)
    for line in open(path):
        json.loads(line)  # every line strict JSON
    steps = [r["step"] for r in _rows(run_copy)]
    assert steps == sorted(set(steps))


def test_a_start_killed_before_its_first_checkpoint_restarts(tmp_path):
    logdir = str(tmp_path / "run")
    from tfagents_vtrace.runtime.rundir import config_io, run_dir

    config = config_io.run_config_dict("impala", _run(1024), AGENT.Config(), NET)
    config_io.write_config(logdir, config)
    open(os.path.join(logdir, "metrics.jsonl"), "w").close()
    assert run_dir.prepare_logdir(logdir, config) == "new"
    assert os.listdir(logdir) == []


def test_a_start_that_fails_leaves_nothing_behind(tmp_path):
    logdir = str(tmp_path / "run")

    def broken(num_envs, seed):
        raise RuntimeError("reset failed")

    with pytest.raises(Exception, match="reset failed"):
        train(_run(1024), AGENT, AGENT.Config(), NET, logdir, env_factory=broken)
    assert not os.path.exists(logdir) or os.listdir(logdir) == []


def test_a_damaged_config_is_moved_aside_and_the_checkpoint_resumes(run_copy, capsys):
    with open(os.path.join(run_copy, "config.json"), "w") as f:
        f.write('{"agent": "imp')  # torn
    final = _train_cli_like(run_copy, 2048)
    assert final["resumed"] and final["step"] >= 2048
    assert os.path.exists(os.path.join(run_copy, "config.damaged-1.json"))
    assert "config.json is unreadable" in capsys.readouterr().err


def test_undecodable_bytes_in_the_metrics_log_are_dropped(run_copy):
    path = os.path.join(run_copy, "metrics.jsonl")
    with open(path, "ab") as f:
        f.write(b"\xff\xfe\x00garbage\n")
    _train(run_copy, 2048)
    for line in open(path):
        json.loads(line)


def _train_cli_like(logdir, total_steps):
    """As a command does: the directory is checked before the driver runs."""
    from tfagents_vtrace.runtime.rundir import config_io, run_dir

    run = _run(total_steps, checkpoint_every_s=1e-6)
    config = config_io.run_config_dict("impala", run, AGENT.Config(), NET)
    assert run_dir.prepare_logdir(logdir, config) == "resume"
    return train(run, AGENT, AGENT.Config(), NET, logdir)


def test_a_resumed_run_still_keeps_only_max_to_keep_checkpoints(run_copy):
    _train(run_copy, 2048)
    assert len(_steps(run_copy)) == 3  # the restored run's checkpoints are not kept forever


def test_a_state_file_write_cut_by_a_kill_is_removed(run_copy):
    leftover = os.path.join(run_copy, "checkpoints", "checkpoint.tmpb8c2251b8b9e49fe8f339fb0")
    open(leftover, "w").write('model_checkpoint_path: "ckpt-')
    make_driver(_run(2048), AGENT, AGENT.Config(), NET, run_copy)
    assert not os.path.exists(leftover)


def test_a_start_killed_inside_its_step0_checkpoint_starts_afresh(run_copy, tmp_path, capsys):
    logdir = str(tmp_path / "fresh")
    os.makedirs(os.path.join(logdir, "checkpoints"))
    shutil.copy(os.path.join(run_copy, "config.json"), logdir)
    open(os.path.join(logdir, "metrics.jsonl"), "w").close()
    newest = _steps(run_copy)[0]
    shutil.copy(
        os.path.join(run_copy, "checkpoints", f"ckpt-{newest}.data-00000-of-00001"),
        os.path.join(logdir, "checkpoints", "ckpt-0.data-00000-of-00001"),
    )
    open(os.path.join(logdir, "checkpoints", "ckpt-0.index"), "wb").close()  # not yet written
    for _ in range(2):  # and again, with the damaged step-0 files set aside
        from tfagents_vtrace.runtime.rundir import config_io, run_dir

        run = _run(1024, checkpoint_every_s=1e-6)
        assert run_dir.prepare_logdir(logdir, config_io.read_config(logdir)) in ("new", "resume")
        final = train(run, AGENT, AGENT.Config(), NET, logdir)
        assert final["step"] >= 1024
        shutil.rmtree(os.path.join(logdir, "checkpoints"))
        os.makedirs(os.path.join(logdir, "checkpoints", files.DAMAGED_DIR))
        open(os.path.join(logdir, "checkpoints", files.DAMAGED_DIR, "ckpt-0.index"), "w").close()
        os.remove(os.path.join(logdir, "final.json"))
        open(os.path.join(logdir, "metrics.jsonl"), "w").close()
    assert "starting afresh: skipped ckpt-0" in capsys.readouterr().err
