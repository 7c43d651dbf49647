"""Games of many agents: a trained policy's return against a scripted player's.

    python benchmarks/multi_agent.py --game=simple_spread --episodes=200 [--seed=0]
        [--policy=runs/spread/policy] [--agent_ids]

``simple_spread`` is MPE's cooperative navigation (``mpe2.simple_spread_v3``, 3 agents, 3
landmarks, 25 steps; ``pip install mpe2``): every agent earns the negative sum over landmarks
of the nearest agent's distance (the global term, weighted 0.5) and -1 for each collision
with it (the local term, weighted 0.5). The scripted player (:func:`spread_action`) is the
assignment heuristic: each agent rebuilds every agent's and landmark's position from its own
observation, takes the assignment of agents to landmarks with the least total distance (all
agents find the same one), and picks the move that brings it closest to its landmark a few
steps ahead under MPE's dynamics (damping 0.25, dt 0.1, acceleration 5).

Prints one JSON line per player (``scripted``, ``random``, two simpler rules with the same
move choice: ``nearest``, each agent heading for its nearest landmark, and ``own_index``,
agent ``i`` for landmark ``i``; and ``policy`` when given): the mean and spread of the
per-agent episode return over ``--episodes`` games.

``connect_four`` (PettingZoo's ``connect_four_v3``): the exported ``--policy`` (greedy, its
action mask applied) plays ``--episodes`` games as the first player and as many as the
second against each opponent of :mod:`tfagents_vtrace.envs.turn_games` (``random``, and
``lookahead``: win now, else block, else random); one JSON line per opponent and seat with
the wins, draws and losses. Without ``--policy`` the lookahead player is measured in its
place against random (the reference a policy is held to).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys

import numpy as np

DT, DAMPING, ACCEL = 0.1, 0.25, 5.0
MOVES = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]], np.float64)  # MPE's 5 actions
LOOKAHEAD = 3


def spread_positions(obs: np.ndarray, index: int, n: int = 3):
    """``(velocity, agents [n, 2], landmarks [n, 2])`` from agent ``index``'s observation:
    ``[vel(2), pos(2), landmark - pos (2n), other agent - pos (2(n-1)), comm]``."""
    vel, pos = obs[0:2], obs[2:4]
    landmarks = pos + obs[4 : 4 + 2 * n].reshape(n, 2)
    others = pos + obs[4 + 2 * n : 4 + 2 * n + 2 * (n - 1)].reshape(n - 1, 2)
    agents = np.insert(others, index, pos, axis=0)
    return vel, agents, landmarks


def best_assignment(agents: np.ndarray, landmarks: np.ndarray) -> tuple[int, ...]:
    """The permutation ``p`` (agent ``i`` to landmark ``p[i]``) of least total distance."""
    dist = np.linalg.norm(agents[:, None, :] - landmarks[None, :, :], axis=-1)
    n = len(agents)
    return min(itertools.permutations(range(n)), key=lambda p: dist[range(n), p].sum())


def _ahead(pos: np.ndarray, vel: np.ndarray, move: np.ndarray) -> np.ndarray:
    """The position ``LOOKAHEAD`` steps on: ``move`` for one step, then none (MPE's
    integration: v <- v (1 - damping) + a dt, p <- p + v dt)."""
    for k in range(LOOKAHEAD):
        vel = vel * (1.0 - DAMPING) + (ACCEL * move if k == 0 else 0.0) * DT
        pos = pos + vel * DT
    return pos


def spread_action(obs: np.ndarray, index: int, n: int = 3, target: str = "assigned") -> int:
    """The scripted player's action for agent ``index`` (module docstring). ``target``:
    its landmark under the best assignment (``assigned``, the heuristic), else the nearest
    landmark (``nearest``) or the landmark of its own index (``own``), two simpler rules
    that place a policy between random play and the heuristic."""
    vel, agents, landmarks = spread_positions(np.asarray(obs, np.float64), index, n)
    pos = agents[index]
    if target == "assigned":
        goal = landmarks[best_assignment(agents, landmarks)[index]]
    elif target == "nearest":
        goal = landmarks[np.argmin(np.linalg.norm(landmarks - pos, axis=1))]
    else:
        goal = landmarks[index]
    return int(np.argmin([np.linalg.norm(_ahead(pos, vel, m) - goal) for m in MOVES]))


def play_spread(choose, episodes: int, seed: int, n: int = 3) -> list[float]:
    """Per-agent episode returns of ``episodes`` games of simple_spread, each agent acting
    by ``choose(obs, index, rng) -> action``."""
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env(N=n)
    rng = np.random.default_rng(seed)
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        agents = list(env.possible_agents)
        total = dict.fromkeys(agents, 0.0)
        while env.agents:
            actions = {a: choose(obs[a], agents.index(a), rng) for a in env.agents}
            obs, rewards, _, _, _ = env.step(actions)
            for a, r in rewards.items():
                total[a] += r
        returns.extend(total.values())
    env.close()
    return returns


def policy_chooser(path: str, agent_ids: bool, n: int = 3):
    """``choose`` of an exported policy (greedy), each agent's observation as the run saw it."""
    import tfagents_vtrace as tv

    policy = tv.load_policy(path)

    def choose(obs, index, rng):
        x = np.asarray(obs, np.float32)
        if agent_ids:
            x = np.concatenate([x, np.eye(n, dtype=np.float32)[index]])
        action, _ = policy.step(x[None], policy.initial_state(1), greedy=True)
        return int(np.asarray(action)[0])

    return choose


