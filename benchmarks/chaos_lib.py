"""Chaos runs of ``experiments.train``: SIGKILL a training command at random moments, run the
same command again until it exits 0, then check what the run directory holds.

Shared by ``tests/runtime/test_chaos.py`` (a few kills per agent, tiny step budgets) and
``benchmarks/chaos_resume.py`` (50+ kills per agent; IMPALA with the full
``impala_cartpole.cfg`` budget, so it must also solve CartPole). The run directory's rules
(docs/design.md, "The run directory") are what is checked: the same command resumes from the
newest intact checkpoint, a start killed before its step-0 checkpoint restarts,
``metrics.jsonl`` holds one strict-JSON row per step, the run ends with ``final.json`` and an
exported policy, and nothing temporary is left behind.

Where a kill lands is drawn from a seeded ``random.Random`` per agent: a *plan* names an
anchor that the parent sees from outside the child (its spawn, its pid in ``DIR/.lock``, its
first progress line on stderr, a checkpoint or replay archive being written, a progress line
near the end, the export's temporary directory) and a random delay after it. Plans that cost
training progress (a kill while training loses what followed the last checkpoint) are
spread so the run does not end before the planned number of kills: while the newest
checkpoint is ahead of the kill schedule only start-up plans are drawn, the last fifth of
the kills aim at the end of the run (final steps, final evaluation, export), a run that
already reached its end is killed in its start-up or export, and one that ended (its
``final.json`` written) before the kills were spent in the start-up of the same command run
again. Each kill records the phase the child was seen in when it was killed.

No TensorFlow import at module level (the test process has its own; ``policy_acts`` imports
it when called).
"""

from __future__ import annotations

import ctypes
import dataclasses
import glob
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRACEBACK = "Traceback (most recent call last)"
# Names a kill may leave and the next start must clean: TensorFlow's ``ckpt-<n>_temp/`` and
# its atomic writes' ``<name>.tmp<uuid>``, the library's ``<name>.tmp``,
# ``replay-<n>.tmp.npz``, ``policy.tmp-*`` / ``policy.old-*`` of the export, and the
# ``.tempstate<n>`` files of TensorFlow's tensor bundles.
LEFTOVER_RE = re.compile(r"_temp|\.tmp|\.tempstate|^policy\.old-")
_PROGRESS_RE = re.compile(r"^step=(\d+) ")
_INDEX_RE = re.compile(r"^ckpt-(\d+)\.index$")
_DATA_RE = re.compile(r"^ckpt-(\d+)\.data-\d+-of-\d+$")
_REPLAY_RE = re.compile(r"^replay-(\d+)\.npz$")

# Kill plans: the anchor a delay counts from, and the delay's range in seconds.
PLANS = {
    "import": ("spawn", (0.05, 2.5)),  # mostly imports, sometimes the setup after them
    "setup": ("lock", (0.0, 1.2)),  # restore, replay load, metrics repair, step-0 save
    "checkpoint": ("write", (0.0, 0.015)),  # inside a checkpoint / replay archive write
    "training": ("progress", (0.0, 0.6)),
    "end": ("near_end", (0.0, 1.5)),  # the last steps, final evaluation, save, export
    "export": ("export", (0.0, 0.4)),
}
_EARLY = {"import": 2, "setup": 3, "checkpoint": 3, "training": 2}
_LATE = {"end": 1, "export": 1}
_ENDED = {"import": 1, "setup": 2, "export": 3}
_FINISHED = {"import": 1, "setup": 1}  # final.json written: a start only finds that out
_THROTTLED = {"import": 1, "setup": 2}


@dataclasses.dataclass(frozen=True)
class Case:
    """One agent's chaos command: ``--flagfile`` plus ``flags`` (the later value wins).

    ``learn_return``: the final greedy return the run must reach despite the kills (None: no
    learning check). ``budget_steps``: the steps over which progress-costing kills are spread
    (default the command's ``total_steps``; less for a run that ends at ``stop_return``).
    """

    agent: str
    flagfile: str
    flags: tuple[str, ...] = ()
    learn_return: float | None = None
    budget_steps: int | None = None

    def values(self) -> dict[str, str]:
        """The command's flag values: the flagfile's lines, then ``flags``."""
        values = {}
        with open(os.path.join(ROOT, self.flagfile)) as f:
            lines = [line.strip() for line in f]
        for arg in [x for x in lines if x.startswith("--")] + list(self.flags):
            name, _, value = arg[2:].partition("=")
            values[name] = value
        return values

    @property
    def total_steps(self) -> int:
        return int(self.values()["total_steps"])

    @property
    def eval_every(self) -> int:
        return int(self.values().get("eval_every") or 0)

    @property
    def stop_return(self) -> float | None:
        value = self.values().get("stop_return")
        return float(value) if value not in (None, "", "None") else None

    @property
    def env_id(self) -> str:
        return self.values()["env"]

    def command(self, logdir: str, *extra: str) -> list[str]:
        return [
            sys.executable, "-m", "experiments.train",
            f"--flagfile={os.path.join(ROOT, self.flagfile)}", f"--logdir={logdir}",
            *self.flags, *extra,
        ]  # fmt: skip


