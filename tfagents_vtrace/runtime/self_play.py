"""Self-play: frozen snapshots of the policy being trained play the other seats of a
turn-by-turn game (:mod:`tfagents_vtrace.envs.turn_games`, ``opponent="self"``).

A run whose environment is such a game keeps a :class:`SnapshotPool`: the learner's weights
at step 0 and then every ``self_play_every`` agent steps (``RunConfig``). The pool holds
``self_play_pool`` snapshots: the first one always (the ``oldest`` baseline), and the newest
``self_play_pool - 1`` after it, the oldest of those replaced first. Each episode of a game
draws its opponent from the pool: the newest snapshot with probability
``self_play_latest``, else one of the held snapshots uniformly (the "latest and uniform
past" mixture of OpenAI Five and Bansal et al. 2018, https://arxiv.org/abs/1710.03748).
Opponents sample their actions from their snapshot's policy. With ``self_play_fixed`` > 0,
that share of the episodes is played against fixed opponents instead
(``self_play_fixed_opponents``, e.g. ``random,lookahead``, one drawn uniformly): a league
with scripted players beside the past selves, which keeps the policy facing play its own
snapshots may have stopped producing (a pool of policies that all stack one column never
teaches blocking a row).

The pool is model state: its snapshots are variables of a ``tf.Module`` in every checkpoint,
so a resumed run plays against the same past. The snapshots reach the games through
:class:`SnapshotOpponents`, this process's
:class:`~tfagents_vtrace.envs.turn_games.SnapshotSource` while the run trains. Ray actors
play in processes of their own: each holds a copy of the pool (:meth:`SelfPlaySpec.serve`,
from the pool's :meth:`SnapshotPool.state`), which the Ray pool
replaces by version when the learner has added a snapshot, as it sends weights
(:mod:`~tfagents_vtrace.runtime.acting.ray_backend`).

Evaluations play the greedy policy against fixed opponents instead of the pool
(:class:`MatchEvaluator`), those of ``self_play_eval_opponents``: by default ``random`` (the
row's ``eval_return`` and ``eval_win_rate``) and the ``oldest`` snapshot
(``eval_oldest_return``, ``eval_oldest_win_rate``, ...). They need a game maker that takes
``opponent=``.
"""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import tensorflow as tf

from tfagents_vtrace.envs import turn_games
from tfagents_vtrace.envs.turn_games import is_self_play
from tfagents_vtrace.runtime.config import eval_opponent_names, fixed_opponent_names


class SnapshotPool(tf.Module):
    """``size`` snapshots of a network's weights (``shapes``, the ``get_weights()`` order),
    flattened into one ``[size, P]`` variable (module docstring)."""

    def __init__(self, shapes: list[tuple[int, ...]], size: int, latest: float):
        super().__init__(name="self_play_pool")
        if size < 2:
            raise ValueError(f"self_play_pool: expected >= 2, received {size}")
        self.shapes = [tuple(s) for s in shapes]
        self.size, self.latest = int(size), float(latest)
        params = int(sum(int(np.prod(s)) for s in self.shapes))
        self.flat = tf.Variable(tf.zeros([self.size, params]), trainable=False, name="flat")
        self.steps = tf.Variable(tf.fill([self.size], tf.constant(-1, tf.int64)),
                                 trainable=False, name="steps")  # fmt: skip
        self.held = tf.Variable(tf.constant(0, tf.int64), trainable=False, name="held")
        self.newest = tf.Variable(tf.constant(-1, tf.int64), trainable=False, name="newest")
        self.version = 0
        """Counts the changes :meth:`add` and :meth:`load` made (not a checkpoint's restore,
        which comes before a run's first version is read)."""
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return int(self.held.numpy())

    def add(self, step: int, weights: list[np.ndarray]) -> int:
        """Holds ``weights`` (taken at ``step``); returns the slot they went to: the next
        free one, else the oldest one after the first (slot 0 keeps the first snapshot)."""
        flat = np.concatenate([np.asarray(w, np.float32).reshape(-1) for w in weights])
        with self._lock:
            held = len(self)
            if held < self.size:
                slot = held
            else:  # the oldest snapshot after the first
                steps = self.steps.numpy()
                slot = 1 + int(np.argmin(steps[1:]))
            self.flat[slot].assign(flat)
            self.steps[slot].assign(int(step))
            self.held.assign(min(held + 1, self.size))
            self.newest.assign(slot)
            self.version += 1
        return slot

    def state(self) -> dict[str, np.ndarray]:
        """The pool's contents as numpy arrays (what :meth:`load` takes)."""
        with self._lock:
            return {"flat": self.flat.numpy(), "steps": self.steps.numpy(),
                    "held": self.held.numpy(), "newest": self.newest.numpy()}  # fmt: skip

    def load(self, state: dict[str, np.ndarray]) -> None:
        """Replaces the pool's contents with ``state`` (another pool's :meth:`state`)."""
        with self._lock:
            for name in ("flat", "steps", "held", "newest"):
                getattr(self, name).assign(state[name])
            self.version += 1

    def draw(self, rng: np.random.Generator) -> int:
        """A held slot: the newest with probability ``latest``, else one uniformly."""
        held, newest = len(self), int(self.newest.numpy())
        if held == 0:
            raise ValueError("self_play: the pool holds no snapshot yet")
        if rng.random() < self.latest:
            return newest
        return int(rng.integers(held))

    def snapshot(self, slot: int) -> tuple[int, list[np.ndarray]]:
        """``(step, weights)`` of ``slot``."""
        with self._lock:
            flat, step = self.flat[slot].numpy(), int(self.steps[slot].numpy())
        weights, start = [], 0
        for shape in self.shapes:
            n = int(np.prod(shape))
            weights.append(flat[start : start + n].reshape(shape))
            start += n
        return step, weights


