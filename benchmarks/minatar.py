"""MinAtar: our IMPALA against Stable-Baselines3 PPO at the same environment-step budget.

    python benchmarks/minatar.py [--games=breakout,asterix,freeway,seaquest,space_invaders]
        [--seeds=0,1,2] [--sb3_seeds=0] [--systems=ours,sb3_ppo] [--total_steps=2000000]
        [--eval_every=100000] [--extra_flags="--num_actors=1"] [--plot=minatar.png]
        [--ceiling_steps=100000] [--workdir=DIR | --keep]

The five MinAtar games (Young & Tian, "MinAtar: An Atari-Inspired Testbed for Thorough and
Reproducible Reinforcement Learning Experiments", 2019, https://arxiv.org/abs/1903.03176),
``MinAtar/<Game>-v1`` (minimal action sets, sticky actions 0.1, no time limit), each trained
for ``--total_steps`` environment steps (all sub-environments' steps counted, both sides).
Every run is its own subprocess and the systems take turns seed by seed (ours, then SB3, then
the next seed), so load on the shared machine hits both alike.

Ours runs ``python -m experiments.train --flagfile=experiments/configs/impala_minatar_<game>.cfg
--seed=S --total_steps=N --eval_every=E --eval_episodes=10`` (plus ``--extra_flags``) and is
read from the JSON line it prints last and from its ``metrics.jsonl``. The reference is SB3's
``PPO("MlpPolicy")`` (Schulman et al., "Proximal Policy Optimization Algorithms", 2017,
https://arxiv.org/abs/1707.06347) with its defaults (n_steps 2048, batch 64, 10 epochs, 64x64
tanh MLP) on 8 environments (``make_vec_env``) whose ``[10, 10, C]`` float32 grid
(``tfagents_vtrace.envs.make_env(..., obs_dtype="float32")``) is flattened, on CPU with
``--torch_threads`` threads (default 1, as in cartpole_solve.py: on this 2-core machine,
shared with other jobs, 50k steps of PPO on Breakout learned at 970-2250 steps/s with one
thread and 70 with two, and torch's default of one thread per core was as slow: its threads
spin and collapse once the cores are oversubscribed). Its callback evaluates greedily on
separate environments every ``--eval_every`` steps, ``--eval_episodes`` (10) episodes, the
same schedule ours runs.

Reported per run, after training and outside its wall time: the greedy (mode) and the sampled
(stochastic policy) mean return over ``--final_episodes`` (100) episodes on fresh environments,
each with its standard error in the JSON (``greedy_se``, ``sampled_se``: std / sqrt(n), the
noise of a run's score, to tell from the spread between seeds; docs/results/minatar.md)
(ours: the exported ``DIR/policy`` loaded with ``tf.saved_model.load`` in a subprocess and run
by ``experiments.evaluate.run_episodes``, greedy then sampled, as ``python -m
experiments.evaluate --greedy`` / ``--nogreedy`` do, with one load for both; SB3:
``evaluate_policy``, deterministic and not); the wall time from the training subprocess's
start to the end of training, imports and the periodic evaluations included (ours: train's
final ``wall_time``, which also covers its policy export); and steps/s = steps / wall time.

The first line names the machine (``benchmarks/machine.py``: CPU model, cores, ISA flags).
Before each seed's runs of a game, the env-only ceiling of the environments each system
steps is measured (``benchmarks/ceiling.py`` in a fresh process: the project's vector env,
``make_vector_env`` as the actors build it, stepped ``--ceiling_steps`` agent steps and at
least a second with random actions, no network; per game, as MinAtar games step at different
rates): ours, the flagfile's ``--num_envs`` x ``--num_actors`` (after ``--extra_flags``),
SB3, its 8 environments (the same vector env; SB3's own ``DummyVecEnv`` is not timed). Each
is a row ``env_only xN`` of the per-run table, and every run's steps/s is also given as a
fraction of the ceiling measured in its round (``of env-only ceiling``; the medians table:
the median steps/s over the median ceiling), in the JSON too (per run ``env_only_sps`` and
``of_ceiling``, per cell ``ceiling_sps`` and ``of_ceiling``, all measurements under
``env_only_ceiling``). ``--ceiling_steps=0`` measures none.
Prints one row per run, then one table with, per game and system, the medians over seeds,
the SB3 median wall time over this system's, and the interquartile mean (IQM) of the greedy
and of the sampled returns over seeds with its 95% percentile bootstrap confidence interval
(``benchmarks/seed_stats.py``: ``scipy.stats.trim_mean(x, 0.25)``, 2000 resamples of the
runs, seed 0; with fewer than 5 runs a line under the table says the interval is wide).
With ``--plot=PATH`` it writes a PNG of the learning curves (greedy evaluation return, and
faintly the training episode return, against environment steps; one panel per game) and,
per game, ``PATH`` with ``_<game>_seeds.png`` for its extension: each system's median over
seeds with an interquartile band, drawn by ``tfv-plot``'s
:func:`tfagents_vtrace.commands.plot.plot_runs` from the runs' ``metrics.jsonl`` (the
numbers behind it in a CSV beside it). The last line is JSON: the runs, the table
(``medians``) and ``seed_stats``: per system, :func:`seed_stats.summarize` of the greedy
and of the sampled returns by game (median, IQM, their CIs; no aggregate over games, whose
raw returns do not share a scale).

SB3 runs only ``--sb3_seeds`` (default: the first seed), because a 2M-step SB3 PPO run takes
about 9 minutes here; medians are over the seeds each system ran. The SB3 side needs the
``bench`` extra (torch, stable-baselines3), both need the ``minatar`` extra: a missing
package, an unknown game or a missing flagfile stops the script at once with one line on
stderr and exit code 2 (the SB3 check is skipped with ``--systems=ours``). Run directories go
to ``--workdir`` when given, else to a temporary directory removed at the end (``--keep``
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

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if __name__ == "__main__":
    # Run as a script, benchmarks/ leads sys.path, and this file (minatar.py) would shadow the
    # `minatar` package: drop that entry before anything imports it.
    _HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]


def _load(name: str):
    """``benchmarks/<name>.py``, loaded by path: benchmarks/ is not on sys.path."""
    path = os.path.join(REPO, "benchmarks", f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"minatar_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


seed_stats, ceiling, machine = _load("seed_stats"), _load("ceiling"), _load("machine")
CONFIDENCE, BOOTSTRAP_REPS, BOOTSTRAP_SEED = 0.95, 2000, 0
RETURNS = {"greedy": "greedy_return", "sampled": "sampled_return"}
OURS, SB3 = "ours", "sb3_ppo"
SYSTEMS = (OURS, SB3)
GAMES = {  # --games name -> gymnasium id; the flagfile is impala_minatar_<name>.cfg
    "breakout": "MinAtar/Breakout-v1",
    "asterix": "MinAtar/Asterix-v1",
    "freeway": "MinAtar/Freeway-v1",
    "seaquest": "MinAtar/Seaquest-v1",
    "space_invaders": "MinAtar/SpaceInvaders-v1",
}
SB3_PEERS = ("torch", "stable_baselines3")  # the `bench` extra
SB3_ENVS = 8  # make_vec_env's environments of the SB3 worker


class UsageError(Exception):
    """A bad argument or a missing prerequisite: one line on stderr, exit code 2."""


def missing_modules(names) -> list[str]:
    """The modules among ``names`` that cannot be imported here (found, not imported)."""
    return [name for name in names if importlib.util.find_spec(name) is None]


def flagfile(game: str) -> str:
    """The flagfile of ``game``, relative to the repository root."""
    return os.path.join("experiments", "configs", f"impala_minatar_{game}.cfg")


# ----------------------------------------------------------------------------- SB3 worker
def sb3_worker(args: argparse.Namespace) -> None:
    """Trains SB3 PPO in this process; writes LOGDIR/metrics.jsonl and prints a JSON line."""
    import gymnasium as gym
    import numpy as np
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    from tfagents_vtrace.envs import make_env

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    env_id = GAMES[args.game]

    def one_env():
        return gym.wrappers.FlattenObservation(make_env(env_id, obs_dtype="float32"))

    os.makedirs(args.logdir, exist_ok=True)
    metrics = open(os.path.join(args.logdir, "metrics.jsonl"), "w")  # noqa: SIM115
    eval_env = make_vec_env(one_env, n_envs=8, seed=args.seed + 10_000)

    def evaluate(model, episodes: int, deterministic: bool, se: bool = False):
        mean, std = evaluate_policy(
            model, eval_env, n_eval_episodes=episodes, deterministic=deterministic
        )
        return (float(mean), float(std) / episodes**0.5) if se else float(mean)

    class GreedyEval(BaseCallback):
        def __init__(self):
            super().__init__()
            self.next_eval = args.eval_every
            self.last_log = 0

        def _row(self, **row):
            row.update(step=int(self.num_timesteps), wall_time=time.time() - START_TIME)
            metrics.write(json.dumps(row) + "\n")
            metrics.flush()

        def _on_step(self) -> bool:
            buffer = self.model.ep_info_buffer
            if self.num_timesteps - self.last_log >= args.log_every and buffer:
                self.last_log = self.num_timesteps
                self._row(episode_return=float(np.mean([e["r"] for e in buffer])))
            if args.eval_every and self.num_timesteps >= self.next_eval:
                self.next_eval += args.eval_every
                self._row(eval_return=evaluate(self.model, args.eval_episodes, True))
            return True

    env = make_vec_env(one_env, n_envs=SB3_ENVS, seed=args.seed)
    model = PPO("MlpPolicy", env, seed=args.seed, device="cpu", verbose=0)
    learn_start = time.time()
    model.learn(total_timesteps=args.total_steps, callback=GreedyEval())
    wall = time.time() - START_TIME
    learn_time = time.time() - learn_start
    metrics.close()
    greedy, greedy_se = evaluate(model, args.final_episodes, True, se=True)  # outside the wall
    sampled, sampled_se = evaluate(model, args.final_episodes, False, se=True)  # time, as ours
    row = {"final": True, "step": int(model.num_timesteps), "wall_time": wall}
    row.update(greedy_return=greedy, sampled_return=sampled, greedy_se=greedy_se)
    row.update(sampled_se=sampled_se, learn_sps=model.num_timesteps / learn_time)
    row.update(torch_threads=torch.get_num_threads())
    print(json.dumps(row), flush=True)


# ----------------------------------------------------------------------------- our evaluation
def eval_worker(args: argparse.Namespace) -> None:
    """Greedy then sampled ``--final_episodes`` episodes of the SavedModel at ``--policy``,
    driven by ``tfv-evaluate``'s functions (one process, one load for both); prints a JSON line."""
    import tensorflow as tf

    from tfagents_vtrace.commands.evaluate import (
        check_policy_env,
        env_spaces,
        policy_io,
        run_episodes,
    )

    env_id = GAMES[args.game]
    tf.random.set_seed(args.seed)
    policy = tf.saved_model.load(args.policy)
    check_policy_env(policy_io(policy), env_id, *env_spaces(env_id, {}), args.policy)
    row = {}
    for kind, greedy in (("greedy", True), ("sampled", False)):
        returns, _ = run_episodes(
            policy, env_id, args.final_episodes, seed=args.seed, greedy=greedy
        )
        row[f"{kind}_return"], row[f"{kind}_se"] = mean_and_se(returns)
    print(json.dumps(row), flush=True)


