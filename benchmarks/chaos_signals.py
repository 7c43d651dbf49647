"""Chaos signals: stop ``experiments.train`` the way an operator's world does, again and again,
and check that the same command always resumes and finally ends the run whole.

    python benchmarks/chaos_signals.py [--cases=flaky-impala,hang-a3c,ray-impala]
        [--signals=15] [--seed=0] [--pipe_share=0.25] [--workdir=/tmp/chaos_signals] [--short]

For each case (:func:`long_cases`, or with ``--short`` the test suite's :func:`short_cases`) the
same ``python -m experiments.train --flagfile=... --logdir=DIR`` command is started in a
session of its own and, once it trains, stopped by a random signal after a random delay:
SIGTERM to the trainer's process (a batch scheduler, systemd, Kubernetes), SIGINT (Ctrl-C)
or SIGHUP (a closed terminal or SSH session), each sent to the process or, as a terminal
does, to its whole process group. A share of the starts (``--pipe_share``) write stdout and
stderr into one pipe that the campaign closes after a few lines (``tfv-train ... 2>&1 |
head``, a dropped SSH session under a pipe): the run must train on and still checkpoint on
the signal. This is repeated ``--signals`` times, then the command runs to its end.

The cases bring their own faults: IMPALA on ``FlakyCartPole-v0`` (``tests/user_envs.py``: 1% of
``step`` calls raise), A3C on ``HangSometimes-v0`` (``tests/stop_envs.py``: an instance hangs
forever at a random step; ``--env_step_timeout_s=2`` replaces the worker) and IMPALA under
``--backend=ray --num_actors=2`` whose Ray actor processes are SIGKILLed every few seconds
(at most :data:`KILLS_PER_START` per start, below the backend's 5 deaths per 300 s of an
actor id).

Checked for every signalled start (:func:`attempt_problems`): it exits 130 (0 if the run had
already ended) within ``--stop_grace_s`` plus :attr:`SignalCase.margin_s`; stderr says
``interrupted at step N; checkpoint DIR/checkpoints/ckpt-N; run the same command to
resume.`` (not readable through a closed pipe); the newest complete checkpoint is N and no
metrics row is past it (no lost checkpoint); N is at least every earlier stop's step, and
more when the start trained; the next start says ``Resuming DIR from step N (ckpt-N).``
(unless its own output is a closed pipe); no process of the start's session outlives it
(Ray's services and actors included). Then the end checks of ``chaos_lib.check_campaign``:
exit 0 and ``final.json`` at ``total_steps``, strict ``metrics.jsonl`` rows with steps
strictly increasing and counters never going backwards, no temporary file, checkpoint
retention, no traceback from any start.

Prints the machine (``benchmarks/machine.py``) first, one line per start, then per case:
starts, signals by kind, exit codes, seconds from signal to exit (median / max against the
grace), hung environments replaced, environment restarts, Ray actor kills and the deaths the
run reported, and every failed check; the last line is JSON. Exit code 1 when a check failed.
Run directories and each start's output stay in ``--workdir/<case>/``.

Shared with ``tests/runtime/test_chaos_signals.py`` (a few signals per case). No TensorFlow
import here.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import os
import random
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _benchmark_module(name: str):
    """``benchmarks/<name>.py``, loaded by its path once per process and registered under
    ``name`` (``benchmarks/`` on ``sys.path`` would let ``minatar.py`` shadow a package)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up by name
        spec.loader.exec_module(module)
    return sys.modules[name]


chaos_lib = _benchmark_module("chaos_lib")
ROOT = chaos_lib.ROOT

SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT, "SIGHUP": signal.SIGHUP}
EXIT_INTERRUPTED = 130
KILLS_PER_START = 4
"""Ray actor processes killed per start at most: an actor id may die 5 times within 300 s
before the run ends (``runtime/ray_backend.py``), and the window starts again with each start."""
PIPE_LINES = 3
"""Lines a closed-pipe start's reader takes before it closes the pipe (TensorFlow's first
log lines: the pipe is gone before the run says it resumes, trains or stops)."""

