"""Time-to-solve CartPole-v1: our agents against Stable-Baselines3 A2C, interleaved.

    python benchmarks/cartpole_solve.py [--agents=impala,a2c] [--seeds=0,1,2]
        [--max_steps=1000000] [--throughput_steps=100000] [--no-sb3] [--plot=curves.png]
        [--extra_flags="--num_envs=32"] [--variant="impala+env32=--num_envs=32" ...]
        [--workdir=DIR | --keep]

Time-to-solve is the wall time from process start (imports included) to the first greedy
evaluation (20 episodes, every 5,000 environment steps) whose mean return reaches 475, the
criterion of docs/results/cartpole.md. Every run is its own subprocess and the systems take
turns seed by seed (ours, then SB3, then the next seed), so load on the shared machine hits
both alike. Our agents run ``python -m experiments.train --agent=NAME
--flagfile=experiments/configs/NAME_cartpole.cfg`` and are read from their metrics.jsonl;
the reference runs SB3's ``A2C("MlpPolicy")`` with its defaults on 8 environments
(``make_vec_env``; torch limited to ``--torch_threads=1`` by default, its fastest setting for
this tiny MLP on a shared machine) and a callback that evaluates greedily on separate
environments, counting environment steps the same way (all sub-environments' steps).
Mnih et al., "Asynchronous Methods for Deep Reinforcement Learning", 2016,
https://arxiv.org/abs/1602.01783 (A2C/A3C); Espeholt et al., "IMPALA", 2018, https://arxiv.org/abs/1802.01561.

``--extra_flags`` are appended to every run of ours; each ``--variant=AGENT+LABEL=FLAGS`` adds
a system ``AGENT+LABEL`` of ours (the agent's flagfile, then FLAGS), which takes its turn
with the others on every seed, so settings are compared within one invocation.

Prints the machine first (``benchmarks/machine.py``: CPU model, cores, ISA flags), then
every run, the median time-to-solve per system, the ratio to SB3 A2C, the runs' steps/s to
solve, and (unless ``--throughput_steps=0``) a no-evaluation training throughput for each
side, as a fraction of the env-only ceiling measured just before the throughput runs
(``benchmarks/ceiling.py``, ``--ceiling_steps`` agent steps and at least a second in a fresh
process: the project's vector env of as many CartPole-v1 environments as the system steps,
ours its flagfile's ``--num_envs`` x ``--num_actors`` after the extra and variant flags, SB3
its 8, stepped with random actions, no network; an ``env_only`` row each). The last line is
JSON.

The SB3 side needs the ``bench`` extra (torch, stable-baselines3): without it the script stops
at once with one line on stderr and exit code 2 unless ``--no-sb3`` is given. Run directories
go to ``--workdir`` when given, else to a temporary directory removed at the end (``--keep``
keeps it).
"""

import time

START_TIME = time.time()  # the SB3 worker's clock starts before its heavy imports

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shlex  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

_BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _BENCH)
import ceiling  # noqa: E402
from machine import machine_info, machine_line  # noqa: E402

sys.path.remove(_BENCH)  # benchmarks/minatar.py would shadow the minatar package

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SB3 = "sb3_a2c"
SB3_ENVS = 8  # make_vec_env's environments of the SB3 worker
SOLVE_RETURN = 475.0
SB3_PEERS = ("torch", "stable_baselines3")  # the `bench` extra


def missing_sb3_peers() -> list[str]:
    """The modules of the ``bench`` extra that cannot be imported here (found, not imported)."""
    return [name for name in SB3_PEERS if importlib.util.find_spec(name) is None]


