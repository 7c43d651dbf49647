"""Run-level settings of the local IMPALA-style runtime (actors, batching, logging, eval)."""

from __future__ import annotations

import dataclasses
import math

from tfagents_vtrace.utils.validation import check_int, check_number

SETTING = "setting"
"""Field metadata key: ``{SETTING: False}`` marks a config field that is no setting or flag
(the code that builds the config fills it, e.g. ``RunConfig.env_kwargs``)."""

RESTART_SEED_STRIDE = 7919
"""A run restarted at counter ``k`` (its update or environment step) seeds its acting with
``seed + RESTART_SEED_STRIDE * k``, so a resumed run does not replay the episodes it saw."""
STREAM_SEED_STRIDE = 104_729
"""The ``i``-th stream of random numbers of a run (a worker, a collector, the replay) is
seeded ``seed + STREAM_SEED_STRIDE * i`` apart from the others (primes, far apart)."""


def stream_seed(seed: int, restart: int = 0, stream: int = 0) -> int:
    """The seed of random stream ``stream`` of a run seeded ``seed`` restarted at counter
    ``restart`` (:data:`RESTART_SEED_STRIDE`, :data:`STREAM_SEED_STRIDE`)."""
    return int(seed) + RESTART_SEED_STRIDE * int(restart) + STREAM_SEED_STRIDE * int(stream)


BACKENDS = ("local", "ray")
POLICY_IMPLS = ("auto", "tf", "numpy", "fastest")
"""``policy_impl``'s values (``runtime/acting/policies.py``'s ``make_policy``)."""


def fixed_opponent_names(value) -> tuple[str, ...]:
    """The names ``self_play_fixed_opponents=value`` gives, as given: fixed opponents of
    :mod:`tfagents_vtrace.envs.turn_games` (its ``opponent_names``).

    Raises:
      ValueError: ``"self_play_fixed_opponents: ..."`` for a name that is no fixed opponent,
        none, or a value that is neither a str nor a list or tuple of str.
    """
    from tfagents_vtrace.envs import turn_games  # here: importing config imports no gymnasium

    return turn_games.opponent_names("self_play_fixed_opponents", value)