def play_connect_four(choose, opponent: str, seat: int, games: int, seed: int) -> dict:
    """Wins, draws and losses of ``choose(obs, rng) -> action`` in seat ``seat`` (0: first)
    over ``games`` games of Connect Four against ``opponent``."""
    from pettingzoo.classic import connect_four_v3

    from tfagents_vtrace.envs.turn_games import TurnGame

    env = TurnGame(connect_four_v3.env, opponent=opponent, seat=f"player_{seat}")
    rng = np.random.default_rng(seed)
    counts = {1: 0, 0: 0, -1: 0}
    obs, _ = env.reset(seed=seed)
    for _ in range(games):
        done = False
        while not done:
            obs, _, terminated, truncated, info = env.step(choose(obs, rng))
            done = terminated or truncated
        counts[info["outcome"]] += 1
        obs, _ = env.reset()
    env.close()
    return {"opponent": opponent, "seat": seat, "games": games, "wins": counts[1],
            "draws": counts[0], "losses": counts[-1], "win_rate": counts[1] / games}  # fmt: skip


def summary(name: str, returns: list[float]) -> dict:
    r = np.asarray(returns)
    q1, q3 = np.percentile(r, [25, 75])
    return {"player": name, "mean": float(r.mean()), "median": float(np.median(r)),
            "iqr": [float(q1), float(q3)], "agent_episodes": int(r.size)}  # fmt: skip


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--game", default="simple_spread", choices=["simple_spread", "connect_four"])
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--policy", default=None, help="an exported policy directory")
    p.add_argument("--agent_ids", action="store_true", help="the policy was trained with them")
    args = p.parse_args(argv)
    if args.game == "connect_four":
        connect_four(args)
        return
    players = {
        "scripted": lambda obs, i, rng: spread_action(obs, i),
        "random": lambda obs, i, rng: int(rng.integers(5)),
        "nearest": lambda obs, i, rng: spread_action(obs, i, target="nearest"),
        "own_index": lambda obs, i, rng: spread_action(obs, i, target="own"),
    }
    if args.policy:
        players["policy"] = policy_chooser(args.policy, args.agent_ids)
    for name, choose in players.items():
        print(json.dumps(summary(name, play_spread(choose, args.episodes, args.seed))))
        sys.stdout.flush()


def connect_four(args: argparse.Namespace) -> None:
    """The ``connect_four`` lines of the module docstring."""
    from tfagents_vtrace.envs.turn_games import connect_four_lookahead

    if args.policy:
        import tfagents_vtrace as tv

        policy, name = tv.load_policy(args.policy), "policy"

        def choose(obs, rng):
            batched = {k: np.asarray(v)[None] for k, v in obs.items()}
            action, _ = policy.step(batched, policy.initial_state(1), greedy=True)
            return int(np.asarray(action)[0])
    else:
        name = "lookahead"

        def choose(obs, rng):
            return connect_four_lookahead(obs, "", rng)

    for opponent in ("random", "lookahead"):
        for seat in (0, 1):
            row = play_connect_four(choose, opponent, seat, args.episodes, args.seed)
            print(json.dumps({"player": name, **row}))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
