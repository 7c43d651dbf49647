"""The Ray backend in an operator's world: stop signals under Ray checkpoint (``ray.init``
keeps the run's handlers; Ray's processes ignore a Ctrl-C or hang-up sent to the terminal's
process group), actor deaths count in a window, and a wrong ``--ray_address`` fails at once.
The subprocess tests need Ray (skipped without it)."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from tfagents_vtrace.envs.failures import EnvFailure
from tfagents_vtrace.runtime.acting import ray_backend
from tfagents_vtrace.runtime.rundir import stop_signals
from tfagents_vtrace.runtime.rundir.checkpoint_files import complete_steps

try:
    import ray
except ImportError:
    ray = None

requires_ray = pytest.mark.skipif(ray is None, reason="ray is not installed (pip install .[ray])")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_deaths_count_within_the_window_so_occasional_ones_never_end_a_run():
    clock = Clock()
    window = ray_backend.DeathWindow(ray_backend.RESTART_LIMIT, ray_backend.RESTART_WINDOW_S,
                                     clock=clock)  # fmt: skip
    # The run: one worker's process killed again and again, a minute or more apart.
    counts = []
    for _ in range(40):
        assert window.add(), "a death every 100 s must be replaced"
        counts.append(window.count())
        clock.now += 100.0
    assert counts[:4] == [1, 2, 3, 3] and max(counts) == 3  # the deaths of the last 300 s
    # Six deaths within 300 s: the sixth is past the limit of 5.
    clock.now += 1000.0
    results = []
    for _ in range(6):
        results.append(window.add())
        clock.now += 10.0
    assert results == [True] * 5 + [False] and window.count() == 6
    clock.now += 300.0  # the window has moved past them: the next one is replaced again
    assert window.add() and window.count() == 1


def test_a_death_window_checks_its_limits():
    assert not ray_backend.DeathWindow(0, 1.0).add()  # 0: the first death ends the run
    with pytest.raises(ValueError, match="^max_actor_restarts, restart_window_s"):
        ray_backend.DeathWindow(-1, 10.0)
    with pytest.raises(ValueError, match="^max_actor_restarts, restart_window_s"):
        ray_backend.DeathWindow(3, 0.0)


def test_ray_worker_lost_is_an_env_failure_the_driver_saves_on():
    assert issubclass(ray_backend.RayWorkerLost, EnvFailure)


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_address_where_nothing_listens_fails_at_once_naming_ray_address():
    port = _closed_port()
    start = time.monotonic()
    with pytest.raises(ValueError) as error:
        ray_backend.probe_address(f"127.0.0.1:{port}")
    assert time.monotonic() - start < 5
    message = str(error.value)
    assert message.startswith(f"ray_address: no Ray cluster answers at 127.0.0.1:{port} (")
    assert "refused" in message and "\n" not in message
    with pytest.raises(ValueError, match="^ray_address: no Ray cluster answers at ray://"):
        ray_backend.probe_address(f"ray://127.0.0.1:{port}")


def test_an_address_that_does_not_answer_within_the_timeout_says_so(monkeypatch):
    timeouts = []

    def black_hole(target, timeout):
        timeouts.append((target, timeout))
        raise TimeoutError("timed out")

    monkeypatch.setattr(ray_backend.socket, "create_connection", black_hole)
    with pytest.raises(ValueError, match=r"at 127\.0\.0\.1:6379 \(no answer within 30 s\)"):
        ray_backend.probe_address("127.0.0.1:6379")
    assert timeouts == [(("127.0.0.1", 6379), ray_backend.CONNECT_TIMEOUT_S)]


def test_a_listening_address_passes_the_probe_and_malformed_ones_are_named():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        ray_backend.probe_address(f"127.0.0.1:{server.getsockname()[1]}")
    ray_backend.probe_address("auto")  # Ray resolves it itself
    for bad in ("127.0.0.1:port", "127.0.0.1:0", "127.0.0.1:70000"):
        with pytest.raises(ValueError, match="^ray_address: expected HOST:PORT"):
            ray_backend.probe_address(bad)


@requires_ray
def test_ray_tries_a_given_address_once_and_its_failure_names_ray_address(monkeypatch):
    """Past the probe (a port that answers, not Ray's), ``ray.init`` makes one connection
    attempt, not the many minutes of its own retries; its error becomes one line."""
    seen = {}

    def init(address, **kwargs):
        seen["address"] = address
        seen["attempts"] = os.environ.get("RAY_gcs_server_port_wait_time_s")
        raise ConnectionError(f"Failed to connect to Ray cluster at {address}\nmore")

    monkeypatch.delenv("RAY_gcs_server_port_wait_time_s", raising=False)
    monkeypatch.setattr(ray_backend, "probe_address", lambda address: None)
    monkeypatch.setattr(ray, "init", init)
    with pytest.raises(ValueError) as error:
        ray_backend.init_ray("127.0.0.1:6379", 2)
    assert seen == {"address": "127.0.0.1:6379", "attempts": "1"}
    assert "RAY_gcs_server_port_wait_time_s" not in os.environ  # only for the attempt
    assert str(error.value) == (
        "ray_address: cannot connect to a Ray cluster at 127.0.0.1:6379 (Failed to connect to "
        "Ray cluster at 127.0.0.1:6379); check the address and that the cluster runs this Ray "
        "version, or leave --ray_address unset to start a private Ray with the run"
    )


# A process like the training one: the run's handlers, then Ray; a Ctrl-C and a hang-up to
# its whole process group (a terminal's), SIGTERM to itself (a scheduler's stop).
_SIGNALS_CHILD = """
import json, os, signal, time
got = []
for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(signum, lambda n, frame: got.append(n))
import ray
from tfagents_vtrace.runtime.acting import ray_backend
from tfagents_vtrace.runtime.rundir import stop_signals
ray_backend.init_local_ray(2, log_to_driver=False)
kept = [signal.getsignal(s).__name__ for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)]
host = ray.remote(num_cpus=0)(ray_backend.HostProcess).remote()
actor = ray.get(host.pid.remote(), timeout=300)
for signum in (signal.SIGINT, signal.SIGHUP):
    os.killpg(0, signum)  # this process and Ray's services
    os.kill(actor, signum)  # the actor runs in a process group of its own