def eval_opponent_names(value) -> tuple[str, ...]:
    """The names ``self_play_eval_opponents=value`` gives, each once, in order: fixed
    opponents of :mod:`tfagents_vtrace.envs.turn_games` and ``oldest`` (its
    ``opponent_names``).

    Raises:
      ValueError: ``"self_play_eval_opponents: ..."`` for a name that is neither a fixed
        opponent nor ``oldest``, none, or a value that is neither a str nor a list or tuple
        of str.
    """
    from tfagents_vtrace.envs import turn_games  # here: importing config imports no gymnasium

    names = turn_games.opponent_names("self_play_eval_opponents", value, (turn_games.OLDEST,))
    return tuple(dict.fromkeys(names))


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """How a training run is driven. Every field is validated in ``__post_init__``."""

    env_id: str = "CartPole-v1"
    """gymnasium id of the training and evaluation environments."""
    env_kwargs: dict = dataclasses.field(
        default_factory=dict, hash=False, metadata={SETTING: False}
    )
    """Constructor arguments of the run's environments (not a flag: the environment layer
    makes them from its settings, :meth:`tfagents_vtrace.envs.family.EnvFamilyConfig.
    env_kwargs`)."""
    seed: int = 0
    """Seeds environments, action sampling and network initialisation."""
    total_steps: int = 500_000
    """Environment steps to train for (all actor steps, counted T * B per unroll). The
    default suits a first try on a small task (docs/defaults.md)."""
    num_actors: int = 0
    """Actor threads, each owning one vector env; 0 (default) steps one actor inline in the
    learner thread (synchronous, no policy lag, as on-policy A2C needs; repeatable, and
    often fastest for tiny networks on few cores). Raise it for slow environments or big
    networks (``impala_reference.cfg`` has 1)."""
    num_envs: int = 16
    """Environments per actor (B of one unroll)."""
    unroll_length: int = 16
    """T: steps per unroll (the learner sees T + 1 observations)."""
    batch_unrolls: int = 1
    """Unrolls concatenated along B per learner update."""
    queue_capacity: int = 2
    """Bound of the actor -> learner unroll queue (in unrolls); small = low policy lag."""
    env_mode: str = "auto"
    """``make_vector_env`` mode for the actors ("auto", "sync", "async", "envpool")."""
    env_groups: int = 1
    """Each actor's environments as this many vector environments of ``num_envs /
    env_groups``, stepped in turn: while one group's environments step (in a helper thread),
    the policy acts for the next group, so that acting and stepping overlap. Pays where a
    step runs outside Python's lock (ALE's and envpool's C++ threads, async vectors); a
    pure-Python environment gains nothing. Must divide ``num_envs``."""
    env_step_timeout_s: float | None = 60.0
    """Seconds an environment step (or reset) may take before it counts as a failure of
    that environment: an actor or worker thread stuck in it is abandoned and replaced by a
    new one with new environments (an async vector's processes are terminated and made
    again), with a warning; where the actor steps in the learner's thread (``num_actors=0``,
    ACER without workers, TAAC) the run is stopped with a checkpoint instead. Generous by
    default, so that only a simulator that is stuck reaches it; 0 or None: no limit."""
    policy_impl: str = "auto"
    """Acting implementation: "auto" (numpy for MLP categorical policies, else TF), "tf",
    "numpy" (also feed-forward categorical policies on the nature_cnn, small_atari_cnn and
    minatar_cnn torsos: their actors then run off TensorFlow's thread pool), or "fastest"
    (a feed-forward network: each actor times numpy where it applies, TF and TF under XLA
    over its first steps, beside the learner, acts with the fastest and prints the choice;
    not with ``deterministic``, since the choice depends on timing)."""
    eval_every: int = 20_000
    """Greedy evaluation every this many env steps (0: only at the end); the default shows
    a first run's progress (a row with ``eval_return`` every 20k steps)."""
    eval_episodes: int = 10
    """Episodes (one per separate environment) of each greedy evaluation."""
    eval_background: bool = False
    """Greedy evaluations play in a thread beside training, on a copy of the weights, instead
    of pausing it; their rows add ``eval_step`` (the step of the weights evaluated, behind the
    row's ``step``) and ``wall_time`` is when the result was known. Not with
    ``deterministic``, nor on a multi-worker cluster."""
    stop_return: float | None = None
    """End training at the first evaluation whose mean return reaches this."""
    init_from: str | None = None
    """Warm start: a new run starts from the networks of another run directory (its newest
    intact checkpoint: every network it checkpoints) or of an exported policy (a SavedModel
    directory: the policy network; an agent's other networks start fresh), for fine-tuning
    on a changed environment or reward. The optimizer, counters and replay start fresh, and
    the spaces and network settings must match (else the start is refused in one line). Read
    only when the run starts: a resumed run continues from its own checkpoint."""
    checkpoint_every_s: float = 600.0
    """Seconds between checkpoints (one is also written at step 0 and one at the end). Under
    the multi_worker strategy workers must save together, so checkpoints follow steps
    instead: every ``eval_every`` steps, or every tenth of ``total_steps`` without it."""
    log_every_s: float = 5.0
    """Seconds between metrics rows (and the progress lines that show them) at the latest,
    unless rows follow steps only (``log_every_steps``, ``deterministic``)."""
    stop_grace_s: float = 10.0
    """Seconds from a stop signal (Ctrl-C, SIGTERM, SIGHUP) to the process's end at the
    latest: the run checkpoints at its next step; if it has not within half of this (an
    environment that hangs), it is checkpointed from another thread, and the process ends
    (exit code 130) at this limit. Keep it below the scheduler's own grace (Slurm's
    ``KillWait``, Kubernetes' ``terminationGracePeriodSeconds``: 30 s by default)."""
    backend: str = "local"
    """"local" (actor threads) or "ray" (``num_actors`` Ray actor processes, each building
    its own network and vector env; see :mod:`tfagents_vtrace.runtime.acting.ray_backend`)."""
    ray_address: str | None = None
    """backend="ray": cluster to join ("auto", "HOST:6379", "ray://HOST:10001"); None starts
    a local Ray with max(cpu_count, ceil(num_actors * ray_actor_cpus)) CPUs."""
    ray_actor_cpus: float = 1.0
    """backend="ray": CPUs each Ray actor reserves (e.g. 0.5 packs two actors per core)."""
    ship_frames_once: bool | None = None
    """Actors ship a stacked-frame observation (uint8 ``[..., S]``, Atari's 4 frames) with
    each frame once, and the learner's process stacks them again, exactly, before the learner
    takes the unroll (:mod:`tfagents_vtrace.runtime.acting.frames`): about a quarter of the
    bytes for Atari, for the learner's process's CPU to stack again. None (default): the Ray
    actors of a cluster (``ray_address`` given) do, whose unrolls may cross a network; a
    private Ray's actors and actor threads do not, since their unrolls reach the learner
    through this machine's memory, where stacking again costs more than the bytes it saves.
    True: every actor of a queue (threads, Ray); False: none. Other observations ship as they
    are, and the inline actor (``num_actors=0``) ships nothing."""
    self_play_every: int = 50_000
    """Self-play (a turn-by-turn game with ``opponent="self"``,
    :mod:`tfagents_vtrace.runtime.self_play`): agent steps between two snapshots of the
    policy added to the opponents' pool (the first at step 0)."""
    self_play_pool: int = 10
    """Self-play: snapshots the pool holds (>= 2): the first one, and the newest others."""
    self_play_latest: float = 0.5
    """Self-play: the probability that an episode's opponent is the newest snapshot; else
    one of the held snapshots, uniformly."""
    self_play_fixed: float = 0.0
    """Self-play: the probability that an episode's opponent is one of
    ``self_play_fixed_opponents`` (uniformly) instead of a snapshot; 0: snapshots only."""
    self_play_fixed_opponents: str = "random"
    """Self-play: the fixed opponents ``self_play_fixed`` draws, comma-separated names of
    ``envs/turn_games.py``'s opponents (``random``, ``lookahead``); from Python, a list or
    tuple of names too."""
    self_play_eval_opponents: str = "random,oldest"
    """Self-play: whom the evaluations play, comma-separated (from Python, a list or tuple
    of names too): fixed opponents' names and ``oldest`` (the pool's first snapshot). The
    first one's fields are the row's ``eval_return``, ``eval_win_rate``, ...; each other's
    are prefixed with its name (``eval_oldest_win_rate``, ``eval_lookahead_win_rate``)."""
    export_policy: bool = True
    """Write DIR/policy (SavedModel) at the end."""
    deterministic: bool = False
    """Repeatable runs: the same command and seed on the same machine write the same
    metrics (timings aside) and final weights, whatever the load. TensorFlow op determinism
    on; actor threads act with weights exactly ``deterministic_lag`` updates old and the
    learner takes their unrolls in a fixed order; asynchronous workers (A3C, ACER) take
    turns in a fixed order; metrics rows follow steps (``log_every_steps``), not seconds.
    Slower; not with ``backend="ray"``."""
    deterministic_lag: int = 1
    """With ``deterministic``: updates between the weights that act and the update that
    learns from their unrolls (0: acting waits for every update; 1: actors and learner
    overlap by one update, as a pipeline)."""
    log_every_steps: int = 0
    """Metrics rows every this many env steps, and only then (not every ``log_every_s``
    seconds). 0 (the default): auto, every hundredth of ``total_steps`` (at most one row per
    update) or every ``log_every_s`` seconds, whichever comes first, so that a short run
    draws a curve and a long one writes a row every few seconds; with ``deterministic``,
    every hundredth of ``total_steps`` only (rows that do not depend on the load)."""

    def __post_init__(self) -> None:
        if not isinstance(self.env_id, str) or not self.env_id:
            raise ValueError(f"env_id: expected a non-empty str, received {self.env_id!r}")
        kwargs = self.env_kwargs
        if not (isinstance(kwargs, dict) and all(isinstance(k, str) for k in kwargs)):
            raise ValueError(
                f"env_kwargs: expected a dict of keyword arguments, received {self.env_kwargs!r}"
            )
        check_int("seed", self.seed, 0)
        check_int("total_steps", self.total_steps, 1)
        check_int("num_actors", self.num_actors, 0)
        check_int("num_envs", self.num_envs, 1)
        check_int("env_groups", self.env_groups, 1)
        if self.num_envs % self.env_groups:
            raise ValueError(
                f"env_groups: expected a divisor of num_envs ({self.num_envs}), received "
                f"{self.env_groups}"
            )
        check_int("unroll_length", self.unroll_length, 1)
        check_int("batch_unrolls", self.batch_unrolls, 1)
        check_int("queue_capacity", self.queue_capacity, 1)
        check_int("eval_every", self.eval_every, 0)
        check_int("eval_episodes", self.eval_episodes, 1)
        check_int("deterministic_lag", self.deterministic_lag, 0)
        check_int("log_every_steps", self.log_every_steps, 0)
        check_int("self_play_every", self.self_play_every, 1)
        check_int("self_play_pool", self.self_play_pool, 2)
        check_number("self_play_latest", self.self_play_latest, 0.0, 1.0, False, False)
        check_number("self_play_fixed", self.self_play_fixed, 0.0, 1.0, False, False)
        fixed_opponent_names(self.self_play_fixed_opponents)  # every run's, self-play or not
        eval_opponent_names(self.self_play_eval_opponents)
        timeout = self.env_step_timeout_s
        if timeout is not None and not (
            isinstance(timeout, int | float) and not isinstance(timeout, bool)
            and math.isfinite(timeout) and timeout >= 0
        ):  # fmt: skip
            raise ValueError(
                f"env_step_timeout_s: expected a number of seconds >= 0 (0: no limit), "
                f"received {timeout!r}"
            )
        if not isinstance(self.deterministic, bool):
            raise ValueError(f"deterministic: expected a bool, received {self.deterministic!r}")
        if self.ship_frames_once is not None and not isinstance(self.ship_frames_once, bool):
            raise ValueError(
                f"ship_frames_once: expected None or a bool, received {self.ship_frames_once!r}"
            )
        if not isinstance(self.eval_background, bool):
            raise ValueError(f"eval_background: expected a bool, received {self.eval_background!r}")
        if self.eval_background and self.deterministic:
            raise ValueError(
                "eval_background: not with deterministic (rows would follow the thread's "
                "timing); evaluate in the training loop (eval_background=False)"
            )
        if self.deterministic and self.backend == "ray":
            raise ValueError(
                "deterministic: not available with backend='ray' (Ray actors' unrolls arrive "
                "in an order that depends on timing); use the local backend"
            )
        if self.policy_impl not in POLICY_IMPLS:
            raise ValueError(
                f"policy_impl: expected one of {POLICY_IMPLS}, received {self.policy_impl!r}"
            )
        if self.policy_impl == "fastest" and self.deterministic:
            raise ValueError(
                "policy_impl: 'fastest' chooses by timing, which deterministic runs must not "
                "depend on; give 'numpy', 'tf' or 'auto' with deterministic"
            )
        if self.backend not in BACKENDS:
            raise ValueError(f"backend: expected one of {BACKENDS}, received {self.backend!r}")
        if self.ray_address is not None and not (
            isinstance(self.ray_address, str) and self.ray_address
        ):
            raise ValueError(
                f"ray_address: expected None or a non-empty str, received {self.ray_address!r}"
            )
        if not (isinstance(self.ray_actor_cpus, int | float) and self.ray_actor_cpus > 0):
            raise ValueError(
                f"ray_actor_cpus: expected a number > 0, received {self.ray_actor_cpus!r}"
            )
        if self.stop_return is not None and not (
            isinstance(self.stop_return, int | float) and math.isfinite(self.stop_return)
        ):
            raise ValueError(
                f"stop_return: expected a finite number, received {self.stop_return!r}"
            )
        if not (isinstance(self.stop_grace_s, int | float) and self.stop_grace_s > 0):
            raise ValueError(
                f"stop_grace_s: expected a number of seconds > 0, received {self.stop_grace_s!r}"
            )
        for name in ("checkpoint_every_s", "log_every_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and value > 0):
                raise ValueError(f"{name}: expected a number > 0, received {value!r}")

    @property
    def row_every_steps(self) -> int:
        """Env steps between metrics rows: ``log_every_steps``, or (0: auto) every hundredth
        of ``total_steps``."""
        return self.log_every_steps or max(self.total_steps // 100, 1)

    @property
    def row_every_s(self) -> float | None:
        """Seconds between metrics rows at the latest (besides :attr:`row_every_steps`), or
        None when rows follow steps only (``log_every_steps`` set, or ``deterministic``)."""
        if self.log_every_steps or self.deterministic:
            return None
        return self.log_every_s

    @property
    def steps_per_update(self) -> int:
        """Environment steps consumed by one learner update: T * B * batch_unrolls."""
        return self.unroll_length * self.num_envs * self.batch_unrolls
