"""experiments.export: rebuild the network from a run directory and export its policy."""

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tfagents_vtrace.agents import get_agent
from tfagents_vtrace.networks import NetInputs, NetworkConfig
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.driver import train
from tfagents_vtrace.runtime.rundir.checkpointing import restore_network

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow  # a subprocess importing TensorFlow and training
def test_export_round_trip(tmp_path):
    logdir, output = str(tmp_path / "run"), str(tmp_path / "exported")
    agent = get_agent("impala")
    run = RunConfig(total_steps=512, num_envs=8, unroll_length=8, eval_episodes=2,
                    export_policy=False)  # fmt: skip
    train(run, agent, agent.Config(), NetworkConfig(hidden_sizes=(16,)), logdir)
    subprocess.run(
        [sys.executable, "-m", "experiments.export", f"--logdir={logdir}", f"--output={output}"],
        cwd=ROOT, check=True, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    network = restore_network(logdir)
    policy = tf.saved_model.load(output)
    obs = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    first, prev_action = np.ones(6, bool), np.zeros(6, np.int32)
    prev_reward = np.zeros(6, np.float32)
    state = policy.get_initial_state(batch_size=tf.constant(6))
    out = policy.greedy_action(observation=obs, first=first, prev_action=prev_action,
                               prev_reward=prev_reward, state=state)  # fmt: skip
    expected = network(NetInputs(obs, first, prev_action, prev_reward), ())
    np.testing.assert_array_equal(
        out["action"].numpy(), np.argmax(expected.policy["logits"].numpy(), -1)
    )
    np.testing.assert_allclose(out["value"].numpy(), expected.value.numpy(), rtol=1e-5)


def _fake_run(path, config=True, checkpoint=True):
    """A run directory with (empty) config.json and checkpoint files, enough for check_flags."""
    os.makedirs(os.path.join(path, "checkpoints"))
    if config:
        open(os.path.join(path, "config.json"), "w").close()
    if checkpoint:
        for name in ("checkpoint", "ckpt-1.index", "ckpt-1.data-00000-of-00001"):
            open(os.path.join(path, "checkpoints", name), "w").close()
    return str(path)


def test_check_flags_names_the_flag(tmp_path):
    from tfagents_vtrace.commands import export

    run = _fake_run(tmp_path / "run")
    assert export.check_flags(run, None, False) == os.path.join(run, "policy")
    with pytest.raises(export.FlagError, match=r"^--logdir: no such directory: .*nowhere$"):
        export.check_flags(str(tmp_path / "nowhere"), None, False)
    no_config = _fake_run(tmp_path / "a", config=False)
    with pytest.raises(export.FlagError, match=r"^--logdir: no config\.json in .*a \("):
        export.check_flags(no_config, None, False)
    no_ckpt = _fake_run(tmp_path / "b", checkpoint=False)
    with pytest.raises(export.FlagError, match=r"^--logdir: no checkpoint in .*b/checkpoints$"):
        export.check_flags(no_ckpt, None, False)
    out = tmp_path / "out"
    out.mkdir()
    assert export.check_flags(run, str(out), False) == str(out)  # empty: fine
    (out / "saved_model.pb").write_text("")
    with pytest.raises(export.FlagError, match=r"^--output: .*out exists and is not empty; pass "):
        export.check_flags(run, str(out), False)
    assert export.check_flags(run, str(out), True) == str(out)  # a SavedModel: replaced
    (out / "saved_model.pb").unlink()
    (out / "x").write_text("")
    for overwrite in (False, True):  # not a SavedModel: never replaced
        with pytest.raises(export.FlagError, match=r"^--output: .*out is a non-empty directory "):
            export.check_flags(run, str(out), overwrite)
    with pytest.raises(export.FlagError, match=r"^--output: .*x is a file, not a SavedModel"):
        export.check_flags(run, str(out / "x"), True)


def test_cli_refuses_a_non_empty_output_in_one_line(tmp_path):
    run = _fake_run(tmp_path / "run")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    cmd = [sys.executable, "-m", "experiments.export", f"--logdir={run}"]
    cmd += [f"--output={tmp_path / 'out'}"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    expected = f"error: --output: {tmp_path / 'out'} is a non-empty directory that is not a "
    expected += "SavedModel (no saved_model.pb); refusing to replace it, even with --overwrite"
    assert proc.stderr.strip().splitlines() == [expected]
    assert (tmp_path / "out" / "keep.txt").read_text() == "mine"


def test_cli_overwrite_never_deletes_the_working_directory(tmp_path):
    run = _fake_run(tmp_path / "run")
    work = tmp_path / "work"
    work.mkdir()
    (work / "keep.txt").write_text("mine")
    cmd = [sys.executable, "-m", "experiments.export", f"--logdir={run}", "--output=.",
           "--overwrite"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("error: --output: . is a non-empty")
    assert sorted(os.listdir(work)) == ["keep.txt"]


def test_check_flags_file_formats(tmp_path, monkeypatch):
    """tflite/onnx write one file: default names, only a model of the format is replaced."""
    from tfagents_vtrace.commands import export

    run = _fake_run(tmp_path / "run")
    assert export.check_flags(run, None, False, "tflite") == os.path.join(run, "policy.tflite")
    assert export.check_flags(run, None, False, "saved_model") == os.path.join(run, "policy")
    needs = lambda fmt, **kw: dataclasses.replace(export.FORMATS[fmt], **kw)  # noqa: E731
    monkeypatch.setitem(export.FORMATS, "onnx", needs("onnx", write_modules=("no_such_module_17",)))
    with pytest.raises(export.FlagError, match=r"^--format: onnx export needs no_such_module_17"):
        export.check_flags(run, None, False, "onnx")
    monkeypatch.setitem(
        export.FORMATS, "tflite", needs("tflite", run_modules=("no_such_module_17",))
    )
    assert export.check_flags(run, None, False, "tflite")  # runtime needed by --check only
    with pytest.raises(export.FlagError, match=r"^--check: tflite runs needs no_such_module_17: "):
        export.check_flags(run, None, False, "tflite", check=True)
    monkeypatch.undo()
    with pytest.raises(export.FlagError, match=r"^--check_steps: "):
        export.check_flags(run, None, False, "saved_model", check=True, check_steps=1)
    notes = tmp_path / "notes.tflite"
    notes.write_text("mine")
    for overwrite in (False, True):  # a file that is not a LiteRT model: never replaced
        with pytest.raises(export.FlagError, match=r"^--output: .*notes\.tflite is a file that "):
            export.check_flags(run, str(notes), overwrite, "tflite")
    model = tmp_path / "model.tflite"
    model.write_bytes(b"\x1c\x00\x00\x00TFL3" + bytes(24))  # a LiteRT flatbuffer's head
    with pytest.raises(export.FlagError, match=r"^--output: .*model\.tflite exists .*--overwrite"):
        export.check_flags(run, str(model), False, "tflite")
    assert export.check_flags(run, str(model), True, "tflite") == str(model)
    no_modules = needs("onnx", write_modules=(), run_modules=())  # whether installed or not
    monkeypatch.setitem(export.FORMATS, "onnx", no_modules)
    with pytest.raises(export.FlagError, match=r"^--output: .*model\.tflite is a file that is not"):
        export.check_flags(run, str(model), True, "onnx")  # a LiteRT model is not an ONNX one
    with pytest.raises(export.FlagError, match=r"^--output: .* is a directory; a LiteRT"):
        export.check_flags(run, str(tmp_path), True, "tflite")
    assert notes.read_text() == "mine"


# make test-long (the suite's time): the command-line twin of tests/test_export_portable.py's
# in-process parity (LSTM included) and of docs/guide/export.md's tfv-export --check block.
@pytest.mark.long
def test_export_formats_with_check(tmp_path):
    """--format=tflite|onnx|saved_model --check on a trained LSTM run: parity passes."""
    pytest.importorskip("ai_edge_litert")
    pytest.importorskip("tf2onnx")
    pytest.importorskip("onnxruntime")
    import json

    logdir = str(tmp_path / "run")
    agent = get_agent("impala")
    run = RunConfig(total_steps=256, num_envs=4, unroll_length=8, eval_episodes=1,
                    export_policy=False)  # fmt: skip
    net = NetworkConfig(hidden_sizes=(16,), core="lstm", lstm_size=8, use_prev_action=True,
                        use_prev_reward=True)  # fmt: skip
    train(run, agent, agent.Config(), net, logdir)
    for fmt, name in (("tflite", "p.tflite"), ("onnx", "p.onnx"), ("saved_model", "p")):
        output = str(tmp_path / name)
        cmd = [sys.executable, "-m", "experiments.export", f"--logdir={logdir}",
               f"--output={output}", f"--format={fmt}", "--check", "--check_steps=200"]  # fmt: skip
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        lines = proc.stdout.strip().splitlines()
        assert lines[-2] == output
        report = json.loads(lines[-1])
        assert report["passed"] and report["failures"] == [], report
        assert report["steps"] == 200 and report["episodes"] >= 3
        assert report["action_mismatches"] == {"greedy": 0, "sample": 0}
        assert max(report["max_abs_diff"].values()) <= 1e-5
        assert {"greedy/state_0", "sample/state_1", "greedy/logits"} <= set(report["max_abs_diff"])
    cmd = [sys.executable, "-m", "experiments.export", f"--logdir={logdir}",
           f"--output={tmp_path / 'p.tflite'}", "--format=tflite"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("error: --output: ")
    assert "--overwrite" in proc.stderr


# make test-long (the suite's time): the command-line twin of tests/test_export_portable_taac.py.
@pytest.mark.long
def test_export_taac_formats_with_check(tmp_path):
    """--format=onnx|saved_model --check on a tiny TaacQ run on Pendulum-v1: the agent's
    policy module through the command's one path; parity passes (every format in process:
    tests/test_export_portable_taac.py)."""
    pytest.importorskip("tf2onnx")
    pytest.importorskip("onnxruntime")
    import json

    from tfagents_vtrace.agents.taac import TaacConfig

    logdir = str(tmp_path / "run")
    cfg = TaacConfig(trajectory="quadratic", actor_hidden_sizes=(16,), critic_hidden_sizes=(16,),
                     mini_batch_size=8, mini_batch_length=3, initial_collect_steps=100,
                     train_interval=4, jit_compile=False)  # fmt: skip
    run = RunConfig(env_id="Pendulum-v1", total_steps=300, num_envs=2, eval_episodes=1,
                    log_every_s=0.01, export_policy=False)  # fmt: skip
    final = train(run, get_agent("taac"), cfg, None, logdir)
    assert final["updates"] > 0
    for fmt, name in (("onnx", "p.onnx"), ("saved_model", "p")):
        output = str(tmp_path / name)
        cmd = [sys.executable, "-m", "experiments.export", f"--logdir={logdir}",
               f"--output={output}", f"--format={fmt}", "--check", "--check_steps=150"]  # fmt: skip
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        lines = proc.stdout.strip().splitlines()
        assert lines[-2] == output
        report = json.loads(lines[-1])
        assert report["passed"] and report["failures"] == [], report
        assert report["steps"] == 150 and report["episodes"] >= 3
        assert report["action_mismatches"] == {"greedy": 0, "sample": 0}
        assert max(report["max_abs_diff"].values()) <= 1e-5
        assert {"greedy/state_0", "sample/state_1", "sample/b", "greedy/p_b1"} <= set(
            report["max_abs_diff"]
        )
        # TaacQ files are replayed from the reference's states (their dynamics amplify
        # rounding; TaacPolicyModule.parity_teacher_forcing); the SavedModel carries its own.
        assert report["teacher_forcing"] == (fmt != "saved_model")
        print(fmt, report["max_abs_diff"])  # the figures, with pytest -s
