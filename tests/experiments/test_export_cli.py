"""experiments.export: rebuild the network from a run directory and export its policy."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tfagents_vtrace.agents import get_agent
from tfagents_vtrace.networks import NetInputs, NetworkConfig
from tfagents_vtrace.runtime.checkpointing import restore_network
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.driver import train

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
        for name in ("checkpoint", "ckpt-1.index"):  # the state file and one checkpoint
            open(os.path.join(path, "checkpoints", name), "w").close()
    return str(path)


def test_check_flags_names_the_flag(tmp_path):
    from experiments import export

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