def mean_and_se(returns) -> tuple[float, float]:
    """The mean of episode ``returns`` and its standard error, std / sqrt(n) (the population
    std, as SB3's ``evaluate_policy`` gives it)."""
    n = len(returns)
    mean = sum(returns) / n
    std = (sum((r - mean) ** 2 for r in returns) / n) ** 0.5
    return float(mean), float(std / n**0.5)


# ----------------------------------------------------------------------------- driver
def _last_json(stdout: str) -> dict:
    from tfagents_vtrace.runtime.rundir.config_io import last_json_line

    return last_json_line(stdout)


def _read_metrics(logdir: str) -> list[dict]:
    from tfagents_vtrace.runtime.rundir.metrics_log import read_metrics

    return read_metrics(logdir)


def _subprocess(cmd: list[str], timeout: float) -> tuple[object, str, str]:
    """(returncode or "timeout", stdout, stderr) of ``cmd`` run in the repository root."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    try:
        out = subprocess.run(
            cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env
        )
        return out.returncode, out.stdout, out.stderr
    except subprocess.TimeoutExpired as e:

        def text(x):
            return (x.decode() if isinstance(x, bytes) else x) or ""

        return "timeout", text(e.stdout), text(e.stderr)


def _error_tail(stderr: str) -> list[str]:
    return stderr.strip().splitlines()[-3:] if stderr.strip() else []


def _evaluate_ours(policy: str, game: str, seed: int, args) -> tuple[dict, list[str]]:
    """Greedy and sampled returns of the exported policy (this script in evaluation-worker
    mode): ({"greedy_return", "sampled_return"}, error lines)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--eval_worker", f"--policy={policy}"]
    cmd += [f"--game={game}", f"--seed={seed + 20_000}", f"--final_episodes={args.final_episodes}"]
    rc, stdout, stderr = _subprocess(cmd, args.timeout)
    if rc != 0:
        return {}, [f"evaluation rc={rc}", *_error_tail(stderr)]
    return _last_json(stdout), []


