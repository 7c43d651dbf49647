"""Playing an exported policy: a SavedModel of the policy-module contract
(:mod:`tfagents_vtrace.export.policy_module`) stepped in environments, with the recurrent
bookkeeping done for the caller.

A policy takes, besides the observation, ``first`` (the step starts an episode: the policy
resets its state there), the previous action and the previous reward (zeros at ``first``),
and the recurrent ``state`` its previous call returned (Espeholt et al., "IMPALA", 2018,
https://arxiv.org/abs/1802.01561; Wang et al., "Learning to reinforcement learn", 2016,
https://arxiv.org/abs/1611.05763). :class:`Policy` keeps all of it::

    policy = load_policy("runs/mine/policy")
    state = policy.initial_state()                  # batch of one
    obs, _ = env.reset()
    action, state = policy.step(obs, state)          # first step of an episode
    obs, reward, terminated, truncated, _ = env.step(action)
    action, state = policy.step(obs, state, reward=reward)

Observations may be single (the policy's shapes) or batched (a leading batch dimension);
``Dict`` / ``Tuple`` observations are dicts / tuples of arrays. :func:`run_episodes` plays whole
episodes on vectorized environments, :func:`evaluate` summarises them.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import numpy as np


def input_specs(fn: Any) -> dict:
    """Name -> TensorSpec (or nest of them) of a restored tf.function's inputs."""
    concrete = fn.concrete_functions[0]
    args, kwargs = concrete.structured_input_signature
    specs = dict(kwargs)
    names = ("observation", "first", "prev_action", "prev_reward", "state")
    specs.update({n: a for n, a in zip(names, args)})
    return specs


def _map(fn, structure):
    import tensorflow as tf

    return tf.nest.map_structure(fn, structure)


@dataclasses.dataclass
class PolicyState:
    """What a policy carries from one step to the next, per batch entry: the recurrent
    ``core`` state, the previous action and reward, and whether the next step starts an
    episode."""

    core: Any
    prev_action: np.ndarray
    prev_reward: np.ndarray
    first: np.ndarray


class Policy:
    """A loaded SavedModel policy (``tf.saved_model.load``) with its bookkeeping.

    ``policy`` is the loaded object; ``path`` where it came from (named in errors).
    """

    def __init__(self, policy: Any, path: str = "policy"):
        import tensorflow as tf

        self._tf, self.saved_model, self.path = tf, policy, path
        specs = input_specs(policy.greedy_action)
        self.observation_spec = specs["observation"]
        self._action_spec = specs["prev_action"]
        self.metadata = json.loads(policy.metadata.numpy()) if hasattr(policy, "metadata") else {}

    def initial_state(self, batch_size: int = 1) -> PolicyState:
        """The state before the first step of ``batch_size`` episodes."""
        tf, spec = self._tf, self._action_spec
        core = self.saved_model.get_initial_state(batch_size=tf.constant(batch_size, tf.int32))
        return PolicyState(
            core=core,
            prev_action=np.zeros([batch_size, *spec.shape[1:]], spec.dtype.as_numpy_dtype),
            prev_reward=np.zeros([batch_size], np.float32),
            first=np.ones([batch_size], bool),
        )

    def _batched(self, observation: Any) -> tuple[Any, bool]:
        """``observation`` with a batch dimension, and whether one was added."""
        import tensorflow as tf

        leaves = tf.nest.flatten(observation)
        specs = tf.nest.flatten(self.observation_spec)
        single = np.ndim(leaves[0]) == len(specs[0].shape) - 1
        cast = [
            np.asarray(x, s.dtype.as_numpy_dtype)[None]
            if single
            else np.asarray(x, s.dtype.as_numpy_dtype)
            for x, s in zip(leaves, specs, strict=True)
        ]
        return tf.nest.pack_sequence_as(self.observation_spec, cast), single

    def step(
        self,
        observation: Any,
        state: PolicyState | None = None,
        *,
        reward: Any = None,
        first: Any = None,
        greedy: bool = False,
    ) -> tuple[np.ndarray, PolicyState]:
        """``(action, state)`` for ``observation``. A ``Box`` action is in the action space's
        bounds, sampled or greedy: the exported policy clips its draw (and its mean) there
        (:func:`tfagents_vtrace.export.actor_critic.clip_to_bounds`), and the next step's
        previous action is that clipped action.

        Args:
          observation: one observation, or a batch of them.
          state: what the previous call returned (None: a new episode of this batch size).
          reward: the reward the previous action earned (fed as the previous reward).
          first: marks steps that start an episode (after a reset); by default only the first
            step of a new ``state`` does.
          greedy: the mode of the policy instead of a sample.
        """
        tf = self._tf
        obs, single = self._batched(observation)
        batch = int(tf.nest.flatten(obs)[0].shape[0])
        state = state or self.initial_state(batch)
        is_first = state.first if first is None else np.asarray(first, bool).reshape([batch])
        prev_action, prev_reward = state.prev_action.copy(), state.prev_reward.copy()
        if reward is not None:
            prev_reward = np.asarray(reward, np.float32).reshape([batch])
        prev_action[is_first] = 0
        prev_reward[is_first] = 0.0
        fn = self.saved_model.greedy_action if greedy else self.saved_model.action
        out = fn(
            observation=_map(tf.constant, obs),
            first=tf.constant(is_first),
            prev_action=tf.constant(prev_action),
            prev_reward=tf.constant(prev_reward),
            state=state.core,
        )
        action = out["action"].numpy()
        new_state = PolicyState(
            core=out["state"],
            prev_action=np.array(action, prev_action.dtype),
            prev_reward=prev_reward,
            first=np.zeros([batch], bool),
        )
        return (action[0] if single else action), new_state


