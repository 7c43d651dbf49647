"""The exports of a run whose network has a torso and a core of one's own
(tests/user_layers.py: LayerNormTorso, SmallGRU): the SavedModel the run writes at its end
loads and steps in a process that can import neither this package nor the user's module,
and tfv-export's artefacts in all three formats pass the parity check (in process, as
``tfv-export --check`` runs it); ``tfv-export`` of the run needs ``--torso`` / ``--core``."""

import json
import os
import subprocess
import sys
import sysconfig

import numpy as np
import pytest

import tests.user_layers as mine
import tfagents_vtrace as tv
from tfagents_vtrace.agents import get_agent
from tfagents_vtrace.envs import make_env
from tfagents_vtrace.export import artefacts
from tfagents_vtrace.export.target import FORMATS
from tfagents_vtrace.networks import NetInputs

pytestmark = pytest.mark.xdist_group("export_own_network")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORSO, CORE = "tests.user_layers:LayerNormTorso", "tests.user_layers:SmallGRU"
# Steps a SavedModel in a process where neither package is importable (-I -S: no .pth files,
# no script or working directory on the path; only the plain site-packages for TensorFlow).
CHILD = """
import importlib.util, json, sys
sys.path.append(sys.argv[2])
find = importlib.util.find_spec
assert find("tfagents_vtrace") is None
assert find("tests") is None or find("tests.user_layers") is None  # another "tests" package
import numpy as np
import tensorflow as tf
policy = tf.saved_model.load(sys.argv[1])
data = np.load(sys.argv[3])
state = policy.get_initial_state(batch_size=tf.constant(data["first"].shape[1]))
values = []
for t in range(len(data["first"])):
    out = policy.greedy_action(observation=data["obs"][t], first=data["first"][t],
                               prev_action=data["pa"][t], prev_reward=data["pr"][t], state=state)
    state = out["state"]
    values.append(out["value"].numpy().tolist())
print("VALUES " + json.dumps(values))
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    logdir = str(tmp_path_factory.mktemp("own") / "run")
    tv.train("impala", env="CartPole-v1", logdir=logdir, torso=mine.LayerNormTorso,
             core=mine.SmallGRU, use_prev_action=True, total_steps=512, num_envs=4,
             unroll_length=8, eval_every=0, eval_episodes=1, seed=0)  # fmt: skip
    return logdir


def test_the_runs_savedmodel_steps_without_the_users_code(run, tmp_path):
    from tfagents_vtrace.runtime.rundir.checkpointing import restore_network

    rng = np.random.default_rng(0)
    T, B = 6, 3
    first = np.zeros((T, B), bool)
    first[0] = first[3, 1] = True
    data = dict(obs=rng.normal(size=(T, B, 4)).astype(np.float32), first=first,
                pa=rng.integers(0, 2, (T, B)).astype(np.int32),
                pr=rng.normal(size=(T, B)).astype(np.float32))  # fmt: skip
    np.savez(tmp_path / "inputs.npz", **data)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", CHILD, os.path.join(run, "policy"),
         sysconfig.get_paths()["purelib"], str(tmp_path / "inputs.npz")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("VALUES ")][-1]
    got = np.array(json.loads(line.split(" ", 1)[1]))
    network = restore_network(run)  # the final checkpoint: the exported weights
    state, expected = network.initial_state(B), []
    for t in range(T):
        out = network(NetInputs(data["obs"][t], first[t], data["pa"][t], data["pr"][t]), state)
        state = out.state
        expected.append(out.value.numpy())
    np.testing.assert_allclose(got, np.stack(expected), atol=1e-5)
    assert np.abs(np.diff(got, axis=0)).max() > 1e-4  # the inputs matter


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_every_format_passes_the_parity_check(run, tmp_path, fmt):
    missing = [m for m in FORMATS[fmt].write_modules + FORMATS[fmt].run_modules
               if __import__("importlib").util.find_spec(m) is None]  # fmt: skip
    if missing:
        pytest.skip(f"{fmt} needs {missing}")
    policy = get_agent("impala").restore_policy(run)  # as tfv-export rebuilds it
    path = artefacts.write(policy, tmp_path / FORMATS[fmt].default_name, fmt)
    env = make_env("CartPole-v1")
    try:
        report = artefacts.check(policy, path, fmt, env, steps=120)
    finally:
        env.close()
    assert report.passed, report.failures
    assert report.action_mismatches == {"greedy": 0, "sample": 0}
    assert "greedy/state_0" in report.max_abs_diff  # the GRU's state crossed the artefact


@pytest.mark.slow
def test_tfv_export_needs_the_runs_layers_named(run, tmp_path):
    def export(*flags):
        cmd = [sys.executable, "-m", "experiments.export", f"--logdir={run}", *flags]
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)

    done = export(f"--output={tmp_path / 'a'}", f"--core={CORE}")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: --torso: the run's network uses {TORSO!r}, a layer of your own, and a run "
        f"directory never imports code: pass --torso={TORSO}"
    )
    done = export(f"--output={tmp_path / 'b'}", "--torso=tests.user_layers:SpaceTorso",
                  f"--core={CORE}")  # fmt: skip
    assert done.returncode == 2 and "is not the run's torso" in done.stderr
    done = export(f"--output={tmp_path / 'c'}", f"--torso={TORSO}", f"--core={CORE}", "--check",
                  "--check_steps=50")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["passed"]
