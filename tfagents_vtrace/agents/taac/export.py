"""SavedModel export of a TAAC/TaacL/TaacQ policy whose state carries (tau, repeat count).

Yu et al., "TAAC: Temporally Abstract Actor-Critic for Continuous Control", 2021,
https://arxiv.org/abs/2104.06521. The exported module follows DESIGN.md's policy contract
and loads with plain TensorFlow::

    policy = tf.saved_model.load(path)
    state = policy.get_initial_state(batch_size=tf.constant(B))   # (tau [B, k*A], repeats [B, 1])
    out = policy.action(observation=obs, first=first, prev_action=prev_action,
                        prev_reward=prev_reward, state=state)
    out["action"]    # [B, A] in the environment's bounds
    out["value"]     # [B] float32: beta_0 Q(s, tau^-) + beta_1 Q(s, tau_hat)
                     # (Q: the critic replicas' minimum, reward_weights-weighted over dims)
    out["b"], out["repeats"], out["p_b1"], out["state"]
    policy.greedy_action(...)   # epsilon-greedy per stage (epsilon in the metadata)

``first`` resets the trajectory and repeat count in the graph, so a loaded policy repeats
actions exactly as the training loop's :class:`~tfagents_vtrace.agents.taac.policy.TaacPolicy`
does: both draw their noise from stateless ops seeded ``[seed, call_number]``, so with the
same seed and weights the k-th calls agree. ``prev_action`` and ``prev_reward`` are accepted
for the common contract and ignored.

``action_from_noise`` (and the flat signature of that name, inputs ``..., state_1, noise,
b_noise``) takes the draws of ``action`` as inputs: ``noise`` [B, A] standard normal (the
actor's sample ``tanh(loc + exp(log_std) * noise)``) and ``b_noise`` [B] uniform in [0, 1)
(``b = 1`` iff ``b_noise < p_b1``); it starts episodes from the zero trajectory and needs no
random op (:func:`~tfagents_vtrace.agents.taac.policy.act_from_noise`). It is the sampled
step of the LiteRT and ONNX files (:mod:`tfagents_vtrace.agents.taac.portable`), whose
``greedy_action`` is this module's with ``epsilon_greedy=0`` (the mode of both stages).

``value`` is TAAC's state value of ``(s, tau^-)`` (TAAC has no separate V network): the
act-or-repeat expectation of the critic-replica minimum (weighted over reward dims) over
following the previous trajectory (``tau^-``) and switching to the trajectory of this call's
candidate action (``tau_hat``), weighted by ``beta(b | s)``, i.e. the value the critic
targets bootstrap from (with the online critics here; per reward dim in training). It is a
one-sample estimate over the candidate action of ``action`` (the greedy candidate for
``greedy_action``).
"""

from __future__ import annotations

import json
import os

import numpy as np
import tensorflow as tf

from tfagents_vtrace.agents.taac.policy import act_from_noise, act_step
from tfagents_vtrace.export import flat_serving_signatures
from tfagents_vtrace.export_target import check_export_path, write_atomically

__all__ = [
    "EXPORT_FORMATS",
    "TaacPolicyModule",
    "check_export",
    "export_run",
    "export_taac_policy",
    "restore_run",
]

EXPORT_FORMATS = ("saved_model", "tflite", "onnx")


