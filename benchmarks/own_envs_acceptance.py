"""Issue #33's "your own problem" acceptance on four held-out environments of a user's own.

    python benchmarks/own_envs_acceptance.py [--seeds=0] [--envs=corridor,grid,point,pairs]
        [--via=python,cli] [--total_steps=300000] [--jobs=2] [--workdir=DIR]

It writes a module of four new environments (:data:`ENV_SOURCE`: none of them is in this
project, they differ from ``tests/user_envs.py`` in size, dynamics and reward scale) to a
temporary directory outside the project, ``heldout_envs.py``, which registers
``Corridor-v0``, ``Grid-v0``, ``Point-v0`` and ``Pairs-v0`` with ``gymnasium.register`` when
imported:

* ``corridor``: 15 cells, Discrete(3) (left, stay, right), 10% of moves slip to a random
  action, ``Box([3])`` observations: the position with Gaussian noise (std 0.1), the goal's
  side, a uniform distractor. Start in one of the middle five cells; +5 at the goal, -0.05
  per step; at most 60 steps.
* ``grid``: 5x5, ``Dict(image=Box(0, 255, [5, 5, 2], uint8), vector=Box(-1, 1, [2]))``;
  channel 0 the agent, channel 1 the goal (255) and a pit (128); the vector is the time left
  and whether the last move hit the wall. Discrete(4); +2 at the goal, -1 in the pit (both
  end the episode), -0.05 per step; at most 25 steps.
* ``point``: a point in ``[-2, 2]^2`` moved by ``0.1 * clip(action, -2, 2)`` (a
  ``Box(-2, 2, [2])`` action), observation ``[position / 2, target / 2]``; reward
  ``-0.5 * distance + 1`` within 0.25 of the target; 40 steps (time limit only).
* ``pairs``: a context ``(i, j, k)`` in {0, 1, 2}^3 as three one-hots (``k`` is a
  distractor), a ``MultiDiscrete([3, 3])`` action, correct ``((i + j) % 3, (i + 2j + 1) % 3)``;
  reward 1 for both components right, 0.25 for one; 25 steps (time limit only).

For each environment the uniform random policy's and a scripted policy's mean returns
(500 episodes) give the target, ``random + 0.8 * (scripted - random)``. For each run IMPALA
trains with its defaults (only ``total_steps`` and ``seed`` given; no ``--stop_return``):

* ``python``: ``tv.train("impala", env=heldout_envs.Corridor, logdir=..., total_steps=...,
  seed=...)`` in a subprocess whose ``PYTHONPATH`` holds the temporary directory;
* ``cli``: ``tfv-train --agent=impala --env=heldout_envs:Corridor-v0 --total_steps=...
  --seed=... --logdir=...`` (the command ``python -m experiments.train`` runs) with that
  ``PYTHONPATH``.

Then ``LOGDIR/policy`` is played for 20 greedy episodes by a separate process that imports
only TensorFlow, numpy and the environment module (this file run with ``--play``; it asserts
that ``tfagents_vtrace`` was never imported) through the SavedModel's flat
``greedy_action`` signature: named inputs ``observation`` (``observation_image`` /
``observation_vector`` for the Dict env), ``first``, ``prev_action``, ``prev_reward`` and
``state_0, ...`` carried from step to step (:func:`play`). Every step is also checked against
the structured ``policy.greedy_action(observation={...}, ...)`` call. ``tfv-evaluate
--policy=LOGDIR/policy --env=heldout_envs:Id-v0 --episodes=20`` runs for comparison.

Prints the machine (``benchmarks/machine.py``), then one row per run (env, path, seed,
random, scripted, target, the best greedy evaluation during training, the training's final
greedy evaluation, the plain-TF greedy return, tfv-evaluate's, PASS when the plain-TF return
reaches the target), then a JSON line; exits 1 when a run fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE = "heldout_envs"
ENV_IDS = {"corridor": "Corridor-v0", "grid": "Grid-v0", "point": "Point-v0", "pairs": "Pairs-v0"}
CLASSES = {"corridor": "Corridor", "grid": "Grid", "point": "Point", "pairs": "Pairs"}
PLAY_EPISODES, PLAY_SEED = 20, 10_000

ENV_SOURCE = '''"""Held-out environments of a user's own (benchmarks/own_envs_acceptance.py)."""

from collections import deque

import gymnasium as gym
import numpy as np


