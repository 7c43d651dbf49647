"""The examples under examples/ run as a user runs them (short budgets)."""

import json
import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def _run(args, cwd, **env):
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env={**ENV, **env},
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.slow  # subprocesses importing TensorFlow and training
def test_train_from_python_then_play_the_policy(tmp_path):
    logdir = str(tmp_path / "corridor")
    out = _run([sys.executable, os.path.join(EXAMPLES, "train_from_python.py"),
                f"--logdir={logdir}", "--total_steps=4000"], tmp_path)  # fmt: skip
    assert "greedy return at the end:" in out
    out = _run([sys.executable, os.path.join(EXAMPLES, "play_policy.py"),
                os.path.join(logdir, "policy")], tmp_path)  # fmt: skip
    assert out.strip().startswith("return ")


def _train_with_a_torso_example(module, torso, tmp_path) -> str:
    """Runs ``examples/<module>.py`` as a script on a short budget; checks that it ended and
    that its run recorded the torso by its path; returns the run directory."""
    logdir = str(tmp_path / module)
    out = _run([sys.executable, os.path.join(EXAMPLES, f"{module}.py"),
                f"--logdir={logdir}", "--total_steps=2000"], tmp_path)  # fmt: skip
    assert "greedy return at the end:" in out
    config = json.load(open(os.path.join(logdir, "config.json")))
    assert config["network_config"]["torso"] == f"{module}:{torso}"
    return logdir


def test_train_with_the_layernorm_torso(tmp_path):
    _train_with_a_torso_example("layernorm_torso", "LayerNormMLP", tmp_path)


# make test-long (the suite's time): the README's command-line block runs the same commands.
@pytest.mark.long
def test_train_from_the_command_line(tmp_path):
    bindir = os.path.dirname(sys.executable)
    if not os.path.exists(os.path.join(bindir, "tfv-train")):
        pytest.fail("tfv-train is not installed beside this Python (pip install the package)")
    out = _run(["bash", os.path.join(EXAMPLES, "train_from_command_line.sh")], tmp_path,
               LOGDIR=str(tmp_path / "cli"), TOTAL_STEPS="4000",
               PATH=bindir + os.pathsep + ENV.get("PATH", ""))  # fmt: skip
    assert '"final": true' in out and os.path.isfile(tmp_path / "cli" / "policy.onnx")


def test_the_masked_game_trains_and_never_takes_a_masked_action(tmp_path):
    out = _run([sys.executable, os.path.join(EXAMPLES, "masked_game.py"),
                f"--logdir={tmp_path / 'masked'}", "--total_steps=3000"], tmp_path)  # fmt: skip
    assert out.strip().endswith("forbidden actions taken: 0"), out[-500:]


@pytest.mark.slow  # subprocesses importing TensorFlow and training
def test_train_with_the_attention_torso_on_a_set_of_entities(tmp_path):
    logdir = _train_with_a_torso_example("attention_torso", "EntityAttention", tmp_path)
    # the exported policy holds the attention layers: it steps without the example's module
    code = (
        "import numpy as np, tfagents_vtrace as tv\n"
        f"p = tv.load_policy({os.path.join(logdir, 'policy')!r})\n"
        "obs = {'entities': np.zeros((3, 5, 4), np.float32), 'goal': np.ones((3, 4), np.float32)}\n"
        "a, _ = p.step(obs, greedy=True)\n"
        "assert np.shape(a) == (3,), a\n"
        "import sys; assert 'attention_torso' not in sys.modules\n"
        "print('ok')\n"
    )
    assert _run([sys.executable, "-c", code], tmp_path).strip().endswith("ok")