class TaacPolicyModule(tf.Module):
    """The exported object: actor, critics, the b temperature and the acting functions.

    Args:
      learner: a trained :class:`~tfagents_vtrace.agents.taac.learner.TaacLearner`.
      action_space: the environment's Box action space (bounds of the output action).
      seed: seeds the stateless draws (call k uses ``[seed, k]``).
      epsilon_greedy, randomize_first_state_tau: override the learner's config (None: keep
        it); the portable export's reference has ``0.0`` and ``False``.
    """

    def __init__(
        self,
        learner,
        action_space,
        seed: int = 0,
        *,
        epsilon_greedy: float | None = None,
        randomize_first_state_tau: bool | None = None,
    ):
        super().__init__(name="taac_policy")
        cfg = learner.config
        self.actor, self.critics = learner.actor, learner.critics
        self.trajectory = learner.trajectory
        if randomize_first_state_tau is None:
            randomize_first_state_tau = cfg.randomize_first_state_tau
        self._kw = dict(
            max_repeat_steps=cfg.max_repeat_steps,
            randomize_first=bool(randomize_first_state_tau),
            clipping=cfg.b1_advantage_clipping,
            reward_weights=learner.reward_weights,
        )
        self._epsilon = float(cfg.epsilon_greedy if epsilon_greedy is None else epsilon_greedy)
        self.alpha_b = tf.Variable(float(np.exp(learner.log_alpha_b.numpy())), trainable=False)
        self.calls = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.seed = tf.Variable(int(seed), dtype=tf.int64, trainable=False)
        self._k, self._a = learner.trajectory.order, learner.action_dim
        # numpy, so traced graphs hold them as constants (an eager tf.constant would be a
        # captured input, which tf2onnx leaves as an unfed graph input).
        self._low = np.asarray(action_space.low, np.float32).reshape(-1)
        self._high = np.asarray(action_space.high, np.float32).reshape(-1)
        meta = {
            "policy_kind": "taac",
            "trajectory": cfg.trajectory,
            "inverse_mode": cfg.inverse_mode,
            "observation_shape": list(learner.observation_shape),
            "action_shape": [self._a],
            "action_low": np.asarray(action_space.low).reshape(-1).tolist(),
            "action_high": np.asarray(action_space.high).reshape(-1).tolist(),
            "epsilon_greedy": self._epsilon,
            "max_repeat_steps": cfg.max_repeat_steps,
            "randomize_first_state_tau": self._kw["randomize_first"],
            "b1_advantage_clipping": cfg.b1_advantage_clipping,
            "num_critic_replicas": cfg.num_critic_replicas,
            "reward_dim": cfg.reward_dim,
            "reward_weights": list(learner.reward_weights),
            "state_sizes": [self._k * self._a, 1],
            "recurrent": True,
            "observation_dtype": "float32",
            "action_dtype": "float32",
            # action_from_noise's inputs (export_parity draws them from this).
            "noise_law": "normal",
            "noise_size": self._a,
            "noise_inputs": {
                "noise": {"law": "normal", "shape": [self._a]},
                "b_noise": {"law": "uniform", "shape": []},
            },
        }
        self.metadata = tf.Variable(json.dumps(meta), trainable=False)
        self._specs = specs = [
            tf.TensorSpec([None, *learner.observation_shape], tf.float32, name="observation"),
            tf.TensorSpec([None], tf.bool, name="first"),
            tf.TensorSpec([None, self._a], tf.float32, name="prev_action"),
            tf.TensorSpec([None], tf.float32, name="prev_reward"),
            (
                tf.TensorSpec([None, self._k * self._a], tf.float32, name="state_0"),
                tf.TensorSpec([None, 1], tf.float32, name="state_1"),
            ),
        ]
        self.noise_specs = [
            tf.TensorSpec([None, self._a], tf.float32, name="noise"),
            tf.TensorSpec([None], tf.float32, name="b_noise"),
        ]
        self.get_initial_state = tf.function(
            self._initial_state, input_signature=[tf.TensorSpec([], tf.int32, name="batch_size")]
        )
        self.action = tf.function(self._action, input_signature=specs, autograph=False)
        self.greedy_action = tf.function(
            self._greedy_action, input_signature=specs, autograph=False
        )
        self.action_from_noise = tf.function(
            self._action_from_noise, input_signature=[*specs, *self.noise_specs], autograph=False
        )

    @property
    def flat_specs(self) -> list[tf.TensorSpec]:
        """observation, first, prev_action, prev_reward, state_0, state_1."""
        return [*self._specs[:4], *self._specs[4]]

    def _initial_state(self, batch_size):
        return (
            tf.zeros([batch_size, self._k * self._a], tf.float32),
            tf.zeros([batch_size, 1], tf.float32),
        )

    def _unpack(self, observation, state) -> tuple[tf.Tensor, tf.Tensor]:
        """(tau [B, k, A], repeats [B] int32) of the flat state."""
        n = tf.shape(observation)[0]
        tau = tf.reshape(state[0], [n, self._k, self._a])
        return tau, tf.cast(tf.round(state[1][:, 0]), tf.int32)

    def _step(self, observation, first, state, greedy: bool) -> dict:
        self.calls.assign_add(1)
        tau, repeats = self._unpack(observation, state)
        out = act_step(
            self.actor,
            self.critics,
            self.trajectory,
            observation,
            first,
            tau,
            repeats,
            tf.stack([self.seed, self.calls]),
            alpha_b=self.alpha_b,
            greedy=greedy,
            epsilon=self._epsilon if greedy else 0.0,
            **self._kw,
        )
        return self._outputs(observation, out)

    def noise_step(self, observation, first, state, noise=None, b_noise=None) -> dict:
        """The step of ``action_from_noise`` (greedy, epsilon 0, when both noises are None),
        in plain TF ops; the same outputs as ``action``. The portable export traces it."""
        tau, repeats = self._unpack(observation, state)
        out = act_from_noise(
            self.actor,
            self.critics,
            self.trajectory,
            observation,
            first,
            tau,
            repeats,
            alpha_b=self.alpha_b,
            noise=noise,
            b_noise=b_noise,
            max_repeat_steps=self._kw["max_repeat_steps"],
            clipping=self._kw["clipping"],
            reward_weights=self._kw["reward_weights"],
        )
        return self._outputs(observation, out)

    def _outputs(self, observation, out: dict) -> dict:
        n = tf.shape(observation)[0]
        action = self._low + (out["action"] + 1.0) * 0.5 * (self._high - self._low)
        new_state = (
            tf.reshape(out["tau"], [n, self._k * self._a]),
            tf.cast(out["repeats"], tf.float32)[:, None],
        )
        return {
            "action": action,
            "unit_action": out["action"],
            "b": out["b"],
            "repeats": out["repeats"],
            "p_b1": out["p_b1"],
            "value": out["value"],
            "state": new_state,
        }

    def serving_signatures(self) -> dict:
        """Concrete functions with flat named inputs/outputs (``state_0``, ``state_1``;
        ``noise``, ``b_noise`` for ``action_from_noise``)."""
        return flat_serving_signatures(self, self.flat_specs, self.noise_specs)

    def _action(self, observation, first, prev_action, prev_reward, state):
        del prev_action, prev_reward
        return self._step(observation, first, state, greedy=False)

    def _greedy_action(self, observation, first, prev_action, prev_reward, state):
        del prev_action, prev_reward
        return self._step(observation, first, state, greedy=True)

    def _action_from_noise(
        self, observation, first, prev_action, prev_reward, state, noise, b_noise
    ):
        del prev_action, prev_reward
        return self.noise_step(observation, first, state, noise, b_noise)


