"""Evaluate an exported policy: ``python -m experiments.evaluate --policy=DIR/policy --env=ID``.

Loads the SavedModel of DESIGN.md's export contract with plain ``tf.saved_model.load`` (nothing
of the training run is needed), runs ``--episodes`` episodes on ``--num_envs`` vectorized
environments (NEXT_STEP autoreset, see ``tfagents_vtrace.envs``), prints one line per episode
and ends with one JSON line: ``{"mean", "std", "min", "max", "episodes", ...}``.

Recurrent policies are driven as in training (Espeholt et al., "IMPALA", 2018,
https://arxiv.org/abs/1802.01561; Wang et al., "Learning to reinforcement learn", 2016,
https://arxiv.org/abs/1611.05763): the state returned by each call is fed to the next,
``first`` marks the first step of an episode (the policy resets its state there), and the
previous action and reward (zeros at ``first``) are fed alongside the observation.

Episodes are spread over the environments as evenly as possible and each environment stops
contributing once it has run its share, so short episodes are not over-sampled.

Bad flags end with one line on stderr and exit code 2 (``experiments.cli``): the counts, the
``--policy`` directory, the ``--env`` id, and whether the env's observation and action spaces
are those the policy was exported for (its input signature and ``metadata``).
"""

import time

START_TIME = time.time()

import json  # noqa: E402
import os  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from experiments.cli import FlagError, check_int, reports_flag_errors, run  # noqa: E402

FLAGS = flags.FLAGS


class PolicyRunner:
    """Steps a loaded SavedModel policy over a batch of B environments.

    ``act(observation [B, ...], first [B] bool) -> action [B, ...]`` (numpy). Keeps the
    recurrent state and the previous action / reward; call :meth:`observe_reward` with the
    rewards ``[B]`` returned by the environment after each step.
    """

    def __init__(self, policy: Any, batch_size: int, greedy: bool = True):
        import tensorflow as tf

        self._tf = tf
        self.policy = policy
        self.batch_size = batch_size
        self._fn = policy.greedy_action if greedy else policy.action
        specs = _input_specs(self._fn)
        self.obs_dtype = specs["observation"].dtype.as_numpy_dtype
        act_spec = specs["prev_action"]
        self.action_dtype = act_spec.dtype.as_numpy_dtype
        self.prev_action = np.zeros([batch_size, *act_spec.shape[1:]], self.action_dtype)
        self.prev_reward = np.zeros([batch_size], np.float32)
        self.state = policy.get_initial_state(batch_size=tf.constant(batch_size, tf.int32))

    def act(self, observation: np.ndarray, first: np.ndarray) -> np.ndarray:
        """One policy step; previous action / reward are zeroed where ``first``."""
        first = np.asarray(first, bool)
        if observation.shape[0] != self.batch_size or first.shape != (self.batch_size,):
            raise ValueError(
                f"observation/first: expected batch {self.batch_size}, received "
                f"{observation.shape} / {first.shape}"
            )
        self.prev_action[first] = 0
        self.prev_reward[first] = 0.0
        out = self._fn(
            observation=self._tf.constant(np.asarray(observation, self.obs_dtype)),
            first=self._tf.constant(first),
            prev_action=self._tf.constant(self.prev_action),
            prev_reward=self._tf.constant(self.prev_reward),
            state=self.state,
        )
        self.state = out["state"]
        action = out["action"].numpy()
        self.prev_action = np.array(action, self.action_dtype)
        return action

    def observe_reward(self, reward: np.ndarray) -> None:
        """Records the rewards ``[B]`` of the last step (fed as prev_reward next)."""
        self.prev_reward = np.asarray(reward, np.float32).copy()


def _input_specs(fn: Any) -> dict:
    """Name -> TensorSpec of a restored tf.function's inputs (observation, prev_action...)."""
    concrete = fn.concrete_functions[0]
    args, kwargs = concrete.structured_input_signature
    specs = dict(kwargs)
    names = ("observation", "first", "prev_action", "prev_reward", "state")
    specs.update({n: a for n, a in zip(names, args)})
    return specs


def _env_action(action: np.ndarray, space: Any) -> np.ndarray:
    """Casts the policy's actions to the dtype the vector env's action space holds."""
    return np.asarray(action).astype(space.dtype, copy=False)