class Corridor(gym.Env):
    length, max_steps, slip = 15, 60, 0.1

    def __init__(self):
        self.observation_space = gym.spaces.Box(-2.0, 2.0, (3,), np.float32)
        self.action_space = gym.spaces.Discrete(3)
        self._pos, self._side, self._t = 7, 1, 0

    def _obs(self):
        x = 2.0 * self._pos / (self.length - 1) - 1.0 + 0.1 * self.np_random.normal()
        return np.array([np.clip(x, -2, 2), self._side, self.np_random.uniform(-1, 1)], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._pos = int(self.np_random.integers(5, 10))
        self._side = 1 if self.np_random.random() < 0.5 else -1
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        self._t += 1
        a = int(action)
        if self.np_random.random() < self.slip:
            a = int(self.np_random.integers(0, 3))
        self._pos = int(np.clip(self._pos + a - 1, 0, self.length - 1))
        terminated = self._pos == (self.length - 1 if self._side == 1 else 0)
        reward = 5.0 if terminated else -0.05
        return self._obs(), reward, terminated, self._t >= self.max_steps, {}

    def oracle(self, obs):
        return 2 if obs[1] > 0 else 0


class Grid(gym.Env):
    size, max_steps = 5, 25
    moves = np.array([[-1, 0], [1, 0], [0, -1], [0, 1]])

    def __init__(self):
        n = self.size
        self.observation_space = gym.spaces.Dict(
            {
                "image": gym.spaces.Box(0, 255, (n, n, 2), np.uint8),
                "vector": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            }
        )
        self.action_space = gym.spaces.Discrete(4)
        self._agent, self._goal, self._pit = (np.zeros(2, int),) * 3
        self._t, self._bumped = 0, 0.0

    def _obs(self):
        image = np.zeros((self.size, self.size, 2), np.uint8)
        image[self._agent[0], self._agent[1], 0] = 255
        image[self._goal[0], self._goal[1], 1] = 255
        image[self._pit[0], self._pit[1], 1] = 128
        vector = np.array([1.0 - self._t / self.max_steps, self._bumped], np.float32)
        return {"image": image, "vector": vector}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        cells = self.np_random.choice(self.size * self.size, 3, replace=False)
        self._agent, self._goal, self._pit = (np.array(divmod(int(c), self.size)) for c in cells)
        self._t, self._bumped = 0, 0.0
        return self._obs(), {}

    def step(self, action):
        self._t += 1
        moved = self._agent + self.moves[int(action)]
        self._bumped = float(np.any((moved < 0) | (moved >= self.size)))
        self._agent = np.clip(moved, 0, self.size - 1)
        if np.all(self._agent == self._goal):
            reward, terminated = 2.0, True
        elif np.all(self._agent == self._pit):
            reward, terminated = -1.0, True
        else:
            reward, terminated = -0.05, False
        return self._obs(), reward, terminated, self._t >= self.max_steps, {}

    def oracle(self, obs):
        """The first move of a shortest path around the pit (breadth-first search)."""
        start = tuple(np.argwhere(obs["image"][..., 0] == 255)[0])
        goal = tuple(np.argwhere(obs["image"][..., 1] == 255)[0])
        pit = tuple(np.argwhere(obs["image"][..., 1] == 128)[0])
        first = {start: None}
        queue = deque([start])
        while queue:
            cell = queue.popleft()
            if cell == goal:
                break
            for a, (dr, dc) in enumerate(self.moves):
                nxt = (cell[0] + dr, cell[1] + dc)
                if 0 <= nxt[0] < self.size and 0 <= nxt[1] < self.size and nxt != pit:
                    if nxt not in first:
                        first[nxt] = a if first[cell] is None else first[cell]
                        queue.append(nxt)
        return first[goal]


class Point(gym.Env):
    bound, speed, max_steps, radius = 2.0, 0.1, 40, 0.25

    def __init__(self):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)
        self._pos, self._target, self._t = np.zeros(2), np.zeros(2), 0

    def _obs(self):
        return (np.concatenate([self._pos, self._target]) / self.bound).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._pos = self.np_random.uniform(-self.bound, self.bound, 2)
        self._target = self.np_random.uniform(-self.bound, self.bound, 2)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        self._t += 1
        a = np.clip(np.asarray(action, np.float64).reshape(2), -2.0, 2.0)
        self._pos = np.clip(self._pos + self.speed * a, -self.bound, self.bound)
        d = float(np.linalg.norm(self._target - self._pos))
        reward = -0.5 * d + (1.0 if d < self.radius else 0.0)
        return self._obs(), reward, False, self._t >= self.max_steps, {}

    def oracle(self, obs):
        d = (obs[2:] - obs[:2]) * self.bound / self.speed
        return np.clip(d, -2.0, 2.0).astype(np.float32)