def export_taac_policy(
    learner, path: str, action_space, *, seed: int = 0, overwrite: bool = False, **overrides
) -> str:
    """Writes the TAAC policy SavedModel to ``path`` (see module docstring); returns ``path``.

    Written beside ``path`` and renamed into place, as ``export_policy`` does: a failed save
    keeps the previous policy. ``overrides``: ``epsilon_greedy`` and
    ``randomize_first_state_tau`` of :class:`TaacPolicyModule`.

    Raises:
      ValueError: ``path`` is a file, a symbolic link or a non-empty directory that is not a
        SavedModel (even with ``overwrite``), or a SavedModel and ``overwrite`` is False.
    """
    check_export_path(path, overwrite)
    module = TaacPolicyModule(learner, action_space, seed=seed, **overrides)

    def write(directory: str) -> None:
        tf.saved_model.save(module, directory, signatures=module.serving_signatures())

    return write_atomically(path, write, overwrite=overwrite)


def restore_run(logdir: str) -> tuple:
    """``(learner, action_space, env_id)`` of TAAC run directory ``logdir``: the learner
    rebuilt from ``config.json`` (TAAC config, env id) with the networks of the latest
    checkpoint.

    Raises:
      ValueError: no config.json or no checkpoint in ``logdir``, or its env id is not a
        registered gymnasium id (``config_io.read_env_id``).
    """
    from tfagents_vtrace.agents.taac.config import TaacConfig
    from tfagents_vtrace.agents.taac.learner import TaacLearner
    from tfagents_vtrace.envs import make_env
    from tfagents_vtrace.runtime.rundir import config_io
    from tfagents_vtrace.runtime.rundir.checkpointing import intact_checkpoint

    config = config_io.read_config(logdir)
    agent_config = config_io.dataclass_from_dict(TaacConfig, config["agent_config"])
    env_id = config_io.read_env_id(config, logdir)  # a registered id: data, not code
    env = make_env(env_id)
    try:
        obs_shape, space = env.observation_space.shape, env.action_space
    finally:
        env.close()
    seed = int(config["run_config"].get("seed", 0))
    learner = TaacLearner(agent_config, obs_shape, int(np.prod(space.shape)), seed=seed)
    with intact_checkpoint(logdir) as latest:
        status = tf.train.Checkpoint(**learner.checkpoint_items()).restore(latest)
        status.expect_partial()  # the run counters are not needed
    return learner, space, env_id


