"""The env-only ceiling: how fast the project's own vector env steps on this machine, alone.

    python benchmarks/ceiling.py --env=MinAtar/Breakout-v1 --num_envs=16 [--steps=20000]
        [--seconds=0] [--mode=auto] [--env_kwargs='{}']

``tfagents_vtrace.envs.make_vector_env`` (the factory the actors of a training run use, with
its mode and ``env_kwargs``) of ``--num_envs`` environments of ``--env`` (a gymnasium id, or
``package.module:maker`` as training's ``--env`` takes it: a game's columns), stepped at
least ``--steps`` agent steps (all sub-environments' steps counted, as training counts them)
and at least ``--seconds``, with random actions and no network: the rate no training of
those environments can beat on this machine. The actions are drawn from the batched action space
(seeded by the factory) before the clock starts, so the ceiling times the environments
alone. Prints one JSON line (``sps``: agent steps per second).

The benchmarks that quote an environment training throughput measure it in the same run
(:class:`Ceilings`; :func:`measure_subprocess`: a fresh process, as their training runs are,
no TensorFlow) and state each throughput as a fraction of it (:func:`fraction`,
:func:`format_fraction`). Each system is held against the ceiling of as many environments
as it steps: :func:`run_envs` reads a flagfile's environment settings (as text, without
importing TensorFlow), and a run of ``--num_actors`` N >= 1 (N vector envs of
``--num_envs`` each) has the ceiling of one vector env of N x ``--num_envs``; a peer library
(SB3) the ceiling of this vector env with its environment count (its own vector env is not
timed).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

_HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(_HERE)
DEFAULT_STEPS = 20_000
MIN_SECONDS = 1.0
""":class:`Ceilings`' default floor on a measurement's duration."""
ACTION_POOL = 64
"""Batched random actions drawn before the clock starts and cycled through."""
FAMILY_SETTINGS = ("num_trials", "screen_size", "repeat_action_probability")
"""``EnvFamilyConfig``'s settings: flags that become the environments' ``env_kwargs``."""
RUN_DEFAULTS = {"env": "CartPole-v1", "num_envs": "16", "num_actors": "0", "env_mode": "auto"}
"""``RunConfig``'s defaults of the flags :func:`run_envs` reads."""


def measure(
    env_id: str,
    num_envs: int,
    steps: int = DEFAULT_STEPS,
    *,
    mode: str = "auto",
    env_kwargs: dict | None = None,
    seed: int = 0,
    seconds: float = 0.0,
) -> dict:
    """Steps ``make_vector_env(env_id, num_envs, seed, mode=mode, **env_kwargs)`` at least
    ``steps`` agent steps and at least ``seconds`` with random actions, in this process.

    Returns:
      ``{"env_id", "num_envs", "mode", "steps", "seconds", "sps", "cpu_ms_per_step"}``: the
      agent steps taken (a multiple of ``num_envs``), the seconds they took, their rate and
      the process's CPU time per agent step (every thread's: an env's own stepping threads,
      as ALE's vector env has, included).
    """
    from tfagents_vtrace.envs import make_vector_env
    from tfagents_vtrace.envs.user_envs import resolve_env

    if num_envs < 1 or steps < 1:
        raise ValueError(f"num_envs and steps: expected >= 1, received {num_envs}, {steps}")
    env_id = resolve_env(env_id)  # a gymnasium id, or package.module:maker as --env takes
    env = make_vector_env(env_id, num_envs, seed, mode=mode, **(env_kwargs or {}))
    try:
        actions = [env.action_space.sample() for _ in range(ACTION_POOL)]
        env.step(actions[-1])  # first-call costs outside the clock
        taken, i = 0, 0
        start, cpu_start = time.perf_counter(), time.process_time()
        while True:
            env.step(actions[i % ACTION_POOL])
            taken += num_envs
            i += 1
            elapsed = time.perf_counter() - start
            if taken >= steps and elapsed >= seconds:
                break
        cpu = time.process_time() - cpu_start
    finally:
        env.close()
    return {"env_id": env_id, "num_envs": num_envs, "mode": mode, "steps": taken,
            "seconds": elapsed, "sps": taken / elapsed,
            "cpu_ms_per_step": 1e3 * cpu / taken}  # fmt: skip