def run_ours(game: str, seed: int, logdir: str, args: argparse.Namespace) -> dict:
    """One ``experiments.train`` run, then its greedy and sampled evaluations."""
    cmd = [sys.executable, "-m", "experiments.train", f"--flagfile={flagfile(game)}"]
    cmd += [f"--logdir={logdir}", f"--seed={seed}", f"--total_steps={args.total_steps}"]
    cmd += [f"--eval_every={args.eval_every}", f"--eval_episodes={args.eval_episodes}"]
    cmd += ["--overwrite", *shlex.split(args.extra_flags)]
    rc, stdout, stderr = _subprocess(cmd, args.timeout)
    final = _last_json(stdout)
    record = _record(OURS, game, seed, logdir, rc, final)
    record["train_eval_return"] = final.get("eval_return")  # the last in-training evaluation
    if rc != 0:
        record["error"] = _error_tail(stderr)
        return record
    returns, errors = _evaluate_ours(os.path.join(logdir, "policy"), game, seed, args)
    record.update(returns)
    if errors:
        record["error"] = errors
    return record


def run_sb3(game: str, seed: int, logdir: str, args: argparse.Namespace) -> dict:
    """One SB3 PPO run in a subprocess (this script in worker mode)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--sb3_worker", f"--game={game}"]
    cmd += [f"--seed={seed}", f"--logdir={logdir}", f"--total_steps={args.total_steps}"]
    cmd += [f"--eval_every={args.eval_every}", f"--eval_episodes={args.eval_episodes}"]
    cmd += [f"--final_episodes={args.final_episodes}", f"--torch_threads={args.torch_threads}"]
    rc, stdout, stderr = _subprocess(cmd, args.timeout)
    final = _last_json(stdout)
    record = _record(SB3, game, seed, logdir, rc, final)
    for key in ("greedy_return", "sampled_return", "greedy_se", "sampled_se"):
        record[key] = final.get(key)
    if rc != 0:
        record["error"] = _error_tail(stderr)
    return record


def _record(system: str, game: str, seed: int, logdir: str, rc, final: dict) -> dict:
    steps, wall = final.get("step"), final.get("wall_time")
    return {
        "game": game,
        "system": system,
        "seed": seed,
        "rc": rc,
        "greedy_return": None,
        "sampled_return": None,
        "greedy_se": None,
        "sampled_se": None,
        "steps": steps,
        "wall": wall,
        "sps": steps / wall if steps and wall else None,
        "logdir": logdir,
    }


# ----------------------------------------------------------------------------- tables, plot
def _median(records: list[dict], key: str) -> float | None:
    values = [r[key] for r in records if r.get(key) is not None]
    return statistics.median(values) if values else None


def median_table(
    records: list[dict], ceilings: dict[str, float | None] | None = None
) -> dict[str, dict[str, dict]]:
    """game -> system -> medians over that system's runs of the game.

    Each cell holds ``runs``, ``ok`` (runs that gave a greedy return) and the medians of
    ``greedy_return``, ``sampled_return``, ``wall`` and ``sps`` (None when no run gave one),
    plus ``sb3_wall_ratio``: SB3's median wall time over this system's (None without both),
    for ``greedy`` and ``sampled``: ``<kind>_iqm``, the interquartile mean of those
    returns over the runs, and ``<kind>_iqm_ci``, its 95% bootstrap interval ``[low, high]``
    (:mod:`seed_stats`; None when no run gave one), and ``ceiling_sps``: the median env-only
    ceiling of the runs' environments (``ceilings``, by the records' ``ceiling`` label; None
    without one) and ``of_ceiling``: the median ``sps`` as a fraction of it.
    """
    table: dict[str, dict[str, dict]] = {}
    for r in records:
        table.setdefault(r["game"], {}).setdefault(r["system"], {"records": []})["records"].append(
            r
        )
    for systems in table.values():
        for cell in systems.values():
            runs = cell.pop("records")
            cell["runs"] = len(runs)
            cell["ok"] = sum(r.get("greedy_return") is not None for r in runs)
            for key in ("greedy_return", "sampled_return", "wall", "sps"):
                cell[key] = _median(runs, key)
            for kind, key in RETURNS.items():
                values = [r[key] for r in runs if r.get(key) is not None]
                stats = _stats(values) if values else {}
                cell[f"{kind}_iqm"] = stats.get("iqm")
                cell[f"{kind}_iqm_ci"] = stats.get("iqm_ci")
            labels = {r.get("ceiling") for r in runs}
            label = labels.pop() if len(labels) == 1 else None
            cell["ceiling_sps"] = (ceilings or {}).get(label) if label else None
            cell["of_ceiling"] = ceiling.fraction(cell["sps"], cell["ceiling_sps"])
        ref = systems.get(SB3, {}).get("wall")
        for cell in systems.values():
            cell["sb3_wall_ratio"] = ref / cell["wall"] if ref and cell["wall"] else None
    return table


def _stats(values: list[float]) -> dict:
    """:func:`seed_stats.summarize` of one game's returns: runs, median, IQM, their CIs."""
    out = seed_stats.summarize(
        {"_": values}, CONFIDENCE, BOOTSTRAP_REPS, BOOTSTRAP_SEED, aggregate=False
    )
    return out["tasks"]["_"]