def run_episodes(
    policy: Any,
    env_id: str,
    episodes: int,
    *,
    seed: int = 0,
    greedy: bool = True,
    num_envs: int = 8,
    env_kwargs: dict | None = None,
) -> tuple[list[float], list[int]]:
    """Runs ``episodes`` episodes of ``policy`` (a loaded SavedModel): (returns, lengths)."""
    from tfagents_vtrace.envs import make_vector_env

    if episodes < 1:
        raise ValueError(f"episodes: expected >= 1, received {episodes}")
    if num_envs < 1:
        raise ValueError(f"num_envs: expected >= 1, received {num_envs}")
    b = min(num_envs, episodes)
    env = make_vector_env(env_id, b, seed, **(env_kwargs or {}))
    targets = np.array([(episodes + i) // b for i in range(b)])  # episodes per environment
    counts = np.zeros(b, np.int64)
    runner = PolicyRunner(policy, b, greedy=greedy)
    obs, _ = env.reset()
    first = np.ones(b, bool)
    prev_done = np.zeros(b, bool)
    ret = np.zeros(b)
    length = np.zeros(b, np.int64)
    returns, lengths = [], []
    while (counts < targets).any():
        action = runner.act(obs, first)
        obs, reward, term, trunc, _ = env.step(_env_action(action, env.action_space))
        runner.observe_reward(reward)
        live = ~prev_done  # reset steps (after an end) belong to no episode
        ret[live] += reward[live]
        length[live] += 1
        done = (term | trunc) & live
        for i in np.flatnonzero(done):
            if counts[i] < targets[i]:
                returns.append(float(ret[i]))
                lengths.append(int(length[i]))
                counts[i] += 1
        ret[done] = 0.0
        length[done] = 0
        first = prev_done  # the step after a reset step observes a new episode's start
        prev_done = done
    env.close()
    return returns, lengths


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


def policy_io(policy: Any) -> dict:
    """What a loaded policy takes: observation shape / dtype and its kind of actions.

    Shapes and dtypes come from the input signature of ``greedy_action`` (every policy of the
    export contract has one); ``num_actions`` from the JSON ``metadata`` when the policy
    carries it (``tfagents_vtrace.export``), else None.

    Returns:
      ``{"observation_shape": tuple, "observation_dtype": np.dtype, "discrete": bool,
      "num_actions": int | None, "action_shape": tuple}``.
    """
    specs = _input_specs(policy.greedy_action)
    obs, act = specs["observation"], specs["prev_action"]
    meta = json.loads(policy.metadata.numpy()) if hasattr(policy, "metadata") else {}
    discrete = bool(meta.get("is_discrete", act.dtype.is_integer))
    return {
        "observation_shape": tuple(obs.shape[1:]),
        "observation_dtype": np.dtype(obs.dtype.as_numpy_dtype),
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
    obs_shape = tuple(observation_space.shape or ())
    if obs_shape != io["observation_shape"]:
        raise FlagError(
            "env",
            f"{env_id} gives observations of shape {obs_shape}, {where} expects "
            f"{io['observation_shape']}",
        )
    if _numeric_kind(observation_space.dtype) != _numeric_kind(io["observation_dtype"]):
        raise FlagError(
            "env",
            f"{env_id} gives {np.dtype(observation_space.dtype).name} observations, {where} "
            f"expects {io['observation_dtype'].name}",
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


def check_flags(policy: str, episodes: int, num_envs: int, env_kwargs: str) -> dict:
    """Validates the flags that need no TensorFlow; returns the parsed ``--env_kwargs``."""
    check_int("episodes", episodes, 1)
    check_int("num_envs", num_envs, 1)
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
    flags.DEFINE_string("env", None, "gymnasium environment id.")
    flags.DEFINE_integer("episodes", 20, "Episodes to run.")
    flags.DEFINE_integer("seed", 0, "Seed of the environments (and of sampling).")
    flags.DEFINE_bool("greedy", True, "Greedy (mode) actions; false samples the policy.")
    flags.DEFINE_integer("num_envs", 8, "Vectorized environments (at most --episodes).")
    flags.DEFINE_string("env_kwargs", "{}", "JSON dict passed to the environment constructor.")
    flags.mark_flags_as_required(["policy", "env"])


@reports_flag_errors
def main(argv: list[str]) -> None:
    del argv
    env_kwargs = check_flags(FLAGS.policy, FLAGS.episodes, FLAGS.num_envs, FLAGS.env_kwargs)
    observation_space, action_space = env_spaces(FLAGS.env, env_kwargs)
    import tensorflow as tf

    tf.random.set_seed(FLAGS.seed)
    policy = tf.saved_model.load(FLAGS.policy)
    check_policy_env(policy_io(policy), FLAGS.env, observation_space, action_space, FLAGS.policy)
    returns, lengths = run_episodes(
        policy,
        FLAGS.env,
        FLAGS.episodes,
        seed=FLAGS.seed,
        greedy=FLAGS.greedy,
        num_envs=FLAGS.num_envs,
        env_kwargs=env_kwargs,
    )
    for i, (r, n) in enumerate(zip(returns, lengths)):
        print(f"episode {i}: return {r:.3f} length {n}")
    summary = summarize(returns)
    summary.update(
        mean_length=float(np.mean(lengths)),
        env=FLAGS.env,
        greedy=FLAGS.greedy,
        seed=FLAGS.seed,
        wall_time=time.time() - START_TIME,
    )
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    define_flags()
    run(main)