# Frequent checkpoints and rows (many moments to land in), small evaluations.
_CHAOS = ("--checkpoint_every_s=0.25", "--log_every_s=0.2")
# Without XLA a start reaches training seconds sooner (no compile); resume does not depend on it.
_NOJIT = "--nojit_compile"
SHORT = {
    "impala": Case(
        "impala", "experiments/configs/impala_cartpole.cfg",
        (*_CHAOS, _NOJIT, "--total_steps=8000", "--eval_every=2000", "--eval_episodes=2"),
    ),
    "acer": Case(
        "acer", "experiments/configs/acer_cartpole.cfg",
        (*_CHAOS, _NOJIT, "--total_steps=4800", "--eval_every=1600", "--eval_episodes=2"),
    ),
    "taac": Case(
        "taac", "experiments/configs/taac_pendulum.cfg",
        (*_CHAOS, _NOJIT, "--total_steps=600", "--initial_collect_steps=200", "--eval_every=300",
         "--eval_episodes=1"),
    ),
}  # fmt: skip
LONG = {
    # The whole impala_cartpole.cfg budget: it ends at its stop_return (475), which it must
    # reach; kills spread over the steps it usually needs (30k-200k).
    "impala": Case(
        "impala", "experiments/configs/impala_cartpole.cfg", _CHAOS,
        learn_return=475.0, budget_steps=150_000,
    ),
    # ACER and TAAC: the shipped configs (XLA on) over a budget the kills spread over; ACER's
    # stop_return is out of reach so that the run lasts its 24k steps.
    "acer": Case(
        "acer", "experiments/configs/acer_cartpole.cfg",
        (*_CHAOS, "--total_steps=24000", "--eval_every=4000", "--eval_episodes=5",
         "--stop_return=1000"),
    ),
    "taac": Case(
        "taac", "experiments/configs/taac_pendulum.cfg",
        (*_CHAOS, "--total_steps=3000", "--initial_collect_steps=500", "--eval_every=1000",
         "--eval_episodes=2"),
    ),
}  # fmt: skip


def child_env() -> dict[str, str]:
    """The children's environment: one TensorFlow thread pool thread each (two cores are
    shared with the parent and other tests), TensorFlow's C++ logs quiet."""
    env = dict(os.environ)
    env.update(
        TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="2", OMP_NUM_THREADS="1",
        TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1",
    )  # fmt: skip
    return env


@dataclasses.dataclass
class Attempt:
    """One start of the command: how it ended, and for a kill, when and where it landed."""

    index: int
    plan: str | None
    returncode: int | None
    killed: bool
    seconds: float
    kill_at: float | None = None  # seconds after spawn
    phase: str | None = None
    stdout: str = ""
    stderr: str = ""
    hung: bool = False