class PolicyLoadError(ValueError):
    """The directory given as a policy holds no policy that loads: ``damaged`` when its files
    are cut or missing (a fault: export it again), else it is no exported policy at all (no
    SavedModel, or one without the export contract's ``greedy_action``). ``str(error)`` is
    one line naming the path and the cause."""

    def __init__(self, path: str, cause: str, damaged: bool):
        self.path, self.damaged = path, damaged
        super().__init__(f"policy: cannot load {path!r}: {cause}")


def _load_problem(path: str, error: BaseException) -> tuple[str, bool]:
    """``(cause, damaged)`` of a SavedModel at ``path`` that failed to load with ``error``,
    from its files (TensorFlow's own message names a protobuf or a tensor slice reader)."""
    pb, variables = os.path.join(path, "saved_model.pb"), os.path.join(path, "variables")
    text = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
    redo = "; export it again (tfv-export --logdir=RUN --overwrite)"
    if os.path.getsize(pb) == 0:
        return "saved_model.pb is empty" + redo, True
    if "Cannot parse file" in text or "Wire format" in text:
        return "saved_model.pb is truncated or corrupt" + redo, True
    if isinstance(error, AttributeError):
        return f"not an exported policy ({text})", False
    if not os.path.isdir(variables):
        return "its variables/ directory is missing" + redo, True
    if not os.path.isfile(os.path.join(variables, "variables.index")):
        return "variables/variables.index is missing" + redo, True
    return f"its files do not read back ({type(error).__name__}: {text})" + redo, True


def load_policy(path: str | os.PathLike) -> Policy:
    """The exported policy at ``path`` (a SavedModel directory) as a :class:`Policy`.

    Raises:
      PolicyLoadError: (a ValueError) naming ``path`` when it holds no SavedModel, one whose
        files are cut or missing (``damaged``), or one that is not an exported policy.
    """
    from tfagents_vtrace.utils.tf_paths import load_saved_model

    path = os.fspath(path)
    if not os.path.isfile(os.path.join(path, "saved_model.pb")):
        raise PolicyLoadError(path, f"no SavedModel (expected {path}/saved_model.pb)", False)
    try:
        return Policy(load_saved_model(path), path)
    except Exception as e:  # noqa: BLE001 - TensorFlow raises OSError, ValueError, IndexError...
        cause, damaged = _load_problem(path, e)
        raise PolicyLoadError(path, cause, damaged) from e


def as_policy(policy: Any) -> Policy:
    """A :class:`Policy` of a path, a loaded SavedModel or a :class:`Policy`."""
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, str | os.PathLike):
        return load_policy(policy)
    return Policy(policy)


def recorded_episodes(episodes: int, num_envs: int) -> int:
    """How many episodes a recording evaluation records: every episode of its first
    environment, ``episodes // min(num_envs, episodes)`` (all of them with one env)."""
    return episodes // min(num_envs, episodes)


