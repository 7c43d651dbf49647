"""Behaviour before and after a change that must not change it (a refactor): deterministic
runs of shipped configs write the same metrics rows, and their exported policies act alike.

    python benchmarks/same_behaviour.py --write=before.json [--configs=...] [--workdir=DIR]
    python benchmarks/same_behaviour.py --compare=before.json

Each config runs once as ``python -m experiments.train --config=NAME --deterministic
--seed=0`` with its ``--total_steps`` shortened (``SHORT``), in a fresh subprocess. Recorded
per config: a SHA-256 of ``metrics.jsonl`` with the timing fields left out (as
``benchmarks/repeatability.py`` fingerprints runs), the rows themselves (so a difference can
be shown), and the exported policy's greedy episodes (returns and lengths of 8 episodes on
seed 1234) and its greedy actions on 64 observations drawn from the observation space with
seed 0. ``--compare`` runs the same and prints, per config, ``same`` or the first row or
field that differs; the exit code is 1 when any differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

from tfagents_vtrace.runtime.rundir.metrics_log import TIMING_FIELDS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))
# Python puts this script's folder first on sys.path, where benchmarks/minatar.py would
# shadow the minatar package that MinAtar's environments import. The checkout's own package
# goes first instead, so the policy is loaded by the code that trained it (the runs run in
# ROOT), not by an installed copy from another checkout.
sys.path[:] = [ROOT, *(p for p in sys.path if os.path.abspath(p or ".") != HERE)]

SHORT = {
    "impala_cartpole": ("--total_steps=6000", "--eval_every=3000", "--eval_episodes=3"),
    "a2c_cartpole": ("--total_steps=6000", "--eval_every=3000", "--eval_episodes=3"),
    "acer_pendulum": ("--total_steps=3000", "--eval_every=1500", "--eval_episodes=2"),
    "taac_pendulum": ("--total_steps=2000", "--eval_every=1000", "--eval_episodes=2"),
    "impala_minatar_breakout": ("--total_steps=8192", "--eval_every=4096", "--eval_episodes=2"),
}
TIMINGS = TIMING_FIELDS


def _rows(logdir: str) -> list[dict]:
    rows = []
    with open(os.path.join(logdir, "metrics.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            rows.append(
                {k: v for k, v in row.items() if k not in TIMINGS and not k.startswith("time_")}
            )
    return rows


def machine_line() -> str:
    """``benchmarks/machine.py``'s line, loaded by path: putting ``benchmarks/`` on
    ``sys.path`` would let ``benchmarks/minatar.py`` shadow the ``minatar`` package."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("machine", os.path.join(HERE, "machine.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.machine_line()


def _policy_behaviour(policy_dir: str, env_id: str) -> dict:
    """Greedy episodes and greedy actions on fixed observations of the exported policy."""
    import numpy as np

    import tfagents_vtrace as tv
    from tfagents_vtrace.envs import make_env
    from tfagents_vtrace.export.playing import run_episodes

    policy = tv.load_policy(policy_dir)
    returns, lengths = run_episodes(policy, env_id, 8, seed=1234, greedy=True)
    env = make_env(env_id, seed=0)
    space = env.observation_space
    space.seed(0)
    obs = np.stack([space.sample() for _ in range(64)])
    env.close()
    actions, _ = policy.step(obs, greedy=True)
    return {
        "greedy_returns": [round(r, 6) for r in returns],
        "greedy_lengths": lengths,
        "greedy_actions": np.asarray(actions).round(6).tolist(),
    }


def run_config(name: str, workdir: str) -> dict:
    logdir = os.path.join(workdir, name)
    cmd = [
        sys.executable, "-m", "experiments.train", f"--config={name}", f"--logdir={logdir}",
        "--deterministic", "--seed=0", "--overwrite", *SHORT[name],
    ]  # fmt: skip
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{name}: exit {done.returncode}\n{done.stderr[-3000:]}")
    rows = _rows(logdir)
    digest = hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()
    with open(os.path.join(logdir, "config.json")) as f:
        env_id = json.load(f)["env_id"]
    return {
        "metrics_sha256": digest,
        "rows": rows,
        "policy": _policy_behaviour(os.path.join(logdir, "policy"), env_id),
    }


def first_difference(before: dict, after: dict) -> str | None:
    """One line naming the first difference of two configs' records, or None."""
    rows_a, rows_b = before["rows"], after["rows"]
    if len(rows_a) != len(rows_b):
        return f"{len(rows_a)} rows before, {len(rows_b)} after"
    for i, (a, b) in enumerate(zip(rows_a, rows_b, strict=True)):
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                return f"row {i} (step {a.get('step')}): {key} {a.get(key)!r} -> {b.get(key)!r}"
    for key in before["policy"]:
        if before["policy"][key] != after["policy"].get(key):
            return f"exported policy: {key} differs"
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", help="write the records to this JSON file")
    parser.add_argument("--compare", help="compare with the records of this JSON file")
    parser.add_argument("--configs", default=",".join(SHORT))
    parser.add_argument("--workdir", help="run directories here (default: a temporary one)")
    parser.add_argument("--merge", action="store_true", help="add to --write's file, not replace")
    args = parser.parse_args(argv)
    print(machine_line(), flush=True)
    names = [n for n in args.configs.split(",") if n]
    unknown = [n for n in names if n not in SHORT]
    if unknown:
        parser.error(f"--configs: unknown {unknown}; known: {sorted(SHORT)}")
    before = None
    if args.compare:
        with open(args.compare) as f:
            before = json.load(f)
    workdir = args.workdir or tempfile.mkdtemp(prefix="same_behaviour_")
    records, differ = {}, 0
    for name in names:
        records[name] = record = run_config(name, workdir)
        line = f"{name}: metrics {record['metrics_sha256'][:12]}, {len(record['rows'])} rows"
        if before is not None:
            if name not in before:
                line += ": not in the earlier records"
            else:
                diff = first_difference(before[name], record)
                differ += diff is not None
                line += ": same" if diff is None else f": DIFFERS: {diff}"
        print(line, flush=True)
    if args.write:
        if args.merge and os.path.exists(args.write):
            with open(args.write) as f:
                records = {**json.load(f), **records}
        with open(args.write, "w") as f:
            json.dump(records, f)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