class Pairs(gym.Env):
    max_steps = 25

    def __init__(self):
        self.observation_space = gym.spaces.Box(0.0, 1.0, (9,), np.float32)
        self.action_space = gym.spaces.MultiDiscrete([3, 3])
        self._ctx, self._t = np.zeros(3, int), 0

    def _draw(self):
        self._ctx = self.np_random.integers(0, 3, 3)
        obs = np.zeros(9, np.float32)
        obs[[self._ctx[0], 3 + self._ctx[1], 6 + self._ctx[2]]] = 1.0
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self._draw(), {}

    def step(self, action):
        self._t += 1
        a = np.asarray(action).reshape(2)
        i, j = int(self._ctx[0]), int(self._ctx[1])
        right = int(a[0] == (i + j) % 3) + int(a[1] == (i + 2 * j + 1) % 3)
        reward = {0: 0.0, 1: 0.25, 2: 1.0}[right]
        return self._draw(), reward, False, self._t >= self.max_steps, {}

    def oracle(self, obs):
        i, j = int(np.argmax(obs[:3])), int(np.argmax(obs[3:6]))
        return np.array([(i + j) % 3, (i + 2 * j + 1) % 3])


for _name in ("Corridor", "Grid", "Point", "Pairs"):
    gym.register(f"{_name}-v0", entry_point=f"{__name__}:{_name}")
