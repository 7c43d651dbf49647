"""Warm start (``init_from``): a new run starts from another run's networks or from an
exported policy; what does not fit is refused in one line."""

import os
import subprocess
import sys

import numpy as np
import pytest

import tfagents_vtrace as tv
from tfagents_vtrace.envs import env_spaces
from tfagents_vtrace.networks import NetworkConfig, make_network
from tfagents_vtrace.runtime.rundir.checkpointing import restore_network, warm_start

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = dict(total_steps=1200, num_envs=4, unroll_length=10, eval_every=0, eval_episodes=2, seed=0)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A short IMPALA run on CartPole (its checkpoint and its exported policy)."""
    logdir = str(tmp_path_factory.mktemp("warm") / "source")
    tv.train("impala", env="CartPole-v1", logdir=logdir, **RUN)
    return logdir


def _fresh_network(env_id="CartPole-v1", activation="relu"):
    spaces = env_spaces(env_id)
    return make_network(NetworkConfig(activation=activation), spaces.observation, spaces.action)


def _assert_same_weights(a, b):
    assert len(a.get_weights()) == len(b.get_weights())
    for x, y in zip(a.get_weights(), b.get_weights(), strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("what", ["run_directory", "exported_policy"])
def test_the_networks_are_those_of_the_source(source, what):
    trained = restore_network(source)
    network = _fresh_network()
    before = [w.copy() for w in network.get_weights()]
    path = source if what == "run_directory" else os.path.join(source, "policy")
    line = warm_start({"network": network}, path)
    assert line.startswith("Warm start from ")
    _assert_same_weights(network, trained)
    assert any(not np.array_equal(x, y) for x, y in zip(before, network.get_weights()))


def test_a_new_run_starts_from_the_source_and_records_it(source, tmp_path, capfd):
    logdir = str(tmp_path / "tuned")
    # lr 0: the one update leaves the warm-started weights as they were loaded
    final = tv.train(
        "impala", env="CartPole-v1", logdir=logdir, init_from=source,
        **{**RUN, "total_steps": 40, "learning_rate": 1e-12},
    )  # fmt: skip
    assert not final["resumed"]
    assert "Warm start from " in capfd.readouterr().err
    np.testing.assert_allclose(
        np.concatenate([w.ravel() for w in restore_network(logdir).get_weights()]),
        np.concatenate([w.ravel() for w in restore_network(source).get_weights()]),
        atol=1e-6,
    )
    with open(os.path.join(logdir, "config.json")) as f:
        assert f'"init_from": "{source}"' in f.read()


def test_other_spaces_are_refused_in_one_line(source):
    network = _fresh_network("Acrobot-v1")
    with pytest.raises(ValueError, match=r"^init_from: the networks of .* do not fit") as e:
        warm_start({"network": network}, source)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match=r"^init_from: the networks of .* do not fit"):
        warm_start({"network": network}, os.path.join(source, "policy"))


def test_a_path_that_is_neither_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"^init_from: .* is neither a run directory"):
        warm_start({"network": _fresh_network()}, str(tmp_path))


def test_the_command_line_refuses_a_misfit_with_exit_code_2(source, tmp_path):
    cmd = [
        sys.executable, "-m", "experiments.train", "--agent=impala", "--env=Acrobot-v1",
        f"--logdir={tmp_path / 'run'}", f"--init_from={source}", "--total_steps=40",
        "--num_envs=4", "--eval_episodes=1", "--noexport",
    ]  # fmt: skip
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr[-2000:]
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: --init_from: the networks of")