_INTERRUPTED_RE = re.compile(
    r"^interrupted at step (\d+); checkpoint (.+); run the same command to resume\.$", re.M
)
_RESUMING_RE = re.compile(r"^Resuming (.+) from step (\d+) \(ckpt-(\d+)\)\.$", re.M)
_HANG_RE = re.compile(r"an environment call has not returned for .*; abandoning ")
_RAY_DEATH_RE = re.compile(r" \d+ died \(.*\); replacing it")
_RAY_HOST_RE = re.compile(r"^ray::(ActorHost|WorkerHost)\b")


@dataclasses.dataclass(frozen=True)
class SignalCase:
    """One chaos command: ``case`` (flagfile and flags), ``env`` (extra environment
    variables, e.g. a failure rate), and its faults and timing.

    ``delay_s``: the range of the random delay from "it trains" to the signal.
    ``steps_per_signal``: the part of ``total_steps`` each start trains before its signal
    (the signal waits until the run is there, so that the run lasts all its signals).
    ``ray_kills``: SIGKILL Ray actor processes every ``kill_every_s`` seconds while training;
    ``kills_before_signal``: actor deaths (killed, and reported on the run's stderr) each
    signalled start waits for before its signal;
    ``final_kills``: kills in the final start too.
    ``margin_s``: seconds past ``--stop_grace_s`` a stopped process may take to be gone.
    """

    name: str
    case: chaos_lib.Case
    env: tuple[tuple[str, str], ...] = ()
    delay_s: tuple[float, float] = (0.0, 3.0)
    steps_per_signal: int = 0
    ray_kills: bool = False
    kill_every_s: tuple[float, float] = (2.0, 5.0)
    kills_before_signal: int = 0
    final_kills: bool = True
    margin_s: float = 2.0
    timeout_s: float = 600.0

    @property
    def grace_s(self) -> float:
        return float(self.case.values().get("stop_grace_s") or 10.0)

    @property
    def uses_ray(self) -> bool:
        """Ray's services end after the trainer (the session is given longer to empty)."""
        return self.case.values().get("backend") == "ray"

    def environ(self) -> dict[str, str]:
        return {**chaos_lib.child_env(), **dict(self.env)}


@dataclasses.dataclass(frozen=True)
class Plan:
    """One start's stop: the signal, sent to the process group (a terminal) or the process
    (a scheduler), and whether stdout/stderr are a pipe the campaign closes."""

    signal: str
    group: bool = False
    pipe: bool = False

    def describe(self) -> str:
        return f"{self.signal}->{'group' if self.group else 'process'}" + (
            " closed-pipe" if self.pipe else ""
        )


def draw_plan(rng: random.Random, pipe_share: float) -> Plan:
    """SIGTERM to the process (a scheduler's stop), SIGINT or SIGHUP to the process or,
    half the time, to its process group (a terminal's); a closed pipe ``pipe_share`` of the
    time."""
    name = rng.choice(list(SIGNALS))
    group = name != "SIGTERM" and rng.random() < 0.5
    return Plan(name, group, rng.random() < pipe_share)


@dataclasses.dataclass
class SignalAttempt:
    """One start of the command and what was seen of it (times in seconds after spawn)."""

    index: int
    plan: Plan | None
    start_step: int  # the newest checkpoint or row when it was spawned
    returncode: int | None = None
    seconds: float = 0.0
    trained_at: float | None = None  # a metrics row past start_step
    sent_at: float | None = None
    exit_s: float | None = None  # from the signal to the exit
    pipe_closed_at: float | None = None
    trained_before_signal: bool = False
    saved_step: int | None = None  # "interrupted at step N"
    saved_path: str | None = None
    newest_checkpoint: int | None = None  # after the exit
    last_row: int | None = None
    resumed_from: int | None = None  # "Resuming ... from step N"
    ray_kills: list[int] = dataclasses.field(default_factory=list)
    left: list[str] = dataclasses.field(default_factory=list)  # processes outliving it
    hung: bool = False
    stdout: str = ""
    text: str = ""  # stderr, or what was read of the closed pipe

    @property
    def signalled(self) -> bool:
        return self.sent_at is not None

    @property
    def ended(self) -> bool:
        """The run ended: exit 0, or the signal came after the run had printed its final
        line (the process was ending, its handlers gone) and ended it."""
        if self.returncode == 0:
            return True
        final = chaos_lib.last_json_line(self.stdout) or {}
        return (
            self.signalled and self.returncode == -SIGNALS[self.plan.signal]
            and final.get("final") is True
        )  # fmt: skip

    @property
    def stopped_step(self) -> int | None:
        """The step a signalled start's stop saved: its ``interrupted at`` line, or for a
        closed pipe (the line went nowhere) its newest checkpoint."""
        if self.returncode != EXIT_INTERRUPTED:
            return None
        if self.saved_step is not None:
            return self.saved_step
        return self.newest_checkpoint if self.plan is not None and self.plan.pipe else None

    @property
    def hangs(self) -> int:
        return len(_HANG_RE.findall(self.text))

    @property
    def ray_deaths(self) -> int:
        return len(_RAY_DEATH_RE.findall(self.text))


