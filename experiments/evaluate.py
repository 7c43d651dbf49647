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
"""

import time

START_TIME = time.time()

import json  # noqa: E402
import os  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from absl import app, flags  # noqa: E402

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


def main(argv: list[str]) -> None:
    del argv
    import tensorflow as tf

    import tfagents_vtrace.envs  # noqa: F401 - registers the project's env ids

    if not os.path.isdir(FLAGS.policy):
        raise app.UsageError(f"--policy: no SavedModel directory at {FLAGS.policy!r}")
    tf.random.set_seed(FLAGS.seed)
    policy = tf.saved_model.load(FLAGS.policy)
    returns, lengths = run_episodes(
        policy,
        FLAGS.env,
        FLAGS.episodes,
        seed=FLAGS.seed,
        greedy=FLAGS.greedy,
        num_envs=FLAGS.num_envs,
        env_kwargs=json.loads(FLAGS.env_kwargs),
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
    app.run(main)