'''


def write_module(directory: str) -> str:
    """Writes ``heldout_envs.py`` into ``directory`` (made if missing); returns its path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{MODULE}.py")
    with open(path, "w") as f:
        f.write(ENV_SOURCE)
    return path


def child_env(module_dir: str) -> dict:
    """The environment of a child process: ``module_dir`` first on ``PYTHONPATH``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (module_dir, env.get("PYTHONPATH")) if p)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def reference_returns(module_dir: str, name: str, episodes: int = 500) -> tuple[float, float]:
    """``(random, scripted)`` mean returns of env ``name`` over ``episodes`` episodes."""
    import gymnasium as gym

    if module_dir not in sys.path:
        sys.path.insert(0, module_dir)
    __import__(MODULE)
    out = []
    for scripted in (False, True):
        env = gym.make(ENV_IDS[name]).unwrapped
        env.action_space.seed(0)
        total = 0.0
        for k in range(episodes):
            obs, _ = env.reset(seed=k)
            done = False
            while not done:
                action = env.oracle(obs) if scripted else env.action_space.sample()
                obs, reward, terminated, truncated, _ = env.step(action)
                total += reward
                done = terminated or truncated
        out.append(total / episodes)
    return out[0], out[1]


_PY_CHILD = """
import json, sys
import {module} as envs
import tfagents_vtrace as tv
final = tv.train("impala", env=envs.{cls}, logdir={logdir!r}, total_steps={steps}, seed={seed},
                 overwrite=True)
print(json.dumps({{"final_row": final}}, default=str))
"""


def train_command(
    via: str, name: str, logdir: str, seed: int, steps: int, extra: tuple[str, ...] = ()
) -> list[str]:
    """The training command of one run (``nice -n 5`` first); ``extra`` flags are for the
    test's short CLI run only (the acceptance gives none)."""
    if via == "python":
        code = _PY_CHILD.format(
            module=MODULE, cls=CLASSES[name], logdir=logdir, steps=steps, seed=seed
        )
        cmd = [sys.executable, "-c", code]
    else:
        cmd = [
            os.path.join(os.path.dirname(sys.executable), "tfv-train"),
            "--agent=impala",
            f"--env={MODULE}:{ENV_IDS[name]}",
            f"--total_steps={steps}",
            f"--seed={seed}",
            f"--logdir={logdir}",
            "--overwrite",
            *extra,
        ]
    return ["nice", "-n", "5", *cmd]


def read_evals(logdir: str) -> tuple[list[tuple[int, float]], float | None]:
    """The greedy evaluations of ``metrics.jsonl`` as ``(step, return)``, and the final row's
    ``eval_return`` (``final.json``)."""
    evals = []
    path = os.path.join(logdir, "metrics.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                if row.get("eval_return") is not None:
                    evals.append((row.get("eval_step", row["step"]), row["eval_return"]))
    final = None
    path = os.path.join(logdir, "final.json")
    if os.path.exists(path):
        with open(path) as f:
            final = json.load(f).get("eval_return")
    return evals, final


def play_subprocess(module_dir: str, policy: str, name: str, episodes: int = PLAY_EPISODES):
    """Runs :func:`play` in a fresh process (``--play``); returns its JSON report."""
    cmd = [sys.executable, os.path.abspath(__file__), "--play", policy, "--play_env", name]
    cmd += [f"--play_episodes={episodes}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env(module_dir))
    if proc.returncode != 0:
        raise RuntimeError(f"plain-TF playback failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def tfv_evaluate(module_dir: str, policy: str, name: str, episodes: int = PLAY_EPISODES):
    """``tfv-evaluate``'s mean greedy return of ``policy`` on env ``name``."""
    cmd = [
        "nice",
        "-n",
        "5",
        os.path.join(os.path.dirname(sys.executable), "tfv-evaluate"),
        f"--policy={policy}",
        f"--env={MODULE}:{ENV_IDS[name]}",
        f"--episodes={episodes}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env(module_dir))
    if proc.returncode != 0:
        raise RuntimeError(f"tfv-evaluate failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["mean"]


def play(policy_dir: str, name: str, episodes: int = PLAY_EPISODES, seed: int = PLAY_SEED):
    """Plays ``episodes`` greedy episodes of the SavedModel at ``policy_dir`` on env ``name``
    (one batch entry per episode, reset seeds ``seed, seed + 1, ...``) with TensorFlow, numpy
    and the environment module only; returns ``{"mean", "returns", "mismatches", ...}``.

    Drives the flat ``greedy_action`` signature by its input names, carrying ``first`` (True
    at an episode's first step only), the previous action and reward and ``state_i``; each
    step is compared with the structured ``policy.greedy_action`` call."""
    sys.modules["tfagents_vtrace"] = None  # any import of the package would now fail
    import gymnasium as gym
    import numpy as np
    import tensorflow as tf

    __import__(MODULE)  # registers the ids
    policy = tf.saved_model.load(policy_dir)
    sig = policy.signatures["greedy_action"]
    specs = sig.structured_input_signature[1]  # name -> TensorSpec
    init = policy.signatures["get_initial_state"](batch_size=tf.constant(episodes))
    state = {k: v for k, v in init.items() if k.startswith("state_")}
    envs = [gym.make(ENV_IDS[name]) for _ in range(episodes)]
    obs = [env.reset(seed=seed + k)[0] for k, env in enumerate(envs)]
    b = episodes
    first = np.ones(b, bool)
    pa = specs["prev_action"]
    prev_action = np.zeros([b, *pa.shape[1:]], pa.dtype.as_numpy_dtype)
    prev_reward = np.zeros(b, np.float32)
    returns, done = np.zeros(b), np.zeros(b, bool)
    mismatches = steps = 0
    while not done.all():
        if isinstance(obs[0], dict):  # a Dict observation: one named input per key
            batch = {k: tf.constant(np.stack([o[k] for o in obs])) for k in obs[0]}
            named = {f"observation_{k}": v for k, v in batch.items()}
        else:
            batch = tf.constant(np.stack(obs))
            named = {"observation": batch}
        inputs = dict(named, first=first, prev_action=prev_action, prev_reward=prev_reward)
        out = sig(**inputs, **state)
        action = out["action"].numpy()
        structured = policy.greedy_action(
            observation=batch,
            first=tf.constant(first),
            prev_action=tf.constant(prev_action),
            prev_reward=tf.constant(prev_reward),
            state=tuple(state[f"state_{i}"] for i in range(len(state))),
        )
        mismatches += int(not np.allclose(structured["action"].numpy(), action, atol=1e-5))
        state = {k: v for k, v in out.items() if k.startswith("state_")}
        rewards = np.zeros(b, np.float32)
        for i, env in enumerate(envs):
            if done[i]:
                continue
            obs[i], r, terminated, truncated, _ = env.step(action[i])
            rewards[i] = r
            returns[i] += r
            done[i] = terminated or truncated
        prev_action = np.asarray(action, pa.dtype.as_numpy_dtype)
        prev_reward, first = rewards, np.zeros(b, bool)
        steps += 1
    loaded = sorted(m for m in sys.modules if m.split(".")[0] == "tfagents_vtrace")
    assert loaded == ["tfagents_vtrace"] and sys.modules["tfagents_vtrace"] is None, loaded
    return {
        "mean": float(returns.mean()),
        "returns": [round(float(r), 4) for r in returns],
        "mismatches": mismatches,
        "steps": steps,
        "inputs": sorted(specs),
    }


def run_one(name, via, seed, args, module_dir, refs) -> dict:
    """Trains, plays and evaluates one run; returns its row."""
    logdir = os.path.join(args.workdir, f"{name}_{via}_{seed}")
    low, best = refs[name]
    row = {"env": name, "via": via, "seed": seed, "random": low, "scripted": best}
    row["target"] = low + 0.8 * (best - low)
    start = time.time()
    cmd = train_command(via, name, logdir, seed, args.total_steps)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env(module_dir))
    row["train_s"] = round(time.time() - start, 1)
    evals, row["final_greedy"] = read_evals(logdir)
    row["best_greedy"] = max((v for _, v in evals), default=None)
    row["solve_step"] = next((s for s, v in evals if v >= row["target"]), None)
    if proc.returncode != 0:
        row["error"] = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return row
    policy = os.path.join(logdir, "policy")
    try:
        played = play_subprocess(module_dir, policy, name)
        row["plain_tf"], row["mismatches"] = played["mean"], played["mismatches"]
        row["tfv_evaluate"] = tfv_evaluate(module_dir, policy, name)
    except RuntimeError as e:
        row["error"] = str(e).splitlines()[-1]
        return row
    row["pass"] = row["plain_tf"] >= row["target"] and row["mismatches"] == 0
    return row


def _fmt(x, width=8):
    return f"{'-':>{width}}" if x is None else f"{x:{width}.2f}"


def format_row(row: dict) -> str:
    verdict = "PASS" if row.get("pass") else "FAIL"
    return (
        f"{row['env']:9} {row['via']:6} {row['seed']:4} {_fmt(row['random'])} "
        f"{_fmt(row['scripted'])} {_fmt(row['target'])} {_fmt(row.get('best_greedy'))} "
        f"{_fmt(row.get('final_greedy'))} {_fmt(row.get('plain_tf'))} "
        f"{_fmt(row.get('tfv_evaluate'))} {row.get('solve_step') or '-':>8} "
        f"{row['train_s']:7.1f}  {verdict}" + (f"  {row['error']}" if "error" in row else "")
    )


HEADER = (
    "env       path   seed   random scripted   target best_gr. final_gr plain_tf tfv_eval "
    "  solved train_s  result"
)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0")
    p.add_argument("--envs", default=",".join(ENV_IDS))
    p.add_argument("--via", default="python,cli")
    p.add_argument("--total_steps", type=int, default=300_000)
    p.add_argument("--jobs", type=int, default=2, help="trainings at a time")
    p.add_argument("--workdir", default=None, help="run directories (default: a new temp dir)")
    p.add_argument("--keep_module", action="store_true", help="keep the env module's dir")
    p.add_argument("--play", default=None, help=argparse.SUPPRESS)
    p.add_argument("--play_env", default=None, help=argparse.SUPPRESS)
    p.add_argument("--play_episodes", type=int, default=PLAY_EPISODES, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.play:  # the plain-TF child
        print(json.dumps(play(args.play, args.play_env, args.play_episodes)))
        return 0
    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    from machine import machine_line  # here: the --play child above imports nothing of ours

    sys.path.pop(0)  # benchmarks/minatar.py would shadow the minatar package
    print(machine_line(), flush=True)
    module_dir = tempfile.mkdtemp(prefix="heldout_envs_")
    if os.path.commonpath([module_dir, REPO]) == REPO:
        raise SystemExit(f"the env module must live outside the project ({module_dir})")
    write_module(module_dir)
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="own_envs_")
    names = args.envs.split(",")
    refs = {n: reference_returns(module_dir, n) for n in names}
    seeds, paths = [int(s) for s in args.seeds.split(",")], args.via.split(",")
    jobs = [(n, via, s) for s in seeds for via in paths for n in names]
    print(f"env module: {module_dir}/{MODULE}.py  run dirs: {args.workdir}", flush=True)
    print(HEADER, flush=True)
    try:
        with ThreadPoolExecutor(args.jobs) as pool:
            futures = [pool.submit(run_one, *j, args, module_dir, refs) for j in jobs]
            rows = []
            for fut in futures:
                rows.append(fut.result())
                print(format_row(rows[-1]), flush=True)
    finally:
        if not args.keep_module:
            shutil.rmtree(module_dir, ignore_errors=True)
    print(json.dumps({"total_steps": args.total_steps, "rows": rows}))
    return 0 if all(r.get("pass") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