def measure_subprocess(
    env_id: str,
    num_envs: int,
    steps: int = DEFAULT_STEPS,
    *,
    mode: str = "auto",
    env_kwargs: dict | None = None,
    seed: int = 0,
    seconds: float = 0.0,
    timeout: float | None = 600.0,
) -> dict:
    """:func:`measure` in a fresh process (this file as a script, cwd the repository root),
    as a benchmark's training runs are; raises ``RuntimeError`` with its stderr's tail when
    it fails."""
    cmd = [sys.executable, os.path.abspath(__file__), f"--env={env_id}",
           f"--num_envs={num_envs}", f"--steps={steps}", f"--mode={mode}",
           f"--env_kwargs={json.dumps(env_kwargs or {})}", f"--seed={seed}",
           f"--seconds={seconds}"]  # fmt: skip
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"env-only ceiling of {env_id} x {num_envs} failed (rc={proc.returncode}):\n"
            f"{proc.stderr[-3000:]}"
        )
    return json.loads(lines[-1])


def fraction(sps: float | None, ceiling: float | None) -> float | None:
    """``sps / ceiling``; None when either is missing or the ceiling is not positive."""
    if sps is None or not ceiling or ceiling <= 0:
        return None
    return sps / ceiling


def format_fraction(x: float | None) -> str:
    """A fraction as a percentage with two significant digits where it is small ("37%",
    "4.2%", "0.53%"); "-" for None."""
    if x is None:
        return "-"
    if x >= 0.1:
        return f"{x:.0%}"
    if x >= 0.01:
        return f"{x:.1%}"
    return f"{x:.2%}"


def flag_values(flagfile: str | None = None, extra: Sequence[str] = ()) -> dict[str, str]:
    """``{name: text}`` of a flagfile's flags, then of ``extra`` (command-line flags, later ones
    winning; a ``--flagfile`` among them relative to :data:`ROOT`), read as text without
    TensorFlow by the project's flagfile reader (``tfagents_vtrace.utils.flagfiles``: nested
    flagfiles in place; ``--name`` is "true", ``--noname`` "false").

    Raises:
      ValueError: a flagfile that cannot be read, or a line or item that is not a flag.
    """
    from tfagents_vtrace.utils import flagfiles

    items = list(extra)
    for i, item in enumerate(items):  # a --flagfile PATH of extra: relative to ROOT
        name, _, path = item.partition("=")
        if name in flagfiles.FLAGFILE_ARGS and path:
            items[i] = f"{name}={os.path.join(ROOT, os.path.expanduser(path))}"
        elif item in flagfiles.FLAGFILE_ARGS and i + 1 < len(items):
            items[i + 1] = os.path.join(ROOT, os.path.expanduser(items[i + 1]))
    lines = flagfiles.flagfile_lines(flagfile) if flagfile else []
    return flagfiles.flag_texts([*lines, *flagfiles.expand_flagfiles(items)])


def run_envs(flagfile: str | None = None, extra: Sequence[str] = ()) -> dict:
    """The environments a run of ``flagfile`` with ``extra`` flags steps, as the keyword
    arguments of :func:`measure` / :func:`measure_subprocess`: ``env_id``, ``num_envs`` (all
    its actors' environments: ``--num_envs`` x max(1, ``--num_actors``)), ``mode`` and
    ``env_kwargs`` (the environment-family settings it gives, as ``EnvFamilyConfig`` turns
    them into constructor arguments)."""
    from tfagents_vtrace.envs.family import EnvFamilyConfig

    values = RUN_DEFAULTS | flag_values(flagfile, extra)
    family = {}
    for name in FAMILY_SETTINGS:
        if name in values:
            text = values[name]
            family[name] = float(text) if name == "repeat_action_probability" else int(text)
    env_id = values["env"]
    actors = max(1, int(values["num_actors"]))
    return {
        "env_id": env_id,
        "num_envs": int(values["num_envs"]) * actors,
        "mode": values["env_mode"],
        "env_kwargs": EnvFamilyConfig(**family).env_kwargs(env_id),
    }


