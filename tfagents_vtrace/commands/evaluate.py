"""Evaluate an exported policy: ``tfv-evaluate --policy=DIR/policy --env=ID``.

Loads the SavedModel of the policy-module contract (``tfagents_vtrace.export.policy_module``)
with plain ``tf.saved_model.load`` (nothing of the training run is needed), runs
``--episodes`` episodes on ``--num_envs`` vectorized environments (NEXT_STEP autoreset, see
``tfagents_vtrace.envs``), prints one line per episode and ends with one JSON line:
``{"mean", "std", "min", "max", "episodes", ...}``.

Recurrent policies are driven as in training (Espeholt et al., "IMPALA", 2018,
https://arxiv.org/abs/1802.01561; Wang et al., "Learning to reinforcement learn", 2016,
https://arxiv.org/abs/1611.05763): the state returned by each call is fed to the next,
``first`` marks the first step of an episode (the policy resets its state there), and the
previous action and reward (zeros at ``first``) are fed alongside the observation.

Episodes are spread over the environments as evenly as possible and each environment stops
contributing once it has run its share, so short episodes are not over-sampled.

``--video=DIR`` records every episode of the first environment (``--episodes // --num_envs``
of them; all with ``--num_envs=1``) as ``DIR/episode-0.mp4``, ``episode-1.mp4``, ...
(:mod:`tfagents_vtrace.export.video`, the ``video`` extra); the JSON line lists them under
``videos``. The environments are then a sync vector made with ``render_mode="rgb_array"``.
A missing extra, an existing file of the recording and an environment that does not render
RGB images are one line naming ``--video`` (exit code 2).

Bad flags end with one line on stderr and exit code 2 (``commands.cli``): the counts, the
``--policy`` directory, the ``--env`` id, and whether the env's observation and action spaces
are those the policy was exported for (its input signature and ``metadata``). A ``--policy``
whose files are damaged (a truncated ``saved_model.pb``, a missing ``variables/``) ends with
one line naming it and the cause, and exit code 1 (``export.playing.PolicyLoadError``).
"""

import time

START_TIME = time.time()

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from tfagents_vtrace.commands.cli import (  # noqa: E402
    FlagError,
    check_int,
    fault,
    reports_flag_errors,
    run,
)
from tfagents_vtrace.export.playing import (  # noqa: E402
    input_specs,
    outcome_rates,
    run_episodes,
    summarize,
)

FLAGS = flags.FLAGS


def policy_io(policy: Any) -> dict:
    """What a loaded policy takes: observation shape / dtype and its kind of actions.

    Shapes and dtypes come from the input signature of ``greedy_action`` (every policy of the
    export contract has one); ``num_actions`` from the JSON ``metadata`` when the policy
    carries it (``tfagents_vtrace.export.actor_critic``), else None.

    Returns:
      ``{"observation_shape": tuple, "observation_dtype": np.dtype, "discrete": bool,
      "num_actions": int | None, "action_shape": tuple}``; for a ``Dict`` / ``Tuple``
      observation, ``observation_shape`` and ``observation_dtype`` are lists, one per leaf
      (dict keys sorted).
    """
    import tensorflow as tf

    specs = input_specs(policy.greedy_action)
    obs, act = specs["observation"], specs["prev_action"]
    meta = json.loads(policy.metadata.numpy()) if hasattr(policy, "metadata") else {}
    discrete = bool(meta.get("is_discrete", act.dtype.is_integer))
    leaves = tf.nest.flatten(obs)
    shapes = [tuple(s.shape[1:]) for s in leaves]
    dtypes = [np.dtype(s.dtype.as_numpy_dtype) for s in leaves]
    nested = not isinstance(obs, tf.TensorSpec)
    return {
        "observation_shape": shapes if nested else shapes[0],
        "observation_dtype": dtypes if nested else dtypes[0],
        "discrete": discrete,
        "num_actions": meta.get("num_actions") if discrete else None,
        "action_shape": tuple(act.shape[1:]),
    }


def _actions(discrete: bool, num_actions: int | None, shape: tuple) -> str:
    if discrete:
        return f"{num_actions} discrete actions" if num_actions else "discrete actions"
    return f"continuous actions of shape {shape}"


def _numeric_kind(dtype: Any) -> str:
    """ "float" or "integer" (bool, signed and unsigned ints feed the same int inputs)."""
    return "float" if np.dtype(dtype).kind in "fc" else "integer"