def _check_format(fmt: str) -> None:
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"fmt: expected one of {EXPORT_FORMATS}, received {fmt!r}")


def export_run(logdir: str, path: str, *, overwrite: bool = False, fmt: str = "saved_model") -> str:
    """Exports the policy of TAAC run directory ``logdir`` to ``path``; returns ``path``.

    Rebuilds the learner (:func:`restore_run`) and writes, for ``fmt="saved_model"``, the
    SavedModel that training writes to ``LOGDIR/policy``, or one LiteRT (``"tflite"``) or
    ONNX (``"onnx"``) file (:mod:`tfagents_vtrace.agents.taac.portable`). ``experiments.export``
    calls this for TAAC runs.

    Raises:
      ValueError: ``fmt`` is not one of :data:`EXPORT_FORMATS`; from :func:`restore_run`;
        ``path`` may not be written (see :func:`export_taac_policy`,
        ``export_target.check_export_file``).
    """
    from tfagents_vtrace.export_target import check_export_file

    _check_format(fmt)
    if fmt == "saved_model":  # before the learner is built
        check_export_path(path, overwrite)
    else:
        check_export_file(path, fmt, overwrite)
    learner, space, _ = restore_run(logdir)
    if fmt == "saved_model":
        return export_taac_policy(learner, path, space, overwrite=overwrite)
    from tfagents_vtrace.agents.taac import portable

    write = portable.export_taac_tflite if fmt == "tflite" else portable.export_taac_onnx
    return write(learner, path, space, overwrite=overwrite)


def check_export(logdir: str, path: str, *, fmt: str = "saved_model", steps: int = 300):
    """The trajectory parity report (``export_parity.ParityReport``) of the artefact at
    ``path``, exported from run ``logdir`` (``experiments.export --check``).

    A SavedModel is checked against a :class:`TaacPolicyModule` of the restored learner in
    process (the same settings and seed, so their call counters and stateless draws agree);
    a LiteRT or ONNX file against a SavedModel of the same weights whose ``greedy_action``
    has ``epsilon_greedy=0`` and episodes start from the zero trajectory, as the file's. The
    run's env is stepped ``steps`` times at batch size 1.

    A TaacL / TaacQ file is replayed from the SavedModel's states (``teacher_forcing``):
    their trajectories amplify float rounding. A new trajectory takes its derivatives from
    ``x - a`` (inverse mode), so an error e in the carried action ``a`` becomes -e/2 in ``v``
    (and -e/4 in ``u``), and following the trajectory turns it into -2e after one step and
    -5e after two (TaacQ; -ke after k steps for TaacL); at the next switch the grown error
    seeds the next trajectory. Two correct float32 implementations (TF against XNNPACK or
    ONNX Runtime, ~1e-7 apart per step) thus drift past 1e-5 within a few trajectories of a
    trained TaacQ policy that follows them for several steps, until the clip to [-1, 1]
    absorbs the difference. From the same states every step agrees within 1e-5. A TAAC
    (constant) file carries its own state.
    """
    import tempfile

    from tfagents_vtrace.envs import make_env
    from tfagents_vtrace.export_parity import SavedModelRunner, check_parity, open_runner

    _check_format(fmt)
    learner, space, env_id = restore_run(logdir)
    env = make_env(env_id)
    try:
        if fmt == "saved_model":
            candidate = SavedModelRunner(TaacPolicyModule(learner, space))
            return check_parity(path, candidate, env, steps=steps)
        with tempfile.TemporaryDirectory(prefix="export-check-") as tmp:
            reference = export_taac_policy(
                learner, os.path.join(tmp, "reference"), space,
                epsilon_greedy=0.0, randomize_first_state_tau=False,
            )  # fmt: skip
            forcing = learner.trajectory.order > 1  # TaacL / TaacQ: see the docstring
            return check_parity(
                reference, open_runner(path), env, steps=steps, teacher_forcing=forcing
            )
    finally:
        env.close()