def stats_by_system(records: list[dict]) -> dict[str, dict[str, dict]]:
    """system -> ``greedy`` / ``sampled`` -> :func:`seed_stats.summarize` of that system's
    returns by game (games where no run gave one left out; no aggregate over games)."""
    out: dict[str, dict[str, dict]] = {}
    for system in dict.fromkeys(r["system"] for r in records):
        for kind, key in RETURNS.items():
            by_game: dict[str, list[float]] = {}
            for r in records:
                if r["system"] == system and r.get(key) is not None:
                    by_game.setdefault(r["game"], []).append(r[key])
            if by_game:
                out.setdefault(system, {})[kind] = seed_stats.summarize(
                    by_game, CONFIDENCE, BOOTSTRAP_REPS, BOOTSTRAP_SEED, aggregate=False
                )
    return out


def few_runs_note(table: dict[str, dict[str, dict]]) -> str | None:
    """The caveat on the intervals when a cell has fewer than ``seed_stats.FEW_RUNS`` runs
    with a return (None otherwise)."""
    counts = [c["ok"] for systems in table.values() for c in systems.values() if c["ok"]]
    if not counts or min(counts) >= seed_stats.FEW_RUNS:
        return None
    return "Note: " + seed_stats.few_runs_note(min(counts), CONFIDENCE)