@dataclasses.dataclass
class SignalCampaign:
    case: SignalCase
    logdir: str
    signals_planned: int
    attempts: list[SignalAttempt]
    seconds: float

    @property
    def last(self) -> SignalAttempt:
        return self.attempts[-1]

    def signalled(self) -> list[SignalAttempt]:
        return [a for a in self.attempts if a.signalled]

    def final_row(self) -> dict:
        try:
            with open(os.path.join(self.logdir, "final.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def summary(self) -> dict:
        """The figures the benchmark prints (module docstring)."""
        sent = self.signalled()
        kinds: dict[str, int] = {}
        for a in sent:
            kinds[a.plan.signal] = kinds.get(a.plan.signal, 0) + 1
        exits: dict[str, int] = {}
        for a in self.attempts:
            exits[str(a.returncode)] = exits.get(str(a.returncode), 0) + 1
        waits = [a.exit_s for a in sent if a.exit_s is not None]
        final = self.final_row()
        return dict(
            case=self.case.name, starts=len(self.attempts), signals=len(sent),
            signals_by_kind=kinds, to_group=sum(a.plan.group for a in sent),
            closed_pipes=sum(a.plan.pipe for a in sent),
            closed_pipe_starts=sum(a.plan is not None and a.plan.pipe for a in self.attempts),
            exits=exits,
            exit_s_median=round(statistics.median(waits), 2) if waits else None,
            exit_s_max=round(max(waits), 2) if waits else None, grace_s=self.case.grace_s,
            stopped_steps=[a.stopped_step for a in sent],
            hangs_replaced=sum(a.hangs for a in self.attempts),
            env_restarts=final.get("env_restarts"),
            ray_kills=sum(len(a.ray_kills) for a in self.attempts),
            ray_deaths=sum(a.ray_deaths for a in self.attempts),
            final_step=final.get("step"), wall_s=self.seconds,
        )  # fmt: skip


# ------------------------------------------------------------------------------ cases
def _case(
    name: str, flagfile: str, *flags: str, signals: int, per_signal: int, **kwargs
) -> SignalCase:  # fmt: skip
    """A :class:`SignalCase` whose command trains ``per_signal`` steps per signal and as many
    in its final start, rows and checkpoints often (more moments for a signal to land in)
    and never ends early at ``stop_return``."""
    total = per_signal * (signals + 1)
    common = ("--checkpoint_every_s=0.5", "--log_every_s=0.25", "--stop_return=1000",
              f"--total_steps={total}", f"--eval_every={max(total // 4, 1)}")  # fmt: skip
    return SignalCase(
        name, chaos_lib.Case(name, flagfile, (*flags, *common)), steps_per_signal=per_signal,
        **kwargs,
    )  # fmt: skip


IMPALA_CFG = "experiments/configs/impala_cartpole.cfg"
A3C_CFG = "experiments/configs/a3c_cartpole.cfg"
FLAKY = ("--env=tests.user_envs:FlakyCartPole-v0",)
HANGING = ("--env=tests.stop_envs:HangSometimes-v0", "--env_step_timeout_s=2")
RAY = ("--backend=ray", "--num_actors=2")


def long_cases(signals: int) -> dict[str, SignalCase]:
    """The benchmark's cases: the shipped configs (XLA on), budgets that last ``signals``
    stops and the final start."""
    cases = [
        _case("flaky-impala", IMPALA_CFG, *FLAKY, "--eval_episodes=5", signals=signals,
              per_signal=150_000, env=(("TFV_FAILURE_RATE", "0.01"),), delay_s=(0.0, 4.0)),
        _case("hang-a3c", A3C_CFG, *HANGING, "--eval_episodes=5", signals=signals,
              per_signal=25_000, env=(("TFV_HANG_RATE", "0.0001"),), delay_s=(0.0, 5.0)),
        _case("ray-impala", IMPALA_CFG, *RAY, "--eval_episodes=5", signals=signals,
              per_signal=300_000, delay_s=(2.0, 10.0), ray_kills=True,
              kill_every_s=(2.0, 5.0)),
    ]  # fmt: skip
    return {c.name: c for c in cases}


def short_cases(signals: int) -> dict[str, SignalCase]:
    """The test suite's cases: no XLA compile (a start reaches training sooner), no export,
    a higher hang rate (a short run still sees hangs), a Ray actor killed before each signal
    and none in the final start (a replacement's start-up slows it down)."""
    quick = ("--nojit_compile", "--eval_episodes=2", "--noexport")
    cases = [
        _case("flaky-impala", IMPALA_CFG, *FLAKY, *quick, signals=signals, per_signal=40_000,
              env=(("TFV_FAILURE_RATE", "0.01"),), delay_s=(0.0, 1.0)),
        _case("hang-a3c", A3C_CFG, *HANGING, *quick, signals=signals, per_signal=10_000,
              env=(("TFV_HANG_RATE", "0.0005"),), delay_s=(0.5, 1.5)),
        _case("ray-impala", IMPALA_CFG, *RAY, *quick, signals=signals, per_signal=100_000,
              delay_s=(1.0, 2.0), ray_kills=True, kill_every_s=(1.0, 2.0),
              kills_before_signal=1, final_kills=False),
    ]  # fmt: skip
    return {c.name: c for c in cases}


# ------------------------------------------------------------------------ one start
def session_processes(sid: int) -> list[tuple[int, str]]:
    """``(pid, command line)`` of the processes of session ``sid`` (a start's trainer, Ray's
    services and its actors, which run in process groups of their own)."""
    out = subprocess.run(["ps", "-s", str(sid), "-o", "pid=,args="], capture_output=True,
                         text=True).stdout  # fmt: skip
    found = []
    for line in out.splitlines():
        pid, _, args = line.strip().partition(" ")
        if pid.isdigit():
            found.append((int(pid), args.strip()))
    return found


def ray_hosts(sid: int) -> list[int]:
    """The Ray actor processes (IMPALA's ``ActorHost``, A3C's ``WorkerHost``) of session
    ``sid``."""
    return [pid for pid, args in session_processes(sid) if _RAY_HOST_RE.match(args)]


def end_session(sid: int, wait_s: float) -> list[str]:
    """Waits up to ``wait_s`` for session ``sid`` to empty (Ray shuts down after the run),
    then SIGKILLs what is left; returns what was left."""
    deadline = time.monotonic() + wait_s
    while True:
        left = session_processes(sid)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for pid, _ in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return [f"{pid} {args[:80]}" for pid, args in left]


def last_row_step(logdir: str) -> int | None:
    """The step of ``metrics.jsonl``'s last complete row (None: no row)."""
    try:
        with open(os.path.join(logdir, "metrics.jsonl"), "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(f.tell() - 65536, 0))
            lines = f.read().split(b"\n")[:-1]  # the part after the last newline is torn
    except OSError:
        return None
    for line in reversed(lines):
        try:
            return int(json.loads(line)["step"])
        except (ValueError, KeyError, TypeError):
            continue
    return None


def newest_checkpoint(logdir: str) -> int | None:
    steps = chaos_lib.complete_steps(logdir)
    return steps[0] if steps else None


def _read_from(path: str, offset: int) -> tuple[int, str]:
    """``(new offset, the complete lines of path from offset on)``."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            chunk = f.read()
    except OSError:
        return offset, ""
    end = chunk.rfind(b"\n") + 1
    return offset + end, chunk[:end].decode(errors="replace")


class _PipeReader:
    """The read end of a closed-pipe start's stdout+stderr (``tfv-train ... 2>&1 | head -3``):
    reads :data:`PIPE_LINES` lines, then closes the pipe."""

    def __init__(self, pipe):
        self.pipe, self.buffer, self.lines = pipe, b"", []

    @property
    def open(self) -> bool:
        return self.pipe is not None

    def poll(self, timeout: float) -> None:
        ready, _, _ = select.select([self.pipe], [], [], timeout)
        if not ready:
            return
        chunk = os.read(self.pipe.fileno(), 65536)
        *lines, self.buffer = (self.buffer + chunk).split(b"\n")
        self.lines += [line.decode(errors="replace") for line in lines]
        if not chunk or len(self.lines) >= PIPE_LINES:
            self.close()

    def close(self) -> None:
        if self.pipe is not None:
            self.pipe.close()
            self.pipe = None

    def text(self) -> str:
        return "".join(f"{line}\n" for line in self.lines[:PIPE_LINES])


def run_signal_attempt(
    case: SignalCase, logdir: str, plan: Plan | None, index: int, out_dir: str,
    rng: random.Random, target_step: int = 0,
) -> SignalAttempt:  # fmt: skip
    """Starts the command once. With ``plan``: once the run trains (a metrics row past the
    step it started from) and has reached ``target_step``, waits a random ``delay_s`` (a
    short one when it is already past its next part) and sends the plan's signal; Ray actor
    kills meanwhile for a ``ray_kills`` case. Then waits for the exit (or ``timeout_s``) and
    for the session's other processes to end."""
    os.makedirs(out_dir, exist_ok=True)
    out_path = os.path.join(out_dir, f"{case.name}-{index:03d}.out")
    err_path = os.path.join(out_dir, f"{case.name}-{index:03d}.err")
    ckpt, row = newest_checkpoint(logdir), last_row_step(logdir)
    start_step = max(ckpt if ckpt is not None else -1, row if row is not None else -1)
    attempt = SignalAttempt(index, plan, start_step)
    pipe = plan is not None and plan.pipe
    started = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            case.case.command(logdir), cwd=ROOT, env=case.environ(),
            stdout=subprocess.PIPE if pipe else out, stderr=subprocess.STDOUT if pipe else err,
            stdin=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=chaos_lib._die_with_parent,
        )  # fmt: skip
    reader = _PipeReader(proc.stdout) if pipe else None
    send_at = next_kill = None
    next_check, err_offset, deaths = 0.0, 0, 0
    try:
        while proc.poll() is None:
            now = time.monotonic() - started
            if now > case.timeout_s:
                attempt.hung = True
                break
            if reader is not None and reader.open:
                reader.poll(0.02)
                if not reader.open:
                    attempt.pipe_closed_at = round(time.monotonic() - started, 3)
            else:
                time.sleep(0.02)
            if now < next_check:
                continue
            next_check = now + 0.1
            step = last_row_step(logdir)
            if attempt.trained_at is None and step is not None and step > start_step:
                attempt.trained_at = round(now, 3)
                next_kill = now + rng.uniform(*case.kill_every_s)
            if attempt.trained_at is None or attempt.sent_at is not None:
                continue
            kills = case.ray_kills and (plan is not None or case.final_kills)
            if kills and len(attempt.ray_kills) < KILLS_PER_START and now >= next_kill:
                pids = ray_hosts(proc.pid)
                if pids:
                    pid = rng.choice(pids)
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                        attempt.ray_kills.append(pid)
                    next_kill = now + rng.uniform(*case.kill_every_s)
            if plan is None or (reader is not None and reader.open):
                continue
            if step is None or step < target_step:
                continue
            # past its part: the signal comes at once, or the run would end before its plans
            ahead = case.steps_per_signal and step >= target_step + case.steps_per_signal
            if send_at is None:
                if deaths < case.kills_before_signal and not pipe:
                    err_offset, text = _read_from(err_path, err_offset)
                    deaths += len(_RAY_DEATH_RE.findall(text))
                    if deaths < case.kills_before_signal and not ahead:
                        continue
                send_at = now + rng.uniform(*case.delay_s)
            if ahead and send_at > now + 0.3:
                send_at = now + rng.uniform(0.0, 0.3)
            if now >= send_at:
                attempt.trained_before_signal = step > start_step
                sig = SIGNALS[plan.signal]
                with contextlib.suppress(ProcessLookupError):
                    (os.killpg if plan.group else os.kill)(proc.pid, sig)
                attempt.sent_at = round(time.monotonic() - started, 3)
        if attempt.hung:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except BaseException:  # e.g. Ctrl-C: nothing of this start is left running
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        end_session(proc.pid, 0.0)
        raise
    ended = time.monotonic() - started
    attempt.returncode, attempt.seconds = proc.returncode, round(ended, 3)
    if attempt.sent_at is not None:
        attempt.exit_s = round(ended - attempt.sent_at, 3)
    if reader is not None:  # the run ended before the pipe was closed
        deadline = time.monotonic() + 5.0
        while reader.open and time.monotonic() < deadline:
            reader.poll(0.2)
        reader.close()
    attempt.left = end_session(proc.pid, 30.0 if case.uses_ray else 5.0)
    attempt.newest_checkpoint, attempt.last_row = newest_checkpoint(logdir), last_row_step(logdir)
    with open(out_path, errors="replace") as f:
        attempt.stdout = f.read()
    if reader is not None:
        attempt.text = reader.text()
        with open(err_path, "w") as f:
            f.write(attempt.text)
    else:
        with open(err_path, errors="replace") as f:
            attempt.text = f.read()
    if match := _INTERRUPTED_RE.search(attempt.text):
        attempt.saved_step, attempt.saved_path = int(match[1]), match[2]
    if match := _RESUMING_RE.search(attempt.text):
        attempt.resumed_from = int(match[2])
    return attempt


# ------------------------------------------------------------------------ a campaign
def run_signal_campaign(
    case: SignalCase, logdir: str, signals: int, seed: int, out_dir: str, *,
    plans: list[Plan] | None = None, pipe_share: float = 0.25, max_failures: int = 2,
    log=None,
) -> SignalCampaign:  # fmt: skip
    """Runs ``case``'s command into ``logdir`` once per plan (the given ``plans``, else
    ``signals`` drawn by :func:`draw_plan`), each start stopped by its plan's signal, then
    runs it until it exits 0 (at most ``max_failures`` other exits in a row). A start that
    fails is a failure of the checks; the next start takes the next plan. A run that ends
    before its plans are spent ends the campaign. ``log(attempt)`` is called after each
    start."""
    rng = random.Random(f"chaos-signals:{seed}:{case.name}")
    if plans is None:
        plans = [draw_plan(rng, pipe_share) for _ in range(signals)]
    attempts: list[SignalAttempt] = []
    started, stops = time.monotonic(), 0

    def start(plan: Plan | None) -> SignalAttempt:
        target = stops * case.steps_per_signal
        attempt = run_signal_attempt(case, logdir, plan, len(attempts), out_dir, rng, target)
        attempts.append(attempt)
        if log is not None:
            log(attempt)
        return attempt

    ended = False
    for plan in plans:
        attempt = start(plan)
        stops += attempt.signalled and attempt.returncode == EXIT_INTERRUPTED
        if attempt.ended and not attempt.hung:
            ended = True  # before its signals were spent: check_signal_campaign says so
            break
    for _ in range(max_failures + 1 if not ended else 0):
        attempt = start(None)
        if attempt.returncode == 0 and not attempt.hung:
            break
    return SignalCampaign(case, logdir, len(plans), attempts, round(time.monotonic() - started, 1))


# ------------------------------------------------------------------------ checks
def attempt_problems(
    case: SignalCase, logdir: str, attempt: SignalAttempt, stops: list[int],
    previous: SignalAttempt | None,
) -> list[str]:  # fmt: skip
    """The per-start checks of the module docstring; ``stops``: the steps earlier stops
    saved (this one's is appended), ``previous``: the start before this one."""
    a, problems = attempt, []
    name = f"start {a.index} ({a.plan.describe() if a.plan else 'to the end'})"
    tail = "\n".join(a.text.strip().splitlines()[-8:])
    if a.hung:
        problems.append(f"{name} did not end within {case.timeout_s:g} s (killed)")
    if a.left:
        problems.append(f"{name}: processes of its session outlived it: {a.left}")
    expected = previous.stopped_step if previous is not None else None
    readable = a.plan is None or not a.plan.pipe  # a closed pipe's line went nowhere
    if expected is not None and readable and a.resumed_from != expected:
        problems.append(
            f"{name}: expected 'Resuming {logdir} from step {expected} (ckpt-{expected}).', "
            f"found {'step ' + str(a.resumed_from) if a.resumed_from is not None else 'none'}"
        )
    if previous is None and a.resumed_from is not None:
        problems.append(f"{name}: a new run says it resumes from step {a.resumed_from}")
    if not a.signalled:
        if a.plan is not None and not a.ended:
            problems.append(f"{name}: exit code {a.returncode} before its signal was sent")
        return problems  # its exit code: chaos_lib.check_campaign
    limit = case.grace_s + case.margin_s
    if a.exit_s is not None and a.exit_s > limit:
        problems.append(f"{name}: exited {a.exit_s:.1f} s after the signal (limit {limit:g} s)")
    if a.ended:
        return problems  # the run had ended: check_campaign checks what it left
    if a.returncode != EXIT_INTERRUPTED:
        return problems + [f"{name}: exit code {a.returncode}, not 130; stderr:\n{tail}"]
    if a.saved_step is None and not a.plan.pipe:
        problems.append(f"{name}: no 'interrupted at step N; checkpoint ...' line:\n{tail}")
    step = a.stopped_step
    if step is None:
        return problems
    if a.saved_path is not None:
        want = os.path.join(logdir, "checkpoints", f"ckpt-{step}")
        if os.path.normpath(a.saved_path) != os.path.normpath(want):
            problems.append(f"{name}: the stop names checkpoint {a.saved_path}, not {want}")
    if a.newest_checkpoint != step:
        problems.append(
            f"{name}: stopped at step {step} but the newest complete checkpoint is "
            f"{a.newest_checkpoint} (a lost checkpoint)"
        )
    if a.last_row is not None and a.last_row > step:
        problems.append(f"{name}: metrics.jsonl has a row at step {a.last_row}, past the stop's "
                        f"checkpoint {step} (lost work)")  # fmt: skip
    if stops and (step < max(stops) or (step == max(stops) and a.trained_before_signal)):
        problems.append(f"{name}: stopped at step {step} after an earlier stop at {max(stops)} "
                        "(steps must increase)")  # fmt: skip
    stops.append(step)
    return problems


def check_signal_campaign(campaign: SignalCampaign, min_signals: int | None = None) -> list[str]:
    """Every check of the module docstring; one line (or a few) per failure, those of one
    start beginning with ``start <index> ``."""
    case, logdir = campaign.case, campaign.logdir
    want = campaign.signals_planned if min_signals is None else min_signals
    failures = []
    starts = sum(a.plan is not None for a in campaign.attempts)
    if starts < want:
        failures.append(f"the run ended after {starts} of its {want} signalled starts")
    stops: list[int] = []
    previous = None
    for a in campaign.attempts:
        failures += attempt_problems(case, logdir, a, stops, previous)
        previous = a
    as_kills = [
        chaos_lib.Attempt(
            a.index, a.plan.describe() if a.plan else None, a.returncode,
            killed=a.signalled and (a.returncode == EXIT_INTERRUPTED or a.ended),
            seconds=a.seconds, stdout=a.stdout, stderr=a.text, hung=a.hung,
        )
        for a in campaign.attempts
    ]  # fmt: skip
    end = chaos_lib.Campaign(case.case, logdir, 0, as_kills, campaign.seconds)
    return failures + chaos_lib.check_campaign(end, min_kills=0)


_START_RE = re.compile(r"^start (\d+) ")


def failures_by_start(failures: list[str]) -> dict[int | None, list[str]]:
    """``failures`` (of :func:`check_signal_campaign`) by the start they name (None: the
    run's end and the campaign as a whole)."""
    found: dict[int | None, list[str]] = {}
    for failure in failures:
        match = _START_RE.match(failure)
        found.setdefault(int(match[1]) if match else None, []).append(failure)
    return found


# ------------------------------------------------------------------------ the CLI
def _log_line(a: SignalAttempt) -> str:
    what = a.plan.describe() if a.plan else "to the end"
    parts = [f"start {a.index:3d} {what:28s} exit {a.returncode}"]
    if a.signalled:
        parts.append(f"signal at {a.sent_at:.1f} s (trained at {a.trained_at:.1f} s), "
                     f"gone {a.exit_s:.2f} s later")  # fmt: skip
    if a.stopped_step is not None:
        parts.append(f"saved step {a.stopped_step}")
    if a.resumed_from is not None:
        parts.append(f"resumed from {a.resumed_from}")
    if a.hangs:
        parts.append(f"{a.hangs} hung env replaced")
    if a.ray_kills:
        parts.append(f"{len(a.ray_kills)} Ray kills, {a.ray_deaths} deaths reported")
    return ", ".join(parts) + f" ({a.seconds:.1f} s)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="flaky-impala,hang-a3c,ray-impala")
    parser.add_argument("--signals", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pipe_share", type=float, default=0.25)
    parser.add_argument("--workdir", default="/tmp/chaos_signals")
    parser.add_argument("--short", action="store_true", help="the test suite's commands")
    args = parser.parse_args()
    if args.signals < 0:
        parser.error("--signals: >= 0")
    cases = (short_cases if args.short else long_cases)(args.signals)
    names = [n for n in args.cases.split(",") if n]
    unknown = [n for n in names if n not in cases]
    if unknown:
        parser.error(f"--cases: choose from {sorted(cases)}")
    print(_benchmark_module("machine").machine_line(), flush=True)
    results = []
    for name in names:
        case, root = cases[name], os.path.join(args.workdir, name)
        shutil.rmtree(root, ignore_errors=True)
        env = " ".join(f"{k}={v}" for k, v in case.env)
        print(f"== {name}: {env + ' ' if env else ''}"
              f"{' '.join(case.case.command(os.path.join(root, 'run')))}", flush=True)  # fmt: skip
        campaign = run_signal_campaign(
            case, os.path.join(root, "run"), args.signals, args.seed, os.path.join(root, "logs"),
            pipe_share=args.pipe_share, log=lambda a: print("  " + _log_line(a), flush=True),
        )  # fmt: skip
        results.append({**campaign.summary(), "failures": check_signal_campaign(campaign)})
    print()
    print(f"{'case':13s} {'starts':>6s} {'signals':>7s} {'TERM/INT/HUP':>12s} {'to group':>8s} "
          f"{'pipes':>5s}  {'exits':20s} {'signal->exit s':>17s} {'hangs':>5s} {'env rst':>7s} "
          f"{'ray k/d':>7s} {'final':>8s} {'wall s':>6s}")  # fmt: skip
    for r in results:
        kinds = "/".join(str(r["signals_by_kind"].get(k, 0)) for k in SIGNALS)
        exits = " ".join(f"{k}:{v}" for k, v in sorted(r["exits"].items()))
        waits = (f"{r['exit_s_median']:.2f}/{r['exit_s_max']:.2f} ({r['grace_s']:g})"
                 if r["exit_s_max"] is not None else "-")  # fmt: skip
        pipes = f"{r['closed_pipes']}/{r['closed_pipe_starts']}"
        print(f"{r['case']:13s} {r['starts']:6d} {r['signals']:7d} {kinds:>12s} "
              f"{r['to_group']:8d} {pipes:>5s}  {exits:20s} {waits:>17s} "
              f"{r['hangs_replaced']:5d} {str(r['env_restarts']):>7s} "
              f"{r['ray_kills']:>3d}/{r['ray_deaths']:<3d} {str(r['final_step']):>8s} "
              f"{r['wall_s']:6.0f}")  # fmt: skip
    print(
        "(signals: sent; pipes: closed-pipe starts signalled / started; signal->exit: "
        "median/max (grace); hangs: hung environments replaced; env rst: final.json's "
        "env_restarts; ray k/d: actor processes killed / deaths the run reported)"
    )
    for r in results:
        print(f"\n{r['case']}: {'FAILED CHECKS' if r['failures'] else 'all checks passed'}"
              f" (stops saved at steps {r['stopped_steps']})")  # fmt: skip
        for failure in r["failures"]:
            print("  FAIL " + failure.replace("\n", "\n       "))
    print(json.dumps({"time": time.strftime("%Y-%m-%d %H:%M:%S"), "seed": args.seed,
                      "signals": args.signals, "results": results}))  # fmt: skip
    return 1 if any(r["failures"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