def _space_leaves(space: Any) -> list:
    """The leaf spaces of ``space`` (``Dict`` keys sorted, as ``tf.nest`` orders them)."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Dict):
        return [leaf for k in sorted(space.spaces) for leaf in _space_leaves(space[k])]
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for sub in space.spaces for leaf in _space_leaves(sub)]
    return [space]


def check_policy_env(
    io: dict, env_id: str, observation_space: Any, action_space: Any, policy_path: str
) -> None:
    """Raises FlagError("env") when the env's spaces are not those of the policy.

    Args:
      io: :func:`policy_io` of the policy.
      env_id, observation_space, action_space: the environment (single, unbatched spaces).
      policy_path: named in the message.
    """
    import gymnasium as gym

    where = f"the policy at {policy_path}"
    spaces = _space_leaves(observation_space)
    obs_shape = [tuple(s.shape or ()) for s in spaces]
    expected = io["observation_shape"]
    if not isinstance(expected, list):
        obs_shape = obs_shape[0] if len(obs_shape) == 1 else obs_shape
    if obs_shape != expected:
        raise FlagError(
            "env",
            f"{env_id} gives observations of shape {obs_shape}, {where} expects {expected}",
        )
    from tfagents_vtrace.networks.multi_input import leaf_spec

    dtypes = io["observation_dtype"]
    for space, dtype in zip(spaces, dtypes if isinstance(dtypes, list) else [dtypes]):
        # what a policy trained on this env takes for the leaf: uint8 images, int32 ids, and
        # float32 for any other Box (an int8 board or action mask is fed cast, exactly)
        fed = leaf_spec(space, "observation").dtype.as_numpy_dtype
        if _numeric_kind(fed) != _numeric_kind(dtype) or (fed == np.uint8) != (dtype == np.uint8):
            raise FlagError(
                "env",
                f"{env_id} gives {np.dtype(space.dtype).name} observations, {where} "
                f"expects {dtype.name}",
            )
    env_discrete = isinstance(action_space, gym.spaces.Discrete)
    env_n = int(action_space.n) if env_discrete else None
    act_shape = tuple(action_space.shape or ())
    same = env_discrete == io["discrete"] and (
        (env_discrete and io["num_actions"] in (None, env_n))
        or (not env_discrete and act_shape == io["action_shape"])
    )
    if not same:
        theirs = _actions(io["discrete"], io["num_actions"], io["action_shape"])
        raise FlagError(
            "env",
            f"{env_id} takes {_actions(env_discrete, env_n, act_shape)}, {where} gives {theirs}",
        )


def check_flags(
    policy: str, episodes: int, num_envs: int, env_kwargs: str, video: str | None = None
) -> dict:
    """Validates the flags that need no TensorFlow; returns the parsed ``--env_kwargs``."""
    check_int("episodes", episodes, 1)
    check_int("num_envs", num_envs, 1)
    if video is not None:
        from tfagents_vtrace.export import video as video_lib
        from tfagents_vtrace.export.playing import recorded_episodes

        try:
            video_lib.check_video_extra("video")
            video_lib.check_video_dir(video, recorded_episodes(episodes, num_envs), "video")
        except ValueError as e:
            raise FlagError("video", str(e).partition(": ")[2]) from None
    if not os.path.exists(policy):
        raise FlagError("policy", f"no such file or directory: {policy}")
    if not os.path.isfile(os.path.join(policy, "saved_model.pb")):
        raise FlagError("policy", f"no SavedModel at {policy} (expected {policy}/saved_model.pb)")
    try:
        kwargs = json.loads(env_kwargs)
    except json.JSONDecodeError as e:
        message = f"expected a JSON object, received {env_kwargs!r} ({e})"
        raise FlagError("env_kwargs", message) from e
    if not isinstance(kwargs, dict):
        raise FlagError("env_kwargs", f"expected a JSON object, received {env_kwargs!r}")
    return kwargs


def env_spaces(env_id: str, env_kwargs: dict) -> tuple[Any, Any]:
    """(observation_space, action_space) of one ``env_id`` env.

    Raises:
      FlagError: ``--env`` when the id is unknown; ``--env_kwargs`` when the environment's
        constructor refuses them (an unexpected or bad keyword: TypeError / ValueError).
    """
    import gymnasium as gym

    import tfagents_vtrace.envs as envs  # registers the project's env ids

    try:
        env = envs.make_env(env_id, **env_kwargs)
    except gym.error.Error as e:
        raise FlagError("env", f"{env_id}: {e}") from e
    except (TypeError, ValueError) as e:
        if not env_kwargs:
            raise
        message = f"{env_id} does not accept {json.dumps(env_kwargs)}: {e}"
        raise FlagError("env_kwargs", message.splitlines()[0]) from e
    spaces = env.observation_space, env.action_space
    env.close()
    return spaces


def define_flags() -> None:
    """Declares the flags of this entry point."""
    flags.DEFINE_string("policy", None, "Path of the exported SavedModel policy.")
    flags.DEFINE_string(
        "env", None, "gymnasium environment id; 'package.module:Env-v0' imports the module."
    )
    flags.DEFINE_integer("episodes", 20, "Episodes to run.")
    flags.DEFINE_integer("seed", 0, "Seed of the environments (and of sampling).")
    flags.DEFINE_bool("greedy", True, "Greedy (mode) actions; false samples the policy.")
    flags.DEFINE_integer("num_envs", 8, "Vectorized environments (at most --episodes).")
    flags.DEFINE_string("env_kwargs", "{}", "JSON dict passed to the environment constructor.")
    flags.DEFINE_string(
        "video",
        None,
        "Directory to record episodes into, as MP4 files episode-0.mp4, episode-1.mp4, ...: "
        "every episode of the first environment (--episodes // --num_envs of them; all with "
        "--num_envs=1), rendered with render_mode='rgb_array'. Needs the video extra: pip "
        "install 'tfagents_vtrace[video]'.",
    )
    flags.mark_flags_as_required(["policy", "env"])


@reports_flag_errors
def main(argv: list[str]) -> None:
    del argv
    env_kwargs = check_flags(
        FLAGS.policy, FLAGS.episodes, FLAGS.num_envs, FLAGS.env_kwargs, FLAGS.video
    )
    from tfagents_vtrace.envs.user_envs import resolve_env

    try:  # module:Env-v0 imports the module it names
        FLAGS.env = resolve_env(FLAGS.env)
    except ValueError as e:
        raise FlagError("env", str(e).partition(": ")[2]) from None
    observation_space, action_space = env_spaces(FLAGS.env, env_kwargs)
    import tensorflow as tf

    from tfagents_vtrace.export.playing import PolicyLoadError, load_policy

    tf.random.set_seed(FLAGS.seed)
    try:
        policy = load_policy(FLAGS.policy)
    except PolicyLoadError as e:
        if not e.damaged:  # a directory that is no exported policy: a bad --policy
            raise FlagError("policy", str(e).partition(": ")[2]) from None
        fault(f"--{e}")
    io = policy_io(policy.saved_model)
    check_policy_env(io, FLAGS.env, observation_space, action_space, FLAGS.policy)
    outcomes: list[int] = []
    try:
        returns, lengths = run_episodes(
            policy,
            FLAGS.env,
            FLAGS.episodes,
            seed=FLAGS.seed,
            greedy=FLAGS.greedy,
            num_envs=FLAGS.num_envs,
            env_kwargs=env_kwargs,
            video_dir=FLAGS.video,
            outcomes=outcomes,
        )
    except ValueError as e:
        name = {"video_dir": "video", "env": "env"}.get(str(e).partition(": ")[0])
        if name is None:
            raise
        raise FlagError(name, str(e).partition(": ")[2]) from None
    for i, (r, n) in enumerate(zip(returns, lengths)):
        print(f"episode {i}: return {r:.3f} length {n}")
    summary = summarize(returns)
    summary.update(
        mean_length=float(np.mean(lengths)),
        env=FLAGS.env,
        greedy=FLAGS.greedy,
        seed=FLAGS.seed,
        wall_time=time.time() - START_TIME,
        **outcome_rates(outcomes, len(returns)),
    )
    if FLAGS.video is not None:
        from tfagents_vtrace.export.playing import recorded_episodes
        from tfagents_vtrace.export.video import video_paths

        count = recorded_episodes(FLAGS.episodes, FLAGS.num_envs)
        summary["videos"] = video_paths(FLAGS.video, count)
    print(json.dumps(summary), flush=True)


def entry_point() -> None:
    """The ``tfv-evaluate`` command (``python -m experiments.evaluate`` in a clone)."""
    define_flags()
    run(main, command=sys.modules[__name__])


if __name__ == "__main__":
    entry_point()