class SnapshotOpponents(turn_games.SnapshotSource):
    """The opponents of a :class:`SnapshotPool`: a sampling policy per snapshot, made with
    ``make_policy(weights)`` when a game first draws that snapshot; with probability
    ``fixed``, one of the ``fixed_opponents`` named instead (module docstring)."""

    def __init__(self, pool: SnapshotPool, make_policy, fixed: float = 0.0,
                 fixed_opponents: tuple[str, ...] = ()):  # fmt: skip
        self.pool, self.make_policy = pool, make_policy
        self.fixed = float(fixed)
        self.fixed_opponents = [turn_games.opponent_named(n) for n in fixed_opponents]
        self._policies: dict[tuple[int, int], object] = {}  # (slot, step) -> policy
        self._lock = threading.Lock()

    def _opponent(self, slot: int) -> turn_games.Opponent:
        key = (slot, int(self.pool.steps.numpy()[slot]))
        with self._lock:
            policy = self._policies.get(key)
        if policy is None:  # a snapshot new to this process: its weights read once
            step, weights = self.pool.snapshot(slot)
            with self._lock:
                key = (slot, step)
                policy = self._policies.get(key)
                if policy is None:
                    for old in [k for k in self._policies if k[0] == slot]:  # replaced
                        del self._policies[old]
                    policy = self._policies[key] = self.make_policy(weights)

        def act(observation, agent, rng) -> int:
            batched = tf.nest.map_structure(lambda x: np.asarray(x)[None], observation)
            first, reward = np.ones(1, bool), np.zeros(1, np.float32)
            state = policy.initial_state(1)
            action, _, _ = policy.step(batched, first, np.zeros(1, np.int64), reward, state)
            return int(np.asarray(action)[0])

        return act

    def draw(self, rng: np.random.Generator) -> turn_games.Opponent:
        if self.fixed_opponents and rng.random() < self.fixed:
            return self.fixed_opponents[int(rng.integers(len(self.fixed_opponents)))]
        return self._opponent(self.pool.draw(rng))

    def oldest(self) -> turn_games.Opponent:
        return self._opponent(0)


@dataclasses.dataclass(frozen=True)
class SelfPlaySpec:
    """A run's self-play settings, picklable: what a Ray actor process needs to play the
    run's snapshots (:meth:`serve`)."""

    shapes: tuple[tuple[int, ...], ...]
    size: int
    latest: float
    fixed: float = 0.0
    fixed_opponents: tuple[str, ...] = ()

    @classmethod
    def from_run(cls, run, pool: SnapshotPool) -> SelfPlaySpec:
        fixed = fixed_opponents(run) if run.self_play_fixed else ()
        return cls(tuple(pool.shapes), pool.size, pool.latest, float(run.self_play_fixed), fixed)

    def serve(self, state: dict, build_network) -> SnapshotPool:
        """In a Ray actor's process: a pool holding ``state`` (the learner's
        :meth:`SnapshotPool.state`) whose snapshots this process's games play
        (:func:`~tfagents_vtrace.envs.turn_games.set_snapshot_source`), networks made by
        ``build_network()``; :meth:`SnapshotPool.load` brings it up to date."""
        pool = SnapshotPool(list(self.shapes), self.size, self.latest)
        pool.load(state)
        policies = snapshot_policies(build_network)
        turn_games.set_snapshot_source(
            SnapshotOpponents(pool, policies, self.fixed, self.fixed_opponents)
        )
        return pool


