"""Starting and stopping runs: what a run directory may hold before a run starts, a run that
already ended, and Ctrl-C writing a checkpoint before the run stops."""

import json
import os

import pytest

from tests.runtime.test_actor_learner import AGENT, NET, _rows, _run
from tfagents_vtrace.runtime.driver import make_driver, train
from tfagents_vtrace.runtime.rundir import config_io, run_dir, stop_signals


def _config(**changes):
    config = {
        "agent": "impala",
        "env_id": "CartPole-v1",
        "agent_config": {"learning_rate": 0.001},
        "network_config": {"hidden_sizes": [16]},
        "run_config": {"total_steps": 1000},
    }
    for key, value in changes.items():
        section, _, field = key.partition("__")
        if field:
            config[section] = {**config[section], field: value}
        else:
            config[section] = value
    return config


def _fake_run(logdir, config=None, checkpoint=True):
    """A run directory as a run leaves it (checkpoint files are empty stand-ins)."""
    config_io.write_config(logdir, config or _config())
    with open(os.path.join(logdir, "metrics.jsonl"), "w") as f:
        f.write(json.dumps({"step": 10}) + "\n")
    if checkpoint:
        os.makedirs(os.path.join(logdir, "checkpoints"))
        for name in ("checkpoint", "ckpt-10.index", "ckpt-10.data-00000-of-00001"):
            open(os.path.join(logdir, "checkpoints", name), "w").close()
    os.makedirs(os.path.join(logdir, "policy"))


def test_a_new_or_empty_logdir_starts_a_new_run(tmp_path):
    assert run_dir.prepare_logdir(str(tmp_path / "absent"), _config()) == "new"
    os.makedirs(tmp_path / "empty" / "checkpoints")  # no checkpoint in it
    assert run_dir.prepare_logdir(str(tmp_path / "empty"), _config()) == "new"


def test_files_without_a_checkpoint_are_refused_and_left_alone(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "metrics.jsonl").write_text('{"step": 3}\n')
    with pytest.raises(ValueError, match=r"logdir: .*metrics\.jsonl, notes\.txt.*no checkpoint"):
        run_dir.prepare_logdir(str(tmp_path), _config())
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 3}\n'


def test_overwrite_removes_the_run_entries_only(tmp_path):
    logdir = str(tmp_path)
    _fake_run(logdir)
    (tmp_path / "events.out.tfevents.1.host").write_text("x")
    (tmp_path / "notes.txt").write_text("mine")
    assert run_dir.prepare_logdir(logdir, _config(), overwrite=True) == "new"
    assert sorted(os.listdir(logdir)) == ["notes.txt"]


def test_a_run_of_another_agent_env_or_network_is_refused(tmp_path):
    logdir = str(tmp_path)
    _fake_run(logdir)
    for changed, pattern in (
        (_config(agent="a2c"), r"agent: 'impala' -> 'a2c'"),
        (_config(env_id="Acrobot-v1"), r"env_id: 'CartPole-v1' -> 'Acrobot-v1'"),
        (_config(network_config__hidden_sizes=[32]), r"hidden_sizes: \[16\] -> \[32\]"),
    ):  # fmt: skip
        with pytest.raises(ValueError, match=r"logdir: .*cannot resume.*" + pattern):
            run_dir.prepare_logdir(logdir, changed)
    assert json.load(open(os.path.join(logdir, "config.json"))) == _config()


def test_a_changed_cnn_compute_dtype_resumes(tmp_path, capsys):
    """A run written with float32 (the default before "auto") resumes under "auto": the
    compute dtype changes no variable of the checkpoint."""
    logdir = str(tmp_path)
    _fake_run(logdir, _config(network_config__cnn_compute_dtype="float32"))
    changed = _config(network_config__cnn_compute_dtype="auto")
    assert run_dir.prepare_logdir(logdir, changed) == "resume"
    assert "cnn_compute_dtype: 'float32' -> 'auto'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "change, pattern",
    [
        ({"actor_hidden_sizes": (32, 32)}, r"agent_config.actor_hidden_sizes: \[8\] -> \[32, 32\]"),
        ({"num_envs": 4}, r"run_config.num_envs: 2 -> 4"),
    ],
)
def test_taac_fields_that_shape_its_checkpoint_are_not_resumed_over(tmp_path, change, pattern):
    from tfagents_vtrace.agents.taac import TaacConfig
    from tfagents_vtrace.runtime.config import RunConfig

    def config(**kw):
        run = RunConfig(env_id="Pendulum-v1", num_envs=kw.pop("num_envs", 2))
        agent = TaacConfig(actor_hidden_sizes=kw.pop("actor_hidden_sizes", (8,)))
        return config_io.run_config_dict("taac", run, agent, None)

    logdir = str(tmp_path)
    _fake_run(logdir, config())
    assert run_dir.prepare_logdir(logdir, config()) == "resume"
    with pytest.raises(ValueError, match=r"logdir: .*cannot resume.*" + pattern):
        run_dir.prepare_logdir(logdir, config(**change))