# ----------------------------------------------------------------------------- SB3 worker
def sb3_worker(args: argparse.Namespace) -> None:
    """Trains SB3 A2C in this process; writes LOGDIR/metrics.jsonl and prints a JSON line."""
    import numpy as np
    import torch
    from stable_baselines3 import A2C
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    os.makedirs(args.logdir, exist_ok=True)
    metrics = open(os.path.join(args.logdir, "metrics.jsonl"), "w")
    eval_env = make_vec_env("CartPole-v1", n_envs=8, seed=args.seed + 10_000)

    class GreedyEval(BaseCallback):
        def __init__(self):
            super().__init__()
            self.next_eval = args.eval_every
            self.solved = None
            self.last_log = 0

        def _row(self, **row):
            row.update(step=int(self.num_timesteps), wall_time=time.time() - START_TIME)
            metrics.write(json.dumps(row) + "\n")
            metrics.flush()

        def _on_step(self) -> bool:
            if self.num_timesteps - self.last_log >= 1000 and len(self.model.ep_info_buffer):
                self.last_log = self.num_timesteps
                rets = [e["r"] for e in self.model.ep_info_buffer]
                self._row(episode_return=float(np.mean(rets)))
            if not args.eval_every or self.num_timesteps < self.next_eval:
                return True
            self.next_eval += args.eval_every
            mean, _ = evaluate_policy(
                self.model, eval_env, n_eval_episodes=args.eval_episodes, deterministic=True
            )
            self._row(eval_return=float(mean))
            if mean >= args.stop_return and self.solved is None:
                self.solved = (int(self.num_timesteps), time.time() - START_TIME)
                return False
            return True

    env = make_vec_env("CartPole-v1", n_envs=SB3_ENVS, seed=args.seed)
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    model = A2C("MlpPolicy", env, seed=args.seed, device="cpu", verbose=0)
    callback = GreedyEval()
    learn_start = time.time()
    model.learn(total_timesteps=args.max_steps, callback=callback)
    learn_time = time.time() - learn_start
    metrics.close()
    solved = callback.solved
    print(
        json.dumps(
            {
                "final": True,
                "solved": solved is not None,
                "solve_step": solved[0] if solved else None,
                "time_to_solve": solved[1] if solved else None,
                "step": int(model.num_timesteps),
                "wall_time": time.time() - START_TIME,
                "train_sps": model.num_timesteps / learn_time,
                "torch_threads": torch.get_num_threads(),
            }
        ),
        flush=True,
    )


# ----------------------------------------------------------------------------- driver
def _last_json(stdout: str) -> dict:
    from tfagents_vtrace.runtime.rundir.config_io import last_json_line

    return last_json_line(stdout)


def _read_metrics(logdir: str) -> list[dict]:
    from tfagents_vtrace.runtime.rundir.metrics_log import read_metrics

    return read_metrics(logdir)


def _solve_from_metrics(rows: list[dict], stop_return: float) -> tuple[int, float] | None:
    """(step, wall_time) of the first eval row reaching ``stop_return``."""
    for row in rows:
        value = row.get("eval_return")
        if value is not None and value >= stop_return:
            return int(row["step"]), float(row["wall_time"])
    return None


def run_ours(system: str, seed: int, logdir: str, args: argparse.Namespace, evals: bool) -> dict:
    """One ``experiments.train`` run of ``system`` (an agent, or a ``--variant``'s name) in a
    subprocess; returns the run's record."""
    agent = system.split("+")[0]
    cmd = [sys.executable, "-m", "experiments.train", f"--agent={agent}"]
    cmd += [f"--flagfile=experiments/configs/{agent}_cartpole.cfg", f"--logdir={logdir}"]
    cmd += [f"--seed={seed}", f"--total_steps={args.max_steps if evals else args.throughput_steps}"]
    if evals:
        cmd += [f"--eval_every={args.eval_every}", f"--eval_episodes={args.eval_episodes}"]
        cmd += [f"--stop_return={args.stop_return}"]
    else:  # throughput: no periodic evaluation, a tiny one at the end
        cmd += ["--eval_every=0", "--eval_episodes=1", "--export=false"]
    cmd += shlex.split(args.extra_flags) + shlex.split(args.variants.get(system, ""))
    return _run(cmd, logdir, args)