os.kill(os.getpid(), signal.SIGTERM)
deadline = time.monotonic() + 10
while len(got) < 3 and time.monotonic() < deadline:
    time.sleep(0.05)
alive = ray.get(host.pid.remote(), timeout=60) == actor
task = ray.get(ray.remote(num_cpus=0)(lambda: 7).remote(), timeout=120)  # a new worker
print(json.dumps({"kept": kept, "got": sorted(got), "alive": alive, "task": task}))
ray.shutdown()
"""


@requires_ray
@pytest.mark.slow  # a private Ray and one actor importing TensorFlow
def test_signals_reach_the_run_not_ray_and_ray_survives_the_terminals_signals(tmp_path):
    """``ray.init`` replaced the run's SIGTERM handler (Python's and a C++ one that dumps a
    stack); the handlers from before come back, and a Ctrl-C or a hang-up sent to the
    terminal's process group reaches the run without ending Ray's services or the actor
    (the run checkpoints, then shuts them down)."""
    out = subprocess.run(
        [sys.executable, "-c", _SIGNALS_CHILD], capture_output=True, text=True, timeout=600,
        env=ENV, cwd=str(tmp_path), start_new_session=True,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["kept"] == ["<lambda>"] * 3
    assert result["got"] == sorted([signal.SIGINT, signal.SIGHUP, signal.SIGTERM])
    assert result["alive"] and result["task"] == 7
    assert "SIGTERM received" not in out.stderr  # no C++ failure handler dump


def _train(logdir, *extra):
    return [sys.executable, "-m", "experiments.train", "--config=impala_cartpole",
            "--backend=ray", "--num_actors=2", f"--logdir={logdir}", *extra]  # fmt: skip


@requires_ray
@pytest.mark.slow  # TensorFlow's import in a subprocess
def test_a_wrong_ray_address_is_one_line_and_exit_2_at_once(tmp_path):
    """``--ray_address=127.0.0.1:1`` printed ``Failed to connect to GCS`` every ~40 s and
    ran on; now the start fails in one line naming the flag, and leaves nothing behind."""
    logdir, port = tmp_path / "run", _closed_port()
    start = time.monotonic()
    out = subprocess.run(
        _train(logdir, f"--ray_address=127.0.0.1:{port}"), capture_output=True, text=True,
        timeout=300, env=ENV, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr[-3000:]
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: --ray_address: no Ray cluster answers at 127.0.0.1:{port} (Connection "
        "refused); start one there (ray start --head --port=PORT) and pass its address, or "
        "leave --ray_address unset to start a private Ray with the run"
    ]
    assert "Traceback" not in out.stderr and "Failed to connect to GCS" not in out.stderr
    assert not (logdir / "checkpoints").exists()
    assert time.monotonic() - start < 120  # TensorFlow's import, not Ray's retries


def _wait(condition, seconds: float, what: str, proc) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert proc.poll() is None, f"the run ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within {seconds} s"
        time.sleep(0.2)


def _last_step(logdir) -> int:
    try:
        with open(os.path.join(logdir, "metrics.jsonl")) as f:
            return max([-1, *(json.loads(line)["step"] for line in f if line.endswith("\n"))])
    except FileNotFoundError:
        return -1


def _session(sid: int) -> str:
    """``ps``' lines of the processes left in session ``sid`` (the run's, Ray's services and
    its actors, which run in process groups of their own)."""
    return subprocess.run(["ps", "-s", str(sid), "-o", "pid=,comm="], capture_output=True,
                          text=True).stdout.strip()  # fmt: skip


def _end_session(proc) -> None:
    """Kills what a failed check left running of ``proc``'s session."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for line in _session(proc.pid).splitlines():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split()[0]), signal.SIGKILL)


