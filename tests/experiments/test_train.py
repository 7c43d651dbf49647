"""experiments.train: a smoke run writes the run directory; a SIGKILLed run resumes."""

import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.run_kill import kill_after_a_checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL = ["--env=CartPole-v1", "--num_envs=8", "--unroll_length=8", "--hidden_sizes=16",
         "--eval_episodes=2", "--log_every_s=0.05"]  # fmt: skip


def _train_cmd(logdir, *extra):
    return [sys.executable, "-m", "experiments.train", f"--logdir={logdir}", *SMALL, *extra]


def _rows(logdir):
    """The rows of ``metrics.jsonl``, without a last line a kill cut mid-write (only the last
    line can lack its newline)."""
    with open(os.path.join(logdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.endswith("\n")]


@pytest.mark.slow  # a subprocess importing TensorFlow and training
def test_smoke_run_writes_the_run_directory(tmp_path):
    logdir = str(tmp_path / "run")
    out = subprocess.run(
        _train_cmd(logdir, "--total_steps=1024", "--eval_every=512"),
        cwd=ROOT, capture_output=True, text=True, timeout=180, check=True,
    )  # fmt: skip
    final = json.loads(out.stdout.strip().splitlines()[-1])
    assert final["final"] is True and final["step"] == 1024
    assert final["wall_time"] > 0 and isinstance(final["eval_return"], float)
    for name in ("config.json", "metrics.jsonl", "checkpoints/checkpoint",
                 "policy/saved_model.pb"):  # fmt: skip
        assert os.path.exists(os.path.join(logdir, name)), name
    assert glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    config = json.load(open(os.path.join(logdir, "config.json")))
    assert config["env_id"] == "CartPole-v1" and config["network_config"]["hidden_sizes"] == [16]
    rows = _rows(logdir)
    for key in ("step", "wall_time", "sps", "episode_return", "episodes", "loss"):
        assert key in rows[-1], key
    assert [r["step"] for r in rows if "eval_return" in r] == [512, 1024]


# make test-long (the suite's time): the command-line twin of test_driver.py's killed runs;
# test_chaos.py kills this command at random moments in make test.
@pytest.mark.long
def test_killed_run_resumes_from_its_checkpoint(tmp_path):
    logdir = str(tmp_path / "run")
    proc = subprocess.Popen(
        _train_cmd(logdir, "--total_steps=100000000", "--checkpoint_every_s=0.2", "--noexport"),
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    # a checkpoint after the step-0 one (written before training starts)
    saved = kill_after_a_checkpoint(proc, logdir, timeout_s=120)
    before = [r["step"] for r in _rows(logdir)]
    target = saved + 1024
    out = subprocess.run(
        _train_cmd(logdir, f"--total_steps={target}", "--noexport"),
        cwd=ROOT, capture_output=True, text=True, timeout=180, check=True,
    )  # fmt: skip
    final = json.loads(out.stdout.strip().splitlines()[-1])
    assert final["resumed"] is True and final["step"] == target
    steps = [r["step"] for r in _rows(logdir)]
    assert all(a < b for a, b in zip(steps, steps[1:])), "steps strictly increasing"
    assert steps[-1] == target
    assert [s for s in before if s <= saved] == [s for s in steps if s <= saved]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_help_lists_the_training_flags():
    out = subprocess.run(
        [sys.executable, "-m", "experiments.train", "--agent=acer", "--help"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    for flag in ("--unroll_length", "--learning_rate", "--[no]overwrite", "--trust_region_delta"):
        assert flag in out.stdout, flag
    assert "--vtrace_lambda" not in out.stdout  # IMPALA's: --helpfull only


# make test-long (the suite's time): in make test, test_flag_errors.py checks the command's
# one-line errors case by case, test_run_dir_ownership.py a folder of the user's as --logdir
# and test_self_play.py the opponents' names.
@pytest.mark.long
def test_bad_input_ends_with_one_line_naming_the_flag(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    cases = [
        (["--num_envs=0"], "error: --num_envs: expected an int >= 1, received 0"),
        (["--env=NoSuchEnv-v9"], "error: --env: 'NoSuchEnv-v9' is not a registered"),
        ([f"--logdir={tmp_path / 'mine'}"], "error: --logdir: "),
        (["--self_play_eval_opponents=minimax"], "error: --self_play_eval_opponents: expected "),
    ]
    for extra, message in cases:
        out = subprocess.run(
            _train_cmd(str(tmp_path / "run"), "--total_steps=64", *extra),
            cwd=ROOT, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert out.returncode == 2, (extra, out.stderr[-2000:])
        assert out.stderr.strip().splitlines()[-1].startswith(message), out.stderr[-500:]
        assert "Traceback" not in out.stderr
    assert not os.path.exists(tmp_path / "run")  # refused before writing anything
    assert os.listdir(tmp_path / "mine") == ["notes.txt"]


@pytest.mark.slow  # a subprocess importing TensorFlow and training
def test_sigterm_writes_a_checkpoint_before_stopping(tmp_path):
    logdir = str(tmp_path / "run")
    proc = subprocess.Popen(
        _train_cmd(logdir, "--total_steps=100000000", "--noexport"),
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.time() + 120
        while not os.path.exists(os.path.join(logdir, "metrics.jsonl")):
            assert proc.poll() is None and time.time() < deadline, "no metrics row written"
            time.sleep(0.1)
        started = glob.glob(os.path.join(logdir, "checkpoints", "ckpt-*.index"))
        assert [os.path.basename(p) for p in started] == ["ckpt-0.index"]  # the step-0 one
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err[-2000:]
    saved = glob.glob(os.path.join(logdir, "checkpoints", "ckpt-*.index"))
    assert len(saved) == 2
    step = max(int(os.path.basename(p)[5:-6]) for p in saved)
    assert f"interrupted at step {step}" in err and "Traceback" not in err
    assert step >= _rows(logdir)[-1]["step"]


FAILING_ENV = """
import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


class AlwaysFailing(CartPoleEnv):
    def step(self, action):
        raise RuntimeError("simulated environment crash")


gym.register("AlwaysFailing-v0", entry_point=AlwaysFailing, max_episode_steps=500)
"""


@pytest.mark.slow  # a subprocess importing TensorFlow, then the restart backoff (~6 s)
def test_an_always_failing_env_ends_the_run_with_one_line(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(FAILING_ENV)  # registers it in the child
    env = dict(os.environ, PYTHONPATH=str(tmp_path), TF_CPP_MIN_LOG_LEVEL="3")
    start = time.monotonic()
    out = subprocess.run(
        _train_cmd(str(tmp_path / "run"), "--env=AlwaysFailing-v0", "--num_actors=1"),
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert time.monotonic() - start < 120
    assert out.returncode == 1, out.stderr[-2000:]
    last = out.stderr.strip().splitlines()[-1]  # then where the newest state was saved
    assert last.startswith(
        "error: actor 0: environment AlwaysFailing-v0 (sub-environment 0) failed 9 times in a "
        "row (without one successful step; the limit is 8); last error: RuntimeError: "
        "simulated environment crash"
    )
    assert "Traceback" not in out.stderr
    assert glob.glob(str(tmp_path / "run" / "checkpoints" / "ckpt-*.index"))  # nothing lost


@pytest.mark.slow  # a subprocess importing TensorFlow
def test_the_entry_point_does_not_import_tensorflow_probability():
    """Time-to-solve counts the imports: ``tensorflow_probability`` (and the ``tf_keras`` it
    pulls in) costs a CartPole run about a second, and only the agents and heads that build a
    ``tfp`` distribution may import it, on first use. The flags import every agent's package."""
    code = (
        "import sys, experiments.train\n"
        "print(sorted(m for m in ('tensorflow_probability', 'tf_keras') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=180, check=True)  # fmt: skip
    assert out.stdout.strip().splitlines()[-1] == "[]"