def test_other_config_changes_resume_and_keep_the_previous_config(tmp_path, capsys):
    logdir = str(tmp_path)
    _fake_run(logdir)
    assert run_dir.prepare_logdir(logdir, _config()) == "resume"
    assert not any(name.startswith("config.before") for name in os.listdir(logdir))
    changed = _config(agent_config__learning_rate=0.002, run_config__total_steps=5000)
    assert run_dir.prepare_logdir(logdir, changed) == "resume"
    message = capsys.readouterr().err
    assert "agent_config.learning_rate: 0.001 -> 0.002" in message
    assert "run_config.total_steps: 1000 -> 5000" in message
    kept = json.load(open(os.path.join(logdir, "config.before-resume-1.json")))
    assert kept == _config()


@pytest.mark.parametrize(
    "final, total_steps, stop_return, ended",
    [
        ({"step": 100, "solve_step": None, "eval_return": 20.0}, 100, None, True),
        ({"step": 100, "solve_step": None, "eval_return": 20.0}, 200, None, False),
        ({"step": 90, "solve_step": None, "eval_return": 20.0}, 90, None, False),  # not at ckpt
        ({"step": 100, "solve_step": 100, "eval_return": 480.0}, 10**6, 475.0, True),
        ({"step": 100, "solve_step": 100, "eval_return": 480.0}, 10**6, 490.0, False),
        ({"step": 100, "solve_step": 100, "eval_return": 480.0}, 10**6, None, False),
    ],
)
def test_finished_row(tmp_path, final, total_steps, stop_return, ended):
    assert run_dir.finished_row(str(tmp_path), _run(total_steps), 100) is None  # no final.json
    config_io.write_config(str(tmp_path), {"final": True, **final}, name="final.json")
    run = _run(total_steps, stop_return=stop_return)
    row = run_dir.finished_row(str(tmp_path), run, 100)
    assert (row is not None) == ended
    if ended:
        assert row["already_finished"] and row["step"] == 100


class _FakeTrainer:
    def __init__(self):
        self.saved, self.closed = [], False
        self.metrics = self

    def save(self):
        self.saved.append(7)
        return "ckpt-7"

    def close(self):
        self.closed = True


def test_checkpoint_on_interrupt_saves_only_on_keyboard_interrupt():
    trainer = _FakeTrainer()
    with pytest.raises(stop_signals.RunInterrupted, match="step 7; checkpoint ckpt-7") as info:
        with stop_signals.checkpoint_on_interrupt(trainer, lambda: 7):
            raise KeyboardInterrupt
    assert info.value.step == 7 and trainer.saved == [7] and trainer.closed
    other = _FakeTrainer()
    with pytest.raises(RuntimeError):
        with stop_signals.checkpoint_on_interrupt(other, lambda: 7):
            raise RuntimeError("a bug")
    assert other.saved == []  # a crash is not a request to stop


def test_a_finished_run_is_not_trained_again(tmp_path):
    logdir = str(tmp_path)
    first = train(_run(512, eval_every=256), AGENT, AGENT.Config(), NET, logdir)
    rows = _rows(logdir)
    again = train(_run(512, eval_every=256), AGENT, AGENT.Config(), NET, logdir)
    assert again["already_finished"] and again["step"] == first["step"] == 512
    assert again["eval_return"] == first["eval_return"]
    assert _rows(logdir) == rows  # no row appended, none rewritten
    longer = train(_run(768, eval_every=256), AGENT, AGENT.Config(), NET, logdir)
    assert longer["resumed"] and longer["step"] == 768 and "already_finished" not in longer


def test_ctrl_c_writes_a_checkpoint_and_the_run_resumes_from_it(tmp_path):
    logdir = str(tmp_path)
    trainer = make_driver(_run(4096), AGENT, AGENT.Config(), NET, logdir)
    train_step, calls = trainer.agent.learner.train_step, []

    def interrupted_step(batch):
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return train_step(batch)

    trainer.agent.learner.train_step = interrupted_step
    with pytest.raises(stop_signals.RunInterrupted) as info:
        trainer.run()
    assert info.value.step == 4 * 64 and info.value.path.endswith("ckpt-256")
    resumed = make_driver(_run(512), AGENT, AGENT.Config(), NET, logdir)
    assert resumed.resumed and resumed.counters.env_steps == 256 and resumed.counters.updates == 4
    final = resumed.run()
    assert final["step"] == 512 and final["resumed"]


def test_a_requested_stop_ends_the_loop_between_two_steps(tmp_path):
    trainer = make_driver(_run(4096), AGENT, AGENT.Config(), NET, str(tmp_path))
    train_step = trainer.agent.learner.train_step

    def step_then_request(batch):  # what a signal handler does while an update runs
        out = train_step(batch)
        if trainer.counters.updates == 2:
            stop_signals.request_stop()
        return out

    trainer.agent.learner.train_step = step_then_request
    with pytest.raises(stop_signals.RunInterrupted) as info:
        trainer.run()
    assert (
        info.value.step == 3 * 64 and trainer.counters.updates == 3
    )  # the running update finished
    assert not stop_signals.stop_requested()  # consumed: a later run in this process goes on