def run_episodes(
    policy: Any,
    env_id: str,
    episodes: int,
    *,
    seed: int = 0,
    greedy: bool = True,
    num_envs: int = 8,
    env_kwargs: dict | None = None,
    video_dir: str | os.PathLike | None = None,
    outcomes: list | None = None,
) -> tuple[list[float], list[int]]:
    """Plays ``episodes`` episodes of ``policy`` (:func:`as_policy`) on up to ``num_envs``
    vectorized ``env_id`` environments; returns ``(returns, lengths)``. Episodes are spread
    over the environments as evenly as possible and each environment stops contributing once
    it has run its share, so short episodes are not over-sampled.

    With ``video_dir``, the environments are a sync vector made with
    ``render_mode="rgb_array"`` and every episode of the first one
    (:func:`recorded_episodes`) is written to ``video_dir/episode-<k>.mp4``
    (:mod:`tfagents_vtrace.export.video`; the ``video`` extra). ValueError naming
    ``video_dir`` for a missing extra, an existing file, or an environment that does not
    render RGB images."""
    from tfagents_vtrace.envs import env_action, make_vector_env

    if episodes < 1:
        raise ValueError(f"episodes: expected >= 1, received {episodes}")
    if num_envs < 1:
        raise ValueError(f"num_envs: expected >= 1, received {num_envs}")
    from tfagents_vtrace.envs import turn_games
    from tfagents_vtrace.envs.multi_agent import game_groups

    if turn_games.is_self_play(env_id, env_kwargs) and not turn_games.has_snapshot_source():
        raise ValueError(
            f"env: {env_id} plays against opponent 'self', snapshots of a policy being "
            "trained that exist only inside its training run; evaluate against a fixed "
            "opponent instead (env_kwargs {'opponent': 'random'}, or 'lookahead')"
        )
    groups = game_groups(env_id, env_kwargs)
    if groups is not None and (len(groups) > 1 or "agent_groups" in (env_kwargs or {})):
        raise ValueError(
            f"env: {env_id} is a game of several groups of agents ({', '.join(groups)}), each "
            "with its own policy; one policy cannot play it (its training run's evaluations "
            "play every group's)"
        )
    b = min(num_envs, episodes)
    targets = np.array([(episodes + i) // b for i in range(b)])  # episodes per environment
    if video_dir is not None:
        from tfagents_vtrace.export import video

        video.check_video_extra()
        video.check_video_dir(video_dir, int(targets[0]))
    policy = as_policy(policy)
    if video_dir is None:
        env = make_vector_env(env_id, b, seed, **(env_kwargs or {}))
    else:
        env = _recording_vector(env_id, b, seed, env_kwargs or {}, video_dir, int(targets[0]))
    holder = {"state": policy.initial_state(b)}

    def act(obs, first, reward, running):
        action, holder["state"] = policy.step(
            obs, holder["state"], reward=reward, first=first, greedy=greedy
        )
        return env_action(action, env.action_space)

    try:
        obs, info = env.reset()
        if env.num_envs != b:  # a vector of games has a whole number of games' columns
            targets = np.array([(episodes + i) // env.num_envs for i in range(env.num_envs)])
            holder["state"] = policy.initial_state(env.num_envs)
        return play(env, obs, act, targets, reset_info=info, outcomes=outcomes)
    finally:
        env.close()


def _recording_vector(env_id, num_envs, seed, env_kwargs, video_dir, episodes):
    """A sync vector of ``env_id`` made with ``render_mode="rgb_array"``, recording the first
    ``episodes`` episodes of its first environment into ``video_dir``."""
    from tfagents_vtrace.envs import make_vector_env
    from tfagents_vtrace.export.video import RecordFirst

    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        # No display: pygame (the classic-control renderer) draws off screen without SDL's
        # complaint about a missing XDG_RUNTIME_DIR.
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    kwargs = {**env_kwargs, "render_mode": "rgb_array"}
    try:
        env = make_vector_env(env_id, num_envs, seed, mode="sync", **kwargs)
    except TypeError as e:
        if "render_mode" not in str(e):
            raise
        raise ValueError(
            f"video_dir: {env_id} takes no render_mode, so its episodes cannot be recorded"
        ) from e
    try:
        return RecordFirst(env, env_id, video_dir, episodes)
    except BaseException:
        env.close()
        raise


def play(env, obs, act, targets, max_steps: int | None = None, reset_info: dict | None = None,
         outcomes: list | None = None):  # fmt: skip
    """The episode loop of every evaluation (training's greedy evaluations, ``tv.evaluate``,
    ``tfv-evaluate``): steps vector env ``env`` (NEXT_STEP autoreset, first observations
    ``obs``) with ``act(obs, first, reward, running) -> actions`` until sub-environment ``i``
    has played ``targets[i]`` episodes; returns ``(returns, lengths)`` of those episodes, in
    the order they ended.

    ``first`` marks the observations that start an episode, ``reward`` is the previous
    step's (None at the start), ``running`` which sub-environments still play an episode
    that counts. The step after an episode's end (autoreset's reset step) belongs to no
    episode, nor does one that the step before reported in ``infos["tfv_inactive"]`` (an
    agent out of its game: :mod:`tfagents_vtrace.envs.multi_agent`; ``reset_info``, the
    reset's infos, reports the first step's). After ``max_steps`` steps (a safety cap), the
    episodes still counting are returned as they stand.

    ``outcomes``: a list that receives, in the same order as the returns, the ``outcome`` the
    environment's info reports at the end of each episode (a game's 1 win, 0 draw, -1 loss:
    :mod:`tfagents_vtrace.envs.turn_games`), for the episodes that report one.
    """
    from tfagents_vtrace.envs.multi_agent import INACTIVE
    from tfagents_vtrace.envs.turn_games import OUTCOME

    b = len(targets)
    counts = np.zeros(b, np.int64)
    first, skip_next = np.ones(b, bool), np.zeros(b, bool)
    if reset_info and INACTIVE in reset_info:
        skip_next = np.asarray(reset_info[INACTIVE], bool)
    ret, length = np.zeros(b), np.zeros(b, np.int64)
    returns, lengths, reward, steps = [], [], None, 0
    while (counts < targets).any():
        if max_steps is not None and steps >= max_steps:
            for i in np.flatnonzero(counts < targets):
                returns.append(float(ret[i]))
                lengths.append(int(length[i]))
            break
        action = act(obs, first, reward, counts < targets)
        obs, reward, term, trunc, info = env.step(action)
        steps += 1
        live = ~skip_next  # reset steps (after an end) and absent agents' belong to no episode
        ret[live] += reward[live]
        length[live] += 1
        done = (term | trunc) & live
        for i in np.flatnonzero(done):
            if counts[i] < targets[i]:
                returns.append(float(ret[i]))
                lengths.append(int(length[i]))
                counts[i] += 1
                if outcomes is not None and _reported(info, OUTCOME, i):
                    outcomes.append(int(info[OUTCOME][i]))
        ret[done], length[done] = 0.0, 0
        first = skip_next  # the step after a skipped step observes a new episode's start
        skip_next = done
        if info and INACTIVE in info:  # agents out of their game next step
            skip_next = done | np.asarray(info[INACTIVE], bool)
    return returns, lengths


def _reported(info: dict | None, key: str, i: int) -> bool:
    """Whether a vector's ``info`` holds ``key`` for sub-environment ``i`` (gymnasium's
    ``_key`` mask, when there is one)."""
    if not info or key not in info:
        return False
    mask = info.get(f"_{key}")
    return True if mask is None else bool(np.asarray(mask)[i])


def outcome_rates(outcomes: list[int], episodes: int) -> dict:
    """``win_rate``, ``draw_rate`` and ``loss_rate`` of ``outcomes`` when every one of the
    ``episodes`` reported one; else ``{}``."""
    if not outcomes or len(outcomes) != episodes:
        return {}
    o = np.asarray(outcomes)
    return {"win_rate": float(np.mean(o == 1)), "draw_rate": float(np.mean(o == 0)),
            "loss_rate": float(np.mean(o == -1))}  # fmt: skip


def summarize(returns: list[float]) -> dict:
    """mean, std, min, max and the number of episodes of a list of returns."""
    r = np.asarray(returns, np.float64)
    return {
        "mean": float(r.mean()),
        "std": float(r.std()),
        "min": float(r.min()),
        "max": float(r.max()),
        "episodes": int(r.size),
    }


def evaluate(
    policy: Any,
    env: Any,
    episodes: int = 20,
    *,
    greedy: bool = True,
    seed: int = 0,
    num_envs: int = 8,
    env_kwargs: dict | None = None,
    video_dir: str | os.PathLike | None = None,
) -> dict:
    """Plays ``episodes`` episodes of ``policy`` (a path, a loaded SavedModel or a
    :class:`Policy`) in ``env`` (an id, ``module:Env-v0``, a ``gymnasium.Env`` class or a
    function returning one); returns ``{"mean_return", "std_return", "min_return",
    "max_return", "mean_length", "episodes", "returns"}``, ``"win_rate"``, ``"draw_rate"``
    and ``"loss_rate"`` when every episode reports its ``outcome`` (a game against an
    opponent: :mod:`tfagents_vtrace.envs.turn_games`), and ``"videos"`` (their paths)
    with ``video_dir``: every episode of the first of the ``num_envs`` environments
    (:func:`recorded_episodes`, all of them with ``num_envs=1``) recorded as
    ``video_dir/episode-<k>.mp4`` (``pip install 'tfagents_vtrace[video]'``;
    :func:`run_episodes`)."""
    from tfagents_vtrace.envs.user_envs import resolve_env

    env_id = resolve_env(env)
    outcomes: list[int] = []
    returns, lengths = run_episodes(
        policy,
        env_id,
        episodes,
        seed=seed,
        greedy=greedy,
        num_envs=num_envs,
        env_kwargs=env_kwargs,
        video_dir=video_dir,
        outcomes=outcomes,
    )
    stats = summarize(returns)
    result = {
        "mean_return": stats["mean"],
        "std_return": stats["std"],
        "min_return": stats["min"],
        "max_return": stats["max"],
        "mean_length": float(np.mean(lengths)),
        "episodes": stats["episodes"],
        "returns": returns,
        **outcome_rates(outcomes, len(returns)),
    }
    if video_dir is not None:
        from tfagents_vtrace.export.video import video_paths

        result["videos"] = video_paths(video_dir, recorded_episodes(episodes, num_envs))
    return result