def _stop_and_check(proc, logdir, err_path, send) -> int:
    """Sends the stop (``send(proc)``) once a row past the start is written; checks the run
    checkpointed and ended with 130 and Ray's processes with it; returns the saved step."""
    checkpoints = os.path.join(logdir, "checkpoints")
    start = max(complete_steps(checkpoints), default=0)
    _wait(lambda: _last_step(logdir) > start, 300, "row past the start", proc)
    send(proc)
    sent = time.monotonic()
    assert proc.wait(timeout=60) == 130, err_path.read_text()[-3000:]
    assert time.monotonic() - sent < stop_signals.GRACE_S + 2  # the grace a scheduler gives
    saved = max(complete_steps(checkpoints))
    err = err_path.read_text()
    assert saved > start and f"interrupted at step {saved}; checkpoint " in err, err[-3000:]
    assert "SIGTERM received" not in err and "Traceback" not in err
    deadline = time.monotonic() + 30  # Ray's services and actors ended with the run
    while _session(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _session(proc.pid)
    return saved


@requires_ray
# make test-long (the suite's time): in make test, test_chaos_signals.py stops a Ray run with
# SIGTERM and resumes it, and test_signals_reach_the_run_not_ray_... sends a terminal's
# SIGHUP to a Ray run's process group.
@pytest.mark.long  # two training processes, each a private Ray with two actors
def test_sigterm_and_a_closed_terminal_under_ray_checkpoint_and_the_run_resumes(tmp_path):
    """SIGTERM under ``--backend=ray`` aborted with a C++ stack dump and no checkpoint (Ray's
    handler replaced the run's); now it checkpoints and exits 130, and the same command
    resumes; a closed terminal (SIGHUP to the whole process group, Ray's services included)
    checkpoints it again."""
    logdir = str(tmp_path / "run")
    cmd = _train(logdir, "--total_steps=100000000", "--eval_every=0", "--log_every_s=0.5")
    saved = []
    for name, send in [
        ("first", lambda proc: proc.send_signal(signal.SIGTERM)),
        ("resumed", lambda proc: os.killpg(proc.pid, signal.SIGHUP)),
    ]:
        err_path = tmp_path / f"{name}.err"
        with open(err_path, "w") as err:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=ENV,
                                    cwd=ROOT, start_new_session=True)  # fmt: skip
        try:
            saved.append(_stop_and_check(proc, logdir, err_path, send))
        finally:
            _end_session(proc)
    assert f"Resuming {logdir} from step {saved[0]} " in (tmp_path / "resumed.err").read_text()
    assert 0 < saved[0] < saved[1]
    with open(os.path.join(logdir, "metrics.jsonl")) as f:
        steps = [json.loads(line)["step"] for line in f]
    assert steps == sorted(set(steps))


def _worker_pids(session: int) -> list[int]:
    """The A3C Ray worker processes of the session ``session``, oldest first."""
    out = subprocess.run(["ps", "-s", str(session), "-o", "pid=,comm="], capture_output=True,
                         text=True).stdout  # fmt: skip
    return sorted(int(line.split()[0]) for line in out.splitlines() if "WorkerHost" in line)


@requires_ray
@pytest.mark.long  # six worker processes built one after another, each importing TensorFlow
def test_a3c_workers_killed_again_and_again_then_past_the_limit_end_with_a_checkpoint(tmp_path):
    """The issue's run: one A3C worker id's process killed over and over. Four deaths (the
    old limit was three over the whole run) are replaced and training goes on; the sixth
    within 300 s ends the run with a checkpoint of the newest step and one line, exit 1."""
    logdir = str(tmp_path / "run")
    cmd = [sys.executable, "-m", "experiments.train", "--config=a3c_cartpole",
           "--backend=ray", "--num_workers=2", f"--logdir={logdir}",
           "--total_steps=100000000", "--eval_every=0", "--log_every_s=0.5"]  # fmt: skip
    err_path = tmp_path / "err"
    with open(err_path, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=ENV, cwd=ROOT,
                                start_new_session=True)  # fmt: skip
    try:
        _wait(lambda: _last_step(logdir) > 0, 300, "first row", proc)
        killed, steps = [0], []
        for _ in range(6):  # each time the newest process: the replacement of the last one
            _wait(lambda: max(_worker_pids(proc.pid), default=0) > killed[-1], 300,
                  "replacement", proc)  # fmt: skip
            time.sleep(1.0)
            killed.append(max(_worker_pids(proc.pid)))
            steps.append(_last_step(logdir))
            os.kill(killed[-1], signal.SIGKILL)
            if len(steps) == 4:  # four deaths: the run goes on
                _wait(lambda: _last_step(logdir) > steps[-1] + 1000, 120, "row", proc)
        assert proc.wait(timeout=120) == 1, err_path.read_text()[-3000:]
    finally:
        _end_session(proc)
    saved = max(complete_steps(os.path.join(logdir, "checkpoints")))
    errors = [line for line in err_path.read_text().splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in err_path.read_text()
    assert errors[0].startswith("error: A3C Ray worker ")
    assert " died 6 times within 300 s (at most 5 replacements per 300 s); " in errors[0]
    assert f"{logdir}/checkpoints/ckpt-{saved} " in errors[0]  # the driver's note
    assert saved > steps[3] > 0