def run_sb3(seed: int, logdir: str, args: argparse.Namespace, evals: bool) -> dict:
    """One SB3 A2C run in a subprocess (this script in worker mode)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--sb3_worker", f"--seed={seed}"]
    cmd += [f"--logdir={logdir}", f"--eval_episodes={args.eval_episodes}"]
    cmd += [f"--stop_return={args.stop_return}", f"--torch_threads={args.torch_threads}"]
    if evals:
        cmd += [f"--max_steps={args.max_steps}", f"--eval_every={args.eval_every}"]
    else:
        cmd += [f"--max_steps={args.throughput_steps}", "--eval_every=0"]
    return _run(cmd, logdir, args)


def _run(cmd: list[str], logdir: str, args: argparse.Namespace) -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    t0 = time.time()
    try:
        out = subprocess.run(
            cmd, cwd=REPO, capture_output=True, text=True, timeout=args.timeout, env=env
        )
        rc, stdout, stderr = out.returncode, out.stdout, out.stderr
    except subprocess.TimeoutExpired as e:
        rc, stdout, stderr = "timeout", e.stdout or "", e.stderr or ""
        stdout = stdout.decode() if isinstance(stdout, bytes) else stdout
        stderr = stderr.decode() if isinstance(stderr, bytes) else stderr
    final = _last_json(stdout)
    rows = _read_metrics(logdir)
    solved = _solve_from_metrics(rows, args.stop_return)
    sps = [r["sps"] for r in rows if r.get("sps")]
    record = {
        "rc": rc,
        "solved": solved is not None,
        "solve_step": solved[0] if solved else None,
        "time_to_solve": solved[1] if solved else None,
        "steps": final.get("step", rows[-1]["step"] if rows else None),
        "wall": time.time() - t0,
        # Ours: median of the logged steady-state sps; SB3: steps / learn() time.
        "train_sps": statistics.median(sps) if sps else final.get("train_sps"),
        "logdir": logdir,
    }
    if rc != 0 and not record["solved"]:
        record["error"] = stderr.strip().splitlines()[-3:] if stderr.strip() else []
    return record


def _fmt(x, spec=".1f", none="-"):
    return none if x is None else format(x, spec)


def _median_time(records: list[dict]) -> float | None:
    """Median time-to-solve, unsolved runs counting as infinitely slow (None if > half)."""
    times = sorted(r["time_to_solve"] if r["solved"] else float("inf") for r in records)
    m = statistics.median(times)
    return None if m == float("inf") else m


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--agents", default="impala", help="our agents (experiments.train names)")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--max_steps", type=int, default=1_000_000)
    p.add_argument("--eval_every", type=int, default=5000)
    p.add_argument("--eval_episodes", type=int, default=20)
    p.add_argument("--stop_return", type=float, default=SOLVE_RETURN)
    p.add_argument("--throughput_steps", type=int, default=100_000)
    p.add_argument(
        "--ceiling_steps",
        type=int,
        default=100_000,
        help="agent steps of each env-only ceiling beside the throughput runs (0: none)",
    )
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    p.add_argument("--sb3", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument(
        "--torch_threads",
        type=int,
        default=1,
        help="SB3's torch threads (0: torch's default, one per core; it spins and collapses "
        "to ~100 steps/s when the machine is oversubscribed, 1 thread runs ~15x faster then)",
    )
    p.add_argument("--extra_flags", default="", help="appended to every run of ours")
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        help="AGENT+LABEL=FLAGS: one more system of ours, the agent's flagfile then FLAGS",
    )
    p.add_argument("--workdir", default=None, help="keep run dirs here (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (without --workdir)")
    p.add_argument("--plot", default=None, help="PNG of every run's curves (experiments.plot)")
    p.add_argument("--sb3_worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--logdir", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.sb3_worker:
        return sb3_worker(args)
    args.variants = {}
    for spec in args.variant:
        name, sep, flags = spec.partition("=")
        if not sep or "+" not in name or not name.split("+")[0]:
            print(f"error: --variant: expected AGENT+LABEL=FLAGS, got {spec!r}", file=sys.stderr)
            sys.exit(2)
        args.variants[name] = flags
    missing = missing_sb3_peers() if args.sb3 else []
    if missing:
        print(
            "error: stable-baselines3 (and torch) not installed (no module "
            f"{', '.join(missing)}): install '.[bench]' or pass --no-sb3",
            file=sys.stderr,
        )
        sys.exit(2)
    workdir = args.workdir or tempfile.mkdtemp(prefix="cartpole_solve_")
    try:
        run_all(args, workdir)
    finally:
        if args.workdir is None and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def ceiling_spec(system: str, args: argparse.Namespace) -> dict:
    """The environments ``system`` steps (:func:`ceiling.run_envs`'s dict): ours, its agent's
    flagfile with ``--extra_flags`` and the variant's flags; SB3, its 8 environments."""
    if system == SB3:
        return {"env_id": "CartPole-v1", "num_envs": SB3_ENVS, "mode": "auto", "env_kwargs": {}}
    path = os.path.join(REPO, "experiments", "configs", f"{system.split('+')[0]}_cartpole.cfg")
    extra = shlex.split(args.extra_flags) + shlex.split(args.variants.get(system, ""))
    return ceiling.run_envs(path, extra)


def run_all(args: argparse.Namespace, workdir: str) -> None:
    """The interleaved time-to-solve runs, the throughput runs and the tables, in ``workdir``."""
    agents = [a for a in args.agents.split(",") if a] + list(args.variants)
    systems = agents + ([SB3] if args.sb3 else [])
    seeds = [int(s) for s in args.seeds.split(",")]
    records: dict[str, list[dict]] = {s: [] for s in systems}
    header = f"greedy {args.eval_episodes}-episode eval every {args.eval_every} steps"
    print(machine_line(), flush=True)
    print(f"CartPole-v1 time-to-solve ({header} >= {args.stop_return}), runs in {workdir}")
    print("| system | seed | solved | time-to-solve (s) | steps to solve | steps/s to solve |")
    print("|---|---|---|---|---|---|", flush=True)
    for seed in seeds:  # interleaved: every system once per seed
        for system in systems:
            logdir = os.path.join(workdir, f"{system}_seed{seed}")
            if system == SB3:
                rec = run_sb3(seed, logdir, args, evals=True)
            else:
                rec = run_ours(system, seed, logdir, args, evals=True)
            records[system].append(rec)
            rate = rec["solve_step"] / rec["time_to_solve"] if rec["solved"] else None
            cells = [system, seed, rec["solved"], _fmt(rec["time_to_solve"])]
            cells += [_fmt(rec["solve_step"], "d"), _fmt(rate, ".0f")]
            print("| " + " | ".join(map(str, cells)) + " |", flush=True)
            if rec.get("error"):
                print(f"    {system} seed {seed} rc={rec['rc']}: {rec['error']}", flush=True)
    throughput, of_ceiling = {}, {}
    ceilings = ceiling.Ceilings(args.ceiling_steps if args.throughput_steps else 0)
    if args.throughput_steps:
        specs = {system: ceiling_spec(system, args) for system in systems}
        for spec in specs.values():  # the env-only ceilings, beside the throughput runs
            if ceiling.label(spec) in ceilings.specs:
                continue
            if ceilings.measure(spec) is None and ceilings.last_error(spec):
                print(f"    env-only ceiling {ceiling.label(spec)}: {ceilings.last_error(spec)}")
        for system in systems:  # no-eval training throughput, one run each
            logdir = os.path.join(workdir, f"{system}_throughput")
            runner = run_sb3 if system == SB3 else (lambda *a, s=system: run_ours(s, *a))
            throughput[system] = runner(seeds[0], logdir, args, False)["train_sps"]
            top = ceilings.median(specs[system])
            of_ceiling[system] = ceiling.fraction(throughput[system], top)
    medians = {s: _median_time(records[s]) for s in systems}
    ref = medians.get(SB3)
    print("\n| system | median time-to-solve (s) | SB3 median / this median | solved "
          "| train steps/s (no eval) | of env-only ceiling |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    env_only = ceilings.summary()
    for key, c in env_only.items():
        name = "env_only " + key
        print(f"| {name} | - | - | - | {_fmt(c['median'], '.0f')} | - |")
    for s in systems:
        ratio = f"{ref / medians[s]:.2f}x" if ref and medians[s] else "-"
        solved = sum(r["solved"] for r in records[s])
        cells = [s, _fmt(medians[s]), ratio, f"{solved}/{len(seeds)}"]
        cells.append(_fmt(throughput.get(s), ".0f"))
        cells.append(ceiling.format_fraction(of_ceiling.get(s)))
        print("| " + " | ".join(cells) + " |")
    if args.plot:
        from tfagents_vtrace.commands.plot import plot_runs

        dirs = [r["logdir"] for s in systems for r in records[s] if _read_metrics(r["logdir"])]
        if dirs:
            plot_runs(dirs, args.plot, title="CartPole-v1: ours vs SB3 A2C")
            print(f"wrote {args.plot}")
    print(json.dumps({"medians": medians, "throughput": throughput, "runs": records,
                      "throughput_of_ceiling": of_ceiling, "env_only_ceiling": env_only,
                      "ceiling_steps": ceilings.steps, "machine": machine_info()}))  # fmt: skip


if __name__ == "__main__":
    sys.path.insert(0, REPO)
    main()