def _fmt(x, spec=".1f", none="-") -> str:
    return none if x is None else format(x, spec)


def env_only_name(spec: dict) -> str:
    """The system column of an env-only ceiling row: "env_only x16" (the game names the env)."""
    return "env_only " + ceiling.label(spec).split(" ", 1)[1]


def format_table(
    table: dict[str, dict[str, dict]], env_only: dict[str, list[dict]] | None = None
) -> str:
    """The markdown table of :func:`median_table`; each game's env-only ceilings first
    (``env_only``: game -> ``{"name", "ok", "runs", "sps"}`` rows)."""
    lines = [
        "| game | system | runs | greedy return | sampled return | wall (s) | steps/s "
        "| of env-only ceiling | SB3 wall / this wall | greedy IQM [95% CI] "
        "| sampled IQM [95% CI] |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for game, systems in table.items():
        for row in (env_only or {}).get(game, []):
            cells = [game, row["name"], f"{row['ok']}/{row['runs']}", "-", "-", "-"]
            cells += [_fmt(row["sps"], ".0f"), "-", "-", "-", "-"]
            lines.append("| " + " | ".join(cells) + " |")
        for system, c in systems.items():
            ratio = _fmt(c["sb3_wall_ratio"], ".2f")
            cells = [game, system, f"{c['ok']}/{c['runs']}", _fmt(c["greedy_return"], ".2f")]
            cells += [_fmt(c["sampled_return"], ".2f"), _fmt(c["wall"]), _fmt(c["sps"], ".0f")]
            cells.append(ceiling.format_fraction(c.get("of_ceiling")))
            cells.append(ratio if ratio == "-" else ratio + "x")
            for kind in RETURNS:
                cells.append(seed_stats.format_ci(c[f"{kind}_iqm"], c[f"{kind}_iqm_ci"]))
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(records: list[dict], games: list[str], path: str, total_steps: int) -> str:
    """One panel per game: each run's greedy evaluations (markers and line) and, faintly,
    its training episode return, against environment steps; one colour per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import EngFormatter, MaxNLocator

    fig, axes = plt.subplots(
        1, len(games), figsize=(max(7.0, 4.2 * len(games)), 4.0), squeeze=False
    )
    colors = {OURS: "C0", SB3: "C1"}
    for ax, game in zip(axes[0], games):
        for r in records:
            if r["game"] != game:
                continue
            rows = _read_metrics(r["logdir"])
            color = colors.get(r["system"], "C2")
            train = [
                (x["step"], x["episode_return"])
                for x in rows
                if x.get("episode_return") is not None
            ]
            evals = [
                (x["step"], x["eval_return"]) for x in rows if x.get("eval_return") is not None
            ]
            if train:
                ax.plot(*zip(*train), color=color, lw=0.8, alpha=0.35)
            if evals:
                ax.plot(*zip(*evals), color=color, lw=1.5, marker="o", ms=3)
        ax.set_title(GAMES[game])
        ax.set_xlabel("environment steps")
        ax.set_xlim(0, total_steps)
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))  # 500k, 1M: no overlapping digits
        ax.xaxis.set_major_locator(MaxNLocator(4))
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("return")
    handles = [
        Line2D([], [], color=c, lw=1.5, marker="o", ms=3, label=f"{s} greedy eval")
        for s, c in colors.items()
        if any(r["system"] == s for r in records)
    ]
    handles.append(Line2D([], [], color="grey", lw=0.8, alpha=0.5, label="training episodes"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def seed_curves_path(path: str, game: str) -> str:
    """Where :func:`seed_curves` draws ``game``: ``path`` with ``_<game>_seeds.png``."""
    return os.path.splitext(path)[0] + f"_{game}_seeds.png"


def seed_curves(records: list[dict], games: list[str], path: str) -> list[str]:
    """Per game, each system's median over seeds with an interquartile band (return against
    environment steps and against wall time), by ``tfv-plot``'s ``plot_runs`` from the runs'
    ``metrics.jsonl`` (a CSV beside each PNG); returns the PNGs written (a game without a
    readable run is left out, with a line saying why)."""
    from tfagents_vtrace.commands.plot import plot_runs

    written = []
    for game in games:
        runs = [
            r
            for r in records
            if r["game"] == game and os.path.isfile(os.path.join(r["logdir"], "metrics.jsonl"))
        ]
        if not runs:
            print(f"no seed curves for {game}: no run wrote metrics.jsonl")
            continue
        output = seed_curves_path(path, game)
        try:
            plot_runs(
                [r["logdir"] for r in runs],
                output,
                f"{GAMES[game]}: median over seeds, band: interquartile range",
                labels=[r["system"] for r in runs],
            )
        except (OSError, ValueError) as e:
            print(f"no seed curves for {game}: {e}")
            continue
        written.append(output)
    return written


# ----------------------------------------------------------------------------- main
def _names(text: str, allowed, flag: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        raise UsageError(f"--{flag}: expected names among {list(allowed)}, received {text!r}")
    return names


def _seeds(text: str, flag: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        seeds = []
    if not seeds:
        raise UsageError(f"--{flag}: expected comma-separated integers, received {text!r}")
    return seeds


def check_args(args: argparse.Namespace) -> tuple[list[str], list[str], list[int], list[int]]:
    """(games, systems, seeds, sb3_seeds), or UsageError naming what is wrong or missing."""
    games = _names(args.games, GAMES, "games")
    systems = _names(args.systems, SYSTEMS, "systems")
    seeds = _seeds(args.seeds, "seeds")
    sb3_seeds = _seeds(args.sb3_seeds, "sb3_seeds") if args.sb3_seeds else seeds[:1]
    for flag in ("total_steps", "eval_episodes", "final_episodes"):
        if getattr(args, flag) < 1:
            raise UsageError(f"--{flag}: expected >= 1, received {getattr(args, flag)}")
    for flag in ("eval_every", "ceiling_steps"):
        if getattr(args, flag) < 0:
            raise UsageError(f"--{flag}: expected >= 0, received {getattr(args, flag)}")
    if missing_modules(["minatar"]):
        raise UsageError("MinAtar not installed (no module minatar): install '.[minatar]'")
    if SB3 in systems:
        missing = missing_modules(SB3_PEERS)
        if missing:
            raise UsageError(
                "stable-baselines3 (and torch) not installed (no module "
                f"{', '.join(missing)}): install '.[bench]' or pass --systems=ours"
            )
    if OURS in systems:
        for game in games:
            if not os.path.isfile(os.path.join(REPO, flagfile(game))):
                raise UsageError(f"--games={game}: no flagfile {flagfile(game)} for our agent")
    return games, systems, seeds, sb3_seeds


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--games", default=",".join(GAMES), help="comma-separated MinAtar games")
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--seeds", default="0,1,2", help="seeds of our runs")
    p.add_argument("--sb3_seeds", default=None, help="seeds of SB3's runs (default: first seed)")
    p.add_argument("--total_steps", type=int, default=2_000_000, help="env steps per run")
    p.add_argument("--eval_every", type=int, default=100_000, help="greedy eval period (0: none)")
    p.add_argument("--eval_episodes", type=int, default=10, help="episodes per periodic eval")
    p.add_argument("--final_episodes", type=int, default=100, help="greedy and sampled, at the end")
    p.add_argument("--extra_flags", default="", help="appended to our experiments.train command")
    p.add_argument("--torch_threads", type=int, default=1, help="SB3's torch threads (0: default)")
    p.add_argument(
        "--ceiling_steps",
        type=int,
        default=100_000,
        help="agent steps of each env-only ceiling measurement (0: none)",
    )
    p.add_argument("--timeout", type=float, default=4 * 3600.0, help="seconds per subprocess")
    p.add_argument("--workdir", default=None, help="keep run dirs here (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (without --workdir)")
    p.add_argument("--plot", default=None, help="PNG of the learning curves")
    p.add_argument("--sb3_worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--eval_worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--policy", default=None, help=argparse.SUPPRESS)
    p.add_argument("--game", default="breakout", help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--logdir", default=None, help=argparse.SUPPRESS)
    p.add_argument("--log_every", type=int, default=10_000, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.sb3_worker:
        return sb3_worker(args)
    if args.eval_worker:
        return eval_worker(args)
    try:
        games, systems, seeds, sb3_seeds = check_args(args)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    workdir = args.workdir or tempfile.mkdtemp(prefix="minatar_bench_")
    try:
        run_all(args, workdir, games, systems, seeds, sb3_seeds)
    finally:
        if args.workdir is None and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def ceiling_spec(game: str, system: str, args: argparse.Namespace) -> dict:
    """The environments ``system`` steps in a run of ``game`` (:func:`ceiling.run_envs`'s
    dict): ours, the game's flagfile with ``--extra_flags`` (``--num_envs`` x
    ``--num_actors``); SB3, ``SB3_ENVS`` of the game's id."""
    if system == SB3:
        return {"env_id": GAMES[game], "num_envs": SB3_ENVS, "mode": "auto", "env_kwargs": {}}
    return ceiling.run_envs(os.path.join(REPO, flagfile(game)), shlex.split(args.extra_flags))