@dataclasses.dataclass
class Campaign:
    case: Case
    logdir: str
    kills_planned: int
    attempts: list[Attempt]
    seconds: float

    @property
    def kills(self) -> int:
        return sum(a.killed for a in self.attempts)

    @property
    def last(self) -> Attempt:
        return self.attempts[-1]

    def phases(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for a in self.attempts:
            if a.killed:
                counts[a.phase or "?"] = counts.get(a.phase or "?", 0) + 1
        return counts


class _Watcher:
    """What the parent sees of one child from outside: its pid in the lock file, its progress
    lines, the temporary files of a checkpoint, replay archive or export being written."""

    def __init__(self, logdir: str, stderr_path: str, pid: int, total_steps: int, near: int):
        self.logdir, self.ckpt_dir = logdir, os.path.join(logdir, "checkpoints")
        self.stderr_path, self.pid = stderr_path, pid
        self.total, self.near = total_steps, near
        self.locked = self.progress = self.near_end = self.write = self.export = None
        self.last_step: int | None = None
        self._offset, self._partial = 0, b""
        self._stale = self._temp_names()  # a killed start's leftovers are not this one's writes

    def _temp_names(self) -> set[str]:
        names = set()
        for directory in (self.logdir, self.ckpt_dir):
            try:
                names |= {os.path.join(directory, n) for n in os.listdir(directory)}
            except OSError:
                pass
        return {n for n in names if ".tmp" in n or "_temp" in n}

    def poll(self, now: float) -> None:
        if self.locked is None:
            try:
                with open(os.path.join(self.logdir, ".lock")) as f:
                    if f.read().strip() == str(self.pid):
                        self.locked = now
            except OSError:
                pass
        self._read_stderr(now)
        if self.locked is not None:
            if self._checkpoint_writing():
                self.write = self.write if self.write is not None else now
            if self._exporting():
                self.export = self.export if self.export is not None else now

    def _read_stderr(self, now: float) -> None:
        try:
            with open(self.stderr_path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except OSError:
            return
        self._offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        for line in lines:
            match = _PROGRESS_RE.match(line.decode(errors="replace"))
            if match:
                self.last_step = int(match[1])
                self.progress = self.progress if self.progress is not None else now
                if self.last_step >= self.near and self.near_end is None:
                    self.near_end = now

    def _checkpoint_writing(self) -> bool:
        """A checkpoint's ``_temp`` directory, a state file's or replay archive's ``.tmp``."""
        try:
            names = os.listdir(self.ckpt_dir)
        except OSError:
            return False
        return any(
            ("_temp" in n or ".tmp" in n) and os.path.join(self.ckpt_dir, n) not in self._stale
            for n in names
        )

    def _exporting(self) -> bool:
        """This child's ``policy.tmp-<pid>-*`` (``export.target.write_atomically``)."""
        try:
            return any(n.startswith(f"policy.tmp-{self.pid}-") for n in os.listdir(self.logdir))
        except OSError:
            return False

    def anchor(self, name: str) -> float | None:
        """When the plan's anchor was seen (None: not yet). A run that reaches its export
        before the anchor (e.g. no checkpoint left to write) is anchored there."""
        seen = {
            "spawn": 0.0, "lock": self.locked, "progress": self.progress,
            "write": self.write, "near_end": self.near_end, "export": self.export,
        }[name]  # fmt: skip
        return seen if seen is not None else self.export

    def phase(self, started_wall: float) -> str:
        """Where the child is, seen from outside, as it is killed."""
        if self.locked is None:
            return "imports"
        if self._exporting():
            return "export"
        if self._checkpoint_writing():
            return "checkpoint write"
        final = os.path.join(self.logdir, "final.json")
        if os.path.exists(final) and os.path.getmtime(final) >= started_wall:
            return "after final.json"
        if self.progress is None:
            return "setup"
        if self.last_step is not None and self.last_step >= self.total:
            return "final evaluation/save"
        if self.near_end is not None:
            return "last steps"
        return "training"


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


try:  # resolved here: the child calls it between fork and exec, where nothing is imported
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _PRCTL = None


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the parent dies (Linux ``PR_SET_PDEATHSIG``), so
    an interrupted campaign leaves no trainer behind writing into its run directory."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG


def run_attempt(
    case: Case, logdir: str, plan: str | None, delay: float, out_dir: str, index: int,
    timeout_s: float,
) -> Attempt:  # fmt: skip
    """Starts the command once; with ``plan``, SIGKILLs its process group ``delay`` seconds
    after the plan's anchor (unless it exits first)."""
    os.makedirs(out_dir, exist_ok=True)
    out_path = os.path.join(out_dir, f"{case.agent}-{index:03d}.out")
    err_path = os.path.join(out_dir, f"{case.agent}-{index:03d}.err")
    near = max(case.total_steps - max(case.eval_every, 1), 1)
    started, started_wall = time.monotonic(), time.time()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            case.command(logdir), cwd=ROOT, env=child_env(), stdout=out, stderr=err,
            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent,
        )  # fmt: skip
    watcher = _Watcher(logdir, err_path, proc.pid, case.total_steps, near)
    kill_at, phase, hung = None, None, False
    anchor = PLANS[plan][0] if plan else None
    try:
        while proc.poll() is None:
            now = time.monotonic() - started
            if now > timeout_s:
                hung = True
                _kill_group(proc)
                break
            watcher.poll(now)
            if anchor is not None and kill_at is None:
                seen = watcher.anchor(anchor)
                if seen is not None:
                    kill_at = seen + delay
            if kill_at is not None and now >= kill_at:
                phase = watcher.phase(started_wall)
                _kill_group(proc)
                kill_at = now
                break
            time.sleep(0.003)
    except BaseException:  # e.g. Ctrl-C: no trainer is left running
        _kill_group(proc)
        raise
    finally:
        proc.wait()
    seconds = time.monotonic() - started
    killed = not hung and proc.returncode == -signal.SIGKILL and phase is not None
    with open(out_path, errors="replace") as f:
        stdout = f.read()
    with open(err_path, errors="replace") as f:
        stderr = f.read()
    return Attempt(
        index, plan, proc.returncode, killed, seconds,
        kill_at=round(kill_at, 3) if killed else None,
        phase=phase if killed else None, stdout=stdout, stderr=stderr, hung=hung,
    )  # fmt: skip


def complete_steps(logdir: str) -> list[int]:
    """Steps of the checkpoints with an index and a data file, newest first (not verified)."""
    try:
        names = os.listdir(os.path.join(logdir, "checkpoints"))
    except OSError:
        return []
    data = {int(m[1]) for m in map(_DATA_RE.match, names) if m}
    return sorted((int(m[1]) for m in map(_INDEX_RE.match, names) if m and int(m[1]) in data),
                  reverse=True)  # fmt: skip


def _ended(case: Case, logdir: str, step: int | None) -> bool:
    """Whether the run's newest checkpoint is its last: ``total_steps`` reached, or the
    evaluation row at that step reached ``stop_return``."""
    if step is None:
        return False
    if step >= case.total_steps:
        return True
    stop = case.stop_return
    if stop is None:
        return False
    for row in read_rows(logdir)[0]:
        if row.get("step") == step and (row.get("eval_return") or -1e300) >= stop:
            return True
    return False


def _final_step(logdir: str) -> int | None:
    try:
        with open(os.path.join(logdir, "final.json")) as f:
            return json.load(f).get("step")
    except (OSError, ValueError, AttributeError):
        return None


def choose_plan(rng: random.Random, case: Case, logdir: str, kills: int, planned: int) -> str:
    """The next kill's plan (module docstring)."""
    steps = complete_steps(logdir)
    newest = steps[0] if steps else None
    late = max(2, planned // 5)
    if newest is not None and _final_step(logdir) == newest:
        weights = _FINISHED
    elif _ended(case, logdir, newest):
        weights = _ENDED
    elif kills >= planned - late:
        weights = _LATE
    else:
        progress = (newest or 0) / (case.budget_steps or case.total_steps)
        on_schedule = (kills + 1) / (planned - late)
        weights = _THROTTLED if progress > on_schedule else _EARLY
    return rng.choices(list(weights), list(weights.values()))[0]


def run_campaign(
    case: Case, logdir: str, kills: int, seed: int, out_dir: str, *, timeout_s: float = 900.0,
    max_seconds: float | None = None, max_failures: int = 3, log=None,
) -> Campaign:  # fmt: skip
    """Runs ``case``'s command into ``logdir``, SIGKILLing it ``kills`` times, then runs it
    until it exits 0 (at most ``max_failures`` other exits in a row). A run that ends before
    its kills are spent is started (and killed) again: the starts of an ended run only find
    that out (at most ``max_failures`` such starts without a kill in a row). After
    ``max_seconds`` no more kills are planned. ``log(attempt)`` is called after each start."""
    rng = random.Random(f"chaos:{seed}:{case.agent}")
    attempts: list[Attempt] = []
    started, failures, misses = time.monotonic(), 0, 0
    while True:
        done = sum(a.killed for a in attempts)
        over = max_seconds is not None and time.monotonic() - started > max_seconds
        plan = choose_plan(rng, case, logdir, done, kills) if done < kills and not over else None
        delay = rng.uniform(*PLANS[plan][1]) if plan else 0.0
        attempt = run_attempt(case, logdir, plan, delay, out_dir, len(attempts), timeout_s)
        attempts.append(attempt)
        if log is not None:
            log(attempt)
        if attempt.killed:
            failures = misses = 0
            continue
        if attempt.returncode == 0 and not attempt.hung:
            if plan is None or misses >= max_failures:
                break
            misses += 1  # it ended before this plan's moment came
            continue
        failures += 1
        if failures > max_failures:
            break
    return Campaign(case, logdir, kills, attempts, round(time.monotonic() - started, 1))


# ------------------------------------------------------------------------------- checks
def _strict(text: str):
    """``json.loads`` that refuses ``NaN`` / ``Infinity`` (strict JSON)."""

    def refuse(name):
        raise ValueError(f"non-finite constant {name}")

    return json.loads(text, parse_constant=refuse)


def read_rows(logdir: str) -> tuple[list[dict], list[str]]:
    """``(rows, problems)`` of ``DIR/metrics.jsonl``: the lines that parse as strict JSON
    objects, and one problem per line that does not (or a last line without newline)."""
    path = os.path.join(logdir, "metrics.jsonl")
    if not os.path.exists(path):
        return [], ["metrics.jsonl: missing"]
    with open(path) as f:
        text = f.read()
    rows, problems = [], []
    if text and not text.endswith("\n"):
        problems.append("metrics.jsonl: the last line has no newline")
    for number, line in enumerate(text.splitlines(), 1):
        try:
            row = _strict(line)
            if not isinstance(row, dict):
                raise ValueError("not an object")
            rows.append(row)
        except ValueError as e:
            problems.append(f"metrics.jsonl line {number} is not strict JSON ({e}): {line[:80]!r}")
    return rows, problems


def row_problems(rows: list[dict]) -> list[str]:
    """Steps strictly increase; ``updates``, ``episodes`` and ``wall_time`` (which continues
    across resumes) never go backwards."""
    problems = []
    for before, after in zip(rows, rows[1:], strict=False):
        if not after.get("step", -1) > before.get("step", -1):
            problems.append(f"metrics.jsonl: step {after.get('step')} after {before.get('step')}")
        for key in ("updates", "episodes", "wall_time"):
            if key in before and key in after and after[key] < before[key]:
                problems.append(
                    f"metrics.jsonl: {key} {before[key]} -> {after[key]} (steps {before['step']}"
                    f" -> {after['step']})"
                )
    return problems


def leftovers(logdir: str) -> list[str]:
    """Temporary files and directories under ``logdir`` (``checkpoints/damaged/`` aside: what
    was moved there is kept on purpose)."""
    found = []
    for root, dirs, files in os.walk(logdir):
        rel = os.path.relpath(root, logdir)
        if rel.split(os.sep)[:2] == ["checkpoints", "damaged"]:
            continue
        for name in dirs + files:
            if LEFTOVER_RE.search(name) and not (rel == "." and name == ".lock"):
                found.append(os.path.normpath(os.path.join(rel, name)))
    return sorted(found)


def last_json_line(stdout: str) -> dict | None:
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                return _strict(line)
            except ValueError:
                return None
    return None


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def check_campaign(campaign: Campaign, min_kills: int | None = None) -> list[str]:
    """Every check of a finished campaign except the policy's (:func:`policy_acts`); one
    line per failure."""
    case, logdir, failures = campaign.case, campaign.logdir, []
    want = campaign.kills_planned if min_kills is None else min_kills
    if campaign.kills < want:
        failures.append(f"only {campaign.kills} kills landed (wanted {want})")
    for a in campaign.attempts:
        if a.hung:
            failures.append(f"start {a.index} ({a.plan}) hung: killed after {a.seconds:.0f} s")
        elif not a.killed and a.returncode != 0:
            failures.append(
                f"start {a.index} exited {a.returncode} (not killed); stderr:\n{_tail(a.stderr)}"
            )
        if TRACEBACK in a.stderr:
            failures.append(
                f"start {a.index} ({a.plan}) printed a traceback:\n{_tail(a.stderr, 30)}"
            )
    if campaign.last.returncode != 0:
        failures.append(f"the last start exited {campaign.last.returncode}")
        return failures
    printed = last_json_line(campaign.last.stdout)
    if not printed or printed.get("final") is not True:
        failures.append(
            f"the last start printed no final JSON line: {_tail(campaign.last.stdout, 3)!r}"
        )
    try:
        with open(os.path.join(logdir, "final.json")) as f:
            final = _strict(f.read())
    except (OSError, ValueError) as e:
        return failures + [f"final.json: {e}"]
    stop = case.stop_return
    solved = (
        stop is not None and final.get("solve_step") is not None
        and (final.get("eval_return") or -1e300) >= stop
    )  # fmt: skip
    if final.get("final") is not True:
        failures.append('final.json: no "final": true')
    if not (final.get("step", -1) >= case.total_steps or solved):
        failures.append(f"final.json: step {final.get('step')} < total_steps {case.total_steps}")
    if (
        case.learn_return is not None
        and not (final.get("eval_return") or -1e300) >= case.learn_return
    ):
        failures.append(f"learning: eval_return {final.get('eval_return')} < {case.learn_return}")
    rows, problems = read_rows(logdir)
    failures += problems + row_problems(rows)
    if rows:
        last = rows[-1]
        if last.get("step") != final.get("step"):
            failures.append(
                f"the last row's step {last.get('step')} != final.json's {final.get('step')}"
            )
        for key in ("updates", "episodes"):
            if key in last and key in final and final[key] < last[key]:
                failures.append(f"final.json {key} {final[key]} < the last row's {last[key]}")
    else:
        failures.append("metrics.jsonl: no rows")
    left = leftovers(logdir)
    if left:
        failures.append(f"temporary files left: {left}")
    return failures + retention_problems(logdir)


MAX_TO_KEEP = 3  # runtime.checkpointing.Checkpointer's


def retention_problems(logdir: str) -> list[str]:
    """``checkpoints/`` keeps at most ``MAX_TO_KEEP`` complete checkpoints; where there are
    replay archives, each kept checkpoint has its own and no archive outlives its checkpoint."""
    steps = complete_steps(logdir)
    problems = []
    if len(steps) > MAX_TO_KEEP:
        problems.append(
            f"checkpoints/ keeps {len(steps)} checkpoints (max_to_keep {MAX_TO_KEEP}): "
            f"{sorted(steps)}"
        )
    names = set(os.listdir(os.path.join(logdir, "checkpoints"))) if steps else set()
    archives = {int(m[1]) for m in map(_REPLAY_RE.match, names) if m}
    if archives and (archives != set(steps)):
        problems.append(
            f"replay archives {sorted(archives)} do not match the checkpoints {sorted(steps)}"
        )
    return problems


def policy_acts(policy_dir: str, env_id: str, steps: int = 50) -> str | None:
    """Loads ``policy_dir`` with plain ``tf.saved_model.load`` and plays ``steps`` steps of
    ``env_id`` through ``action`` and ``greedy_action`` (batch 1, the export contract's call);
    None, or what failed. A path holding ``[ ] * ?`` is read through ``/proc/self/fd`` (as
    for any SavedModel: TensorFlow takes the path as a glob pattern)."""
    import gymnasium as gym
    import numpy as np
    import tensorflow as tf

    fd = None
    try:
        if glob.escape(policy_dir) != policy_dir:  # TensorFlow reads a path as a pattern
            fd = os.open(policy_dir, os.O_RDONLY | os.O_DIRECTORY)
        policy = tf.saved_model.load(policy_dir if fd is None else f"/proc/self/fd/{fd}")
        spec = policy.signatures["action"].structured_input_signature[1]
        env = gym.make(env_id)
        obs, _ = env.reset(seed=0)
        state = policy.get_initial_state(batch_size=tf.constant(1))
        pa = spec["prev_action"]
        prev_action = np.zeros([1, *pa.shape[1:]], pa.dtype.as_numpy_dtype)
        prev_reward, first = np.zeros([1], np.float32), np.ones([1], bool)
        for _ in range(steps):
            for method in (policy.action, policy.greedy_action):
                out = method(
                    observation=np.asarray(obs, np.float32)[None], first=first,
                    prev_action=prev_action, prev_reward=prev_reward, state=state,
                )  # fmt: skip
            action = out["action"].numpy()
            if not np.all(np.isfinite(action)) or not env.action_space.contains(
                action[0].astype(env.action_space.dtype)
            ):
                return f"action {action[0]!r} is not in {env.action_space}"
            obs, reward, terminated, truncated, _ = env.step(action[0])
            prev_action, prev_reward = action.astype(prev_action.dtype), np.float32([reward])
            first, state = np.array([terminated or truncated]), out["state"]
            if terminated or truncated:
                obs, _ = env.reset()
        env.close()
    except Exception as e:  # noqa: BLE001 - the check reports any failure
        return f"policy {policy_dir}: {type(e).__name__}: {e}"
    finally:
        if fd is not None:
            os.close(fd)
    return None