def snapshot_policies(build_network):
    """``weights -> policy``: a sampling policy of a network from ``build_network()`` with
    ``weights``, acting one game's move per call: in numpy where it applies (a board's
    leaves and mask), not a TF call's fixed cost per move."""

    def make_policy(weights):
        from tfagents_vtrace.runtime.acting.policies import make_policy, numpy_policy_class

        network = build_network()
        impl = "numpy" if numpy_policy_class(network, "numpy") is not None else "auto"
        policy = make_policy(network, impl, greedy=False)
        policy.set_weights(weights)
        return policy

    return make_policy


def fixed_opponents(run) -> tuple[str, ...]:
    """``run.self_play_fixed_opponents``'s names (a comma-separated str, or a list or tuple),
    as :func:`~tfagents_vtrace.runtime.config.fixed_opponent_names` reads them (every
    ``RunConfig`` has checked them).

    Raises:
      ValueError: ``"self_play_fixed_opponents: ..."`` for a name that is no fixed opponent,
        none, or a value that is neither a str nor a list or tuple of str.
    """
    return fixed_opponent_names(run.self_play_fixed_opponents)


def eval_opponents(run) -> tuple[str, ...]:
    """``run.self_play_eval_opponents``'s names (a comma-separated str, or a list or tuple),
    each once, in order, as :func:`~tfagents_vtrace.runtime.config.eval_opponent_names`
    reads them (every ``RunConfig`` has checked them).

    Raises:
      ValueError: ``"self_play_eval_opponents: ..."`` for a name that is neither a fixed
        opponent nor ``oldest``, none, or a value that is neither a str nor a list or tuple
        of str.
    """
    return eval_opponent_names(run.self_play_eval_opponents)


def check_self_play_run(run) -> None:
    """Raises ``ValueError`` naming the setting unless a self-play run can train: fixed
    and evaluation opponents that exist, and a maker that takes ``opponent=`` (its
    evaluations play the opponents ``self_play_eval_opponents`` names, by default
    ``random`` and the ``oldest`` snapshot). Nothing for a game without self-play."""
    if not is_self_play(run.env_id, run.env_kwargs):
        return
    fixed_opponents(run)
    evaluated = eval_opponents(run)
    from tfagents_vtrace.envs import make_env

    try:
        make_env(run.env_id, **{**run.env_kwargs, "opponent": "random"}).close()
    except TypeError as e:
        raise ValueError(
            "env: a self-play game's maker must take opponent= (its evaluations play it "
            f"against self_play_eval_opponents: {', '.join(evaluated)}): {e}"
        ) from None


def make_evaluator(run, policy, env_factory=None):
    """The run's evaluator: a :class:`MatchEvaluator` against ``self_play_eval_opponents``
    for a self-play game, else
    :func:`~tfagents_vtrace.runtime.acting.evaluation.make_evaluator`."""
    from tfagents_vtrace.runtime.acting import evaluation

    if env_factory is not None or not is_self_play(run.env_id, run.env_kwargs):
        return evaluation.make_evaluator(run, policy, env_factory)
    evaluators = {}
    for name in eval_opponents(run):
        kwargs = {**run.env_kwargs, "opponent": name}
        evaluators[name] = evaluation.make_evaluator(
            dataclasses.replace(run, env_kwargs=kwargs), policy
        )
    return MatchEvaluator(evaluators)


class MatchEvaluator:
    """The evaluations of a self-play run (module docstring): one
    :class:`~tfagents_vtrace.runtime.acting.evaluation.Evaluator` per fixed opponent, the
    first one's fields as they are and the others' prefixed with the opponent's name."""

    def __init__(self, evaluators: dict):
        self.evaluators = evaluators

    def set_weights(self, weights) -> None:
        for evaluator in self.evaluators.values():
            evaluator.set_weights(weights)

    def run(self, retries: int = 3, key: int | None = None) -> dict:
        row: dict = {}
        for i, (name, evaluator) in enumerate(self.evaluators.items()):
            fields = evaluator.run(retries, key)
            if i == 0:
                row.update(fields)
            else:
                row.update({f"eval_{name}_{k[len('eval_') :]}": v for k, v in fields.items()})
        return row

    def cancel(self) -> None:
        for evaluator in self.evaluators.values():
            evaluator.cancel()

    def close(self) -> None:
        """Closes the evaluators and ends the run's snapshots as this process's opponents
        (the driver closes its evaluator last, after the final evaluation)."""
        for evaluator in self.evaluators.values():
            evaluator.close()
        turn_games.set_snapshot_source(None)