def measure_ceilings(game: str, seed: int, specs: list[dict], ceilings) -> dict:
    """One round of the env-only ceilings of ``specs`` (each set of environments once), each
    printed as a row of the per-run table; ``{label: sps or None}``."""
    out: dict[str, float | None] = {}
    for spec in specs:
        key = ceiling.label(spec)
        if key in out:
            continue
        result = ceilings.measure(spec)
        out[key] = result["sps"] if result else None
        if ceilings.steps < 1:
            continue
        seconds = result["seconds"] if result else None
        cells = [game, env_only_name(spec), str(seed), "-", "-", _fmt(seconds)]
        cells += [_fmt(out[key], ".0f"), "-"]
        print("| " + " | ".join(cells) + " |", flush=True)
        if result is None:
            print(f"    {game} env-only ceiling {key}: {ceilings.last_error(spec)}")
    return out


def run_all(args, workdir: str, games, systems, seeds, sb3_seeds) -> None:
    """The interleaved runs, the table, the plot and the JSON line, in ``workdir``."""
    print(machine.machine_line(), flush=True)
    print(f"MinAtar, {args.total_steps} env steps per run, runs in {workdir}")
    print("| game | system | seed | greedy return | sampled return | wall (s) | steps/s "
          "| of env-only ceiling |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|", flush=True)
    ceilings = ceiling.Ceilings(args.ceiling_steps)
    records = []
    for game in games:
        specs = {system: ceiling_spec(game, system, args) for system in systems}
        for seed in sorted(set(seeds) | set(sb3_seeds), key=(seeds + sb3_seeds).index):
            # interleaved: ours then SB3, seed by seed, after this round's env-only ceilings
            turn = [s for s in systems if seed in (sb3_seeds if s == SB3 else seeds)]
            measured = measure_ceilings(game, seed, [specs[s] for s in turn], ceilings)
            for system in turn:
                logdir = os.path.join(workdir, f"{game}_{system}_seed{seed}")
                runner = run_sb3 if system == SB3 else run_ours
                rec = runner(game, seed, logdir, args)
                rec["ceiling"] = ceiling.label(specs[system])
                rec["env_only_sps"] = measured[rec["ceiling"]]
                rec["of_ceiling"] = ceiling.fraction(rec["sps"], rec["env_only_sps"])
                records.append(rec)
                cells = [game, system, str(seed), _fmt(rec["greedy_return"], ".2f")]
                cells += [_fmt(rec["sampled_return"], ".2f"), _fmt(rec["wall"])]
                cells += [_fmt(rec["sps"], ".0f"), ceiling.format_fraction(rec["of_ceiling"])]
                print("| " + " | ".join(cells) + " |", flush=True)
                if rec.get("error"):
                    print(f"    {game} {system} seed {seed} rc={rec['rc']}: {rec['error']}")
    env_only = ceilings.summary()
    table = median_table(records, {key: c["median"] for key, c in env_only.items()})
    rows: dict[str, list[dict]] = {}
    for game in games:
        for c in env_only.values():
            if c["env_id"] == GAMES[game]:
                rows.setdefault(game, []).append({
                    "name": env_only_name(c), "ok": len(c["runs"]),
                    "runs": len(c["runs"]) + len(c["errors"]), "sps": c["median"],
                })  # fmt: skip
    print(f"\nMedians over seeds (ours: {seeds}, SB3: {sb3_seeds}); returns over "
          f"{args.final_episodes} episodes after training; env-only ceilings: "
          f"{args.ceiling_steps} agent steps (at least 1 s) of random actions a round")  # fmt: skip
    print(format_table(table, rows), flush=True)
    note = few_runs_note(table)
    if note:
        print(note)
    curves = []
    if args.plot:
        plot(records, games, args.plot, args.total_steps)
        print(f"wrote {args.plot}")
        curves = seed_curves(records, games, args.plot)
        for path in curves:
            print(f"wrote {path}")
    summary = {"total_steps": args.total_steps, "games": games, "systems": systems}
    summary.update(seeds=seeds, sb3_seeds=sb3_seeds, medians=table, runs=records)
    summary.update(seed_stats=stats_by_system(records), seed_curves=curves, stats_note=note)
    summary.update(ceiling_steps=args.ceiling_steps, env_only_ceiling=env_only)
    summary.update(machine=machine.machine_info())
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    sys.path.insert(0, REPO)
    main()