def label(spec: dict) -> str:
    """A :func:`run_envs` dict in a few words: "MinAtar/Breakout-v1 x16" (its mode and its
    ``env_kwargs`` added when it has others than the defaults)."""
    text = f"{spec['env_id']} x{spec['num_envs']}"
    if spec.get("mode", "auto") != "auto":
        text += f" {spec['mode']}"
    if spec.get("env_kwargs"):
        text += " " + json.dumps(spec["env_kwargs"], sort_keys=True)
    return text


class Ceilings:
    """The env-only ceilings of one benchmark run, by set of environments (a :func:`run_envs`
    dict, named by :func:`label`): :meth:`measure` one round (``steps`` agent steps and at
    least ``seconds``, so that a fast env's round is not one blink a busy machine can
    swallow) in a fresh process, or in this one with ``in_process`` (an env registered only
    here); :meth:`median` over the rounds. ``steps`` 0 measures nothing (every ceiling
    None). A measurement that fails is kept as an error line, not raised: a long benchmark
    goes on without that ceiling."""

    def __init__(self, steps: int, *, in_process: bool = False, seconds: float = MIN_SECONDS):
        self.steps, self.in_process, self.seconds = int(steps), in_process, seconds
        self.specs: dict[str, dict] = {}
        self.runs: dict[str, list[float]] = {}
        self.errors: dict[str, list[str]] = {}

    def measure(self, spec: dict) -> dict | None:
        """One measurement of ``spec``: :func:`measure`'s dict, or None (disabled, or it
        failed: :meth:`last_error` says why)."""
        if self.steps < 1:
            return None
        key = label(spec)
        self.specs.setdefault(key, dict(spec))
        self.runs.setdefault(key, [])
        kwargs = {k: spec[k] for k in ("env_id", "num_envs", "mode", "env_kwargs") if k in spec}
        try:
            if self.in_process:
                result = measure(**kwargs, steps=self.steps, seconds=self.seconds)
            else:
                result = measure_subprocess(**kwargs, steps=self.steps, seconds=self.seconds)
        except Exception as e:  # kept and reported: the benchmark goes on
            lines = str(e).strip().splitlines() or [type(e).__name__]
            self.errors.setdefault(key, []).append(f"{type(e).__name__}: {lines[-1]}")
            return None
        self.runs[key].append(result["sps"])
        return result

    def last_error(self, spec: dict) -> str | None:
        errors = self.errors.get(label(spec))
        return errors[-1] if errors else None

    def median(self, spec: dict) -> float | None:
        """The median agent steps/s of ``spec``'s measurements (None without one)."""
        runs = self.runs.get(label(spec))
        return statistics.median(runs) if runs else None

    def summary(self) -> dict[str, dict]:
        """``{label: {env_id, num_envs, mode, env_kwargs, steps, runs, median, errors}}``."""
        return {
            key: {**spec, "steps": self.steps, "runs": self.runs.get(key, []),
                  "median": self.median(spec), "errors": self.errors.get(key, [])}
            for key, spec in self.specs.items()
        }  # fmt: skip


def main(argv=None) -> None:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--num_envs", type=int, default=16)
    p.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    p.add_argument("--mode", default="auto", help="make_vector_env mode")
    p.add_argument("--env_kwargs", default="{}", help="JSON: the environments' kwargs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seconds", type=float, default=0.0, help="step for at least this long")
    args = p.parse_args(argv)
    if args.num_envs < 1 or args.steps < 1:
        p.error("--num_envs and --steps: expected ints >= 1")
    result = measure(args.env, args.num_envs, args.steps, mode=args.mode,
                     env_kwargs=json.loads(args.env_kwargs), seed=args.seed,
                     seconds=args.seconds)  # fmt: skip
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    # Run as a script, benchmarks/ leads sys.path and benchmarks/minatar.py would shadow the
    # `minatar` package that MinAtar ids import: drop that entry first.
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    sys.path.insert(0, ROOT)
    main()
