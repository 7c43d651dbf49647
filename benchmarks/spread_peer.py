"""simple_spread trained by a peer: Stable-Baselines3 PPO with one policy for the 3 agents.

    python benchmarks/spread_peer.py --seed=1 --steps=5000000 [--out=sb3_spread.zip]
        [--episodes=100] [--log_every=250000]

The way PettingZoo's own tutorials train a parallel game with SB3: SuperSuit's
``pettingzoo_env_to_vec_env_v1`` makes each agent of ``mpe2``'s ``simple_spread_v3`` (3
agents, 25 steps, ``local_ratio`` 0.5) a column of an SB3 vector env, and
``concat_vec_envs_v1`` lays 32 games side by side (96 columns, as
``configs/impala_simple_spread.cfg`` does). Each agent's observation carries its one-hot index,
as ``--agent_ids`` gives ours. PPO: 50 steps per column per rollout (4,800 agent steps),
minibatches of 1,200, 10 epochs, learning rate 7e-4, entropy 0.01, gamma 0.99, GAE lambda
0.95 (MAPPO's MPE values, Yu et al. 2022, https://arxiv.org/abs/2103.01955), separate 64x64
tanh policy and value MLPs (SB3's ``MlpPolicy``), one torch thread. Agent steps count every
column's steps, as ours do.

Prints a JSON line every ``--log_every`` agent steps (the mean training return of SB3's last
100 agent-episodes, sampled actions), then the trained policy's greedy return over
``--episodes`` games of ``benchmarks/multi_agent.py``'s harness (seeds 0, 1, ...), the line
that ``--policy`` gives there for one of ours.

Needs torch and stable-baselines3 (the ``bench`` extra), ``mpe2`` (the ``mpe`` extra) and
``supersuit`` (``pip install supersuit``): without them it stops at once with one line on
stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np

PEERS = ("torch", "stable_baselines3", "supersuit", "mpe2")
N = 3


def missing_peers() -> list[str]:
    return [m for m in PEERS if importlib.util.find_spec(m) is None]


def harness():
    """``benchmarks/multi_agent.py`` loaded by its path (``benchmarks/`` is no package)."""
    path = Path(__file__).resolve().parent / "multi_agent.py"
    spec = importlib.util.spec_from_file_location("multi_agent_harness", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def with_id(obs: np.ndarray, index: int) -> np.ndarray:
    return np.concatenate([obs, np.eye(N, dtype=np.float32)[index]]).astype(np.float32)


def make_vec_env(games: int):
    import supersuit as ss
    from gymnasium import spaces
    from mpe2 import simple_spread_v3
    from stable_baselines3.common.vec_env import VecMonitor

    def id_space(space, agent=None):
        low = np.concatenate([space.low, np.zeros(N)]).astype(np.float32)
        high = np.concatenate([space.high, np.ones(N)]).astype(np.float32)
        return spaces.Box(low, high, dtype=np.float32)

    env = simple_spread_v3.parallel_env(N=N)
    env = ss.observation_lambda_v0(
        env, lambda obs, space, agent: with_id(obs, int(agent.split("_")[1])), id_space
    )
    env = ss.pettingzoo_env_to_vec_env_v1(env)
    env = ss.concat_vec_envs_v1(env, games, num_cpus=0, base_class="stable_baselines3")
    return VecMonitor(env)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--steps", type=float, default=5e6)
    p.add_argument("--games", type=int, default=32)
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--log_every", type=int, default=250_000)
    p.add_argument("--out", default=None, help="save the trained SB3 model here")
    args = p.parse_args(argv)
    missing = missing_peers()
    if missing:
        print(
            f"spread_peer: needs {', '.join(missing)}: pip install '.[bench,mpe]' supersuit",
            file=sys.stderr,
        )
        return 2
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.utils import set_random_seed

    torch.set_num_threads(1)
    set_random_seed(args.seed)  # SuperSuit's vector takes no seed call of SB3's
    model = PPO(
        "MlpPolicy", make_vec_env(args.games), verbose=0, n_steps=50, batch_size=1200,
        n_epochs=10, learning_rate=7e-4, ent_coef=0.01, gamma=0.99, gae_lambda=0.95,
        policy_kwargs={"net_arch": [64, 64]},
    )  # fmt: skip

    class Log(BaseCallback):
        def __init__(self):
            super().__init__()
            self.start, self.next = time.time(), 0

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next:
                returns = [e["r"] for e in self.model.ep_info_buffer]
                row = {"steps": self.num_timesteps, "wall_s": round(time.time() - self.start),
                       "train_return": float(np.mean(returns)) if returns else None}  # fmt: skip
                print(json.dumps(row), flush=True)
                self.next += args.log_every
            return True

    model.learn(int(args.steps), callback=Log())
    if args.out:
        model.save(args.out)
    bench = harness()

    def choose(obs, index, rng):
        action, _ = model.predict(with_id(obs, index), deterministic=True)
        return int(action)

    print(json.dumps(bench.summary("sb3_ppo", bench.play_spread(choose, args.episodes, 0))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
