"""The exported TAAC/TaacL/TaacQ policy, whose state carries (tau, repeat count).

Yu et al., "TAAC: Temporally Abstract Actor-Critic for Continuous Control", 2021,
https://arxiv.org/abs/2104.06521. :class:`TaacPolicyModule` implements the policy-module
protocol (:mod:`tfagents_vtrace.export.policy_module`), so the export package writes it as a
SavedModel, a LiteRT or an ONNX file as it writes an actor-critic policy, and loads with plain
TensorFlow::

    policy = tf.saved_model.load(path)
    state = policy.get_initial_state(batch_size=tf.constant(B))   # (tau [B, k*A], repeats [B, 1])
    out = policy.action(observation=obs, first=first, prev_action=prev_action,
                        prev_reward=prev_reward, state=state)
    out["action"]    # [B, A] in the environment's bounds (clipped to them)
    out["value"]     # [B] float32: beta_0 Q(s, tau^-) + beta_1 Q(s, tau_hat)
                     # (Q: the critic replicas' minimum, reward_weights-weighted over dims)
    out["unit_action"], out["b"], out["repeats"], out["p_b1"], out["state"]
    policy.greedy_action(...)   # epsilon-greedy per stage (epsilon in the metadata)

``first`` resets the trajectory and repeat count in the graph, so a loaded policy repeats
actions exactly as the training loop's :class:`~tfagents_vtrace.agents.taac.policy.TaacPolicy`
does: both draw their noise from stateless ops seeded ``[seed, call_number]``, so with the
same seed and weights the k-th calls agree. ``prev_action`` and ``prev_reward`` are accepted
for the common contract and ignored. ``b`` [B] int32 is 1 where a new trajectory started,
``unit_action`` the action in [-1, 1].

``action_from_noise`` (inputs ``..., state_1, noise, b_noise``) takes the draws of ``action``
as inputs: ``noise`` [B, A] standard normal (the actor's sample
``tanh(loc + exp(log_std) * noise)``) and ``b_noise`` [B] uniform in [0, 1) (``b = 1`` iff
``b_noise < p_b1``); it starts episodes from the zero trajectory and needs no random op
(:func:`~tfagents_vtrace.agents.taac.policy.act_from_noise`). It is the sampled step of the
LiteRT and ONNX files, whose ``greedy_action`` is the mode of both stages (``tanh(loc)``,
``argmax b``): the SavedModel's ``greedy_action`` with ``epsilon_greedy=0`` (the run's
epsilon-greedy evaluation draws random numbers that no other runtime can reproduce). The
files start episodes from the zero trajectory: a run with ``randomize_first_state_tau``
(random starts, an exploration aid) is exported without it. Their metadata says so
(``epsilon_greedy: 0.0``, ``randomize_first_state_tau: false``; :meth:`TaacPolicyModule.
portable`).

``value`` is TAAC's state value of ``(s, tau^-)`` (TAAC has no separate V network): the
act-or-repeat expectation of the critic-replica minimum (weighted over reward dims) over
following the previous trajectory (``tau^-``) and switching to the trajectory of this call's
candidate action (``tau_hat``), weighted by ``beta(b | s)``, i.e. the value the critic
targets bootstrap from (with the online critics here; per reward dim in training). It is a
one-sample estimate over the candidate action of ``action`` (the greedy candidate for
``greedy_action``).

The parity check replays a TaacL / TaacQ file from the reference's states
(``parity_teacher_forcing``): their trajectories amplify float rounding. A new trajectory
takes its derivatives from ``x - a`` (inverse mode), so an error e in the carried action
``a`` becomes -e/2 in ``v`` (and -e/4 in ``u``), and following the trajectory turns it into
-2e after one step and -5e after two (TaacQ; -ke after k steps for TaacL); at the next switch
the grown error seeds the next trajectory. Two correct float32 implementations (TF against
XNNPACK or ONNX Runtime, ~1e-7 apart per step) thus drift past 1e-5 within a few
trajectories of a trained TaacQ policy that follows them for several steps, until the clip to
[-1, 1] absorbs the difference. From the same states every step agrees within 1e-5. A TAAC
(constant) file carries its own state.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfagents_vtrace.agents.taac.policy import act_from_noise, act_step
from tfagents_vtrace.export.policy_module import PolicyModule

__all__ = ["TaacPolicyModule", "restore_policy"]


class TaacPolicyModule(PolicyModule):
    """The exported object: actor, critics, the b temperature and the acting functions.

    Args:
      learner: a trained :class:`~tfagents_vtrace.agents.taac.learner.TaacLearner`.
      action_space: the environment's Box action space (bounds of the output action).
      seed: seeds the stateless draws (call k uses ``[seed, k]``).
      epsilon_greedy, randomize_first_state_tau: override the learner's config (None: keep
        it); :meth:`portable` has ``0.0`` and ``False``.
    """

    autograph = False

    def __init__(
        self,
        learner,
        action_space,
        seed: int = 0,
        *,
        epsilon_greedy: float | None = None,
        randomize_first_state_tau: bool | None = None,
    ):
        cfg = learner.config
        if randomize_first_state_tau is None:
            randomize_first_state_tau = cfg.randomize_first_state_tau
        epsilon = float(cfg.epsilon_greedy if epsilon_greedy is None else epsilon_greedy)
        k, a = learner.trajectory.order, learner.action_dim
        meta = {
            "policy_kind": "taac",
            "trajectory": cfg.trajectory,
            "inverse_mode": cfg.inverse_mode,
            "observation_shape": list(learner.observation_shape),
            "action_shape": [a],
            "action_low": np.asarray(action_space.low).reshape(-1).tolist(),
            "action_high": np.asarray(action_space.high).reshape(-1).tolist(),
            "epsilon_greedy": epsilon,
            "max_repeat_steps": cfg.max_repeat_steps,
            "randomize_first_state_tau": bool(randomize_first_state_tau),
            "b1_advantage_clipping": cfg.b1_advantage_clipping,
            "num_critic_replicas": cfg.num_critic_replicas,
            "reward_dim": cfg.reward_dim,
            "reward_weights": list(learner.reward_weights),
            "state_sizes": [k * a, 1],
            "recurrent": True,
            "observation_dtype": "float32",
            "action_dtype": "float32",
            # action_from_noise's inputs (the parity check draws them from this).
            "noise_law": "normal",
            "noise_size": a,
            "noise_inputs": {
                "noise": {"law": "normal", "shape": [a]},
                "b_noise": {"law": "uniform", "shape": []},
            },
        }
        super().__init__(
            "taac_policy",
            meta,
            tf.TensorSpec([None, *learner.observation_shape], tf.float32, name="observation"),
            tf.TensorSpec([None, a], tf.float32, name="prev_action"),
            (k * a, 1),
            [
                tf.TensorSpec([None, a], tf.float32, name="noise"),
                tf.TensorSpec([None], tf.float32, name="b_noise"),
            ],
        )
        self.actor, self.critics = learner.actor, learner.critics
        self.trajectory = learner.trajectory
        self.alpha_b = tf.Variable(float(np.exp(learner.log_alpha_b.numpy())), trainable=False)
        self.calls = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.seed = tf.Variable(int(seed), dtype=tf.int64, trainable=False)
        self._k, self._a = k, a
        self._epsilon, self._randomize_first = epsilon, bool(randomize_first_state_tau)
        self._learner, self._action_space = self._no_dependency(learner), action_space
        self._kw = self._no_dependency(  # what both steps take
            dict(
                alpha_b=self.alpha_b,
                max_repeat_steps=cfg.max_repeat_steps,
                clipping=cfg.b1_advantage_clipping,
                reward_weights=learner.reward_weights,
            )
        )
        # numpy, so traced graphs hold them as constants (an eager tf.constant would be a
        # captured input, which tf2onnx leaves as an unfed graph input).
        self._low = np.asarray(action_space.low, np.float32).reshape(-1)
        self._high = np.asarray(action_space.high, np.float32).reshape(-1)
        self.parity_teacher_forcing = k > 1  # TaacL / TaacQ: see the module docstring

    def portable(self) -> TaacPolicyModule:
        """The module of the LiteRT and ONNX files: ``epsilon_greedy=0``, episodes from the
        zero trajectory (module docstring)."""
        return TaacPolicyModule(
            self._learner, self._action_space, epsilon_greedy=0.0, randomize_first_state_tau=False
        )

    def initial_state(self, batch_size) -> tuple:
        return (
            tf.zeros([batch_size, self._k * self._a], tf.float32),
            tf.zeros([batch_size, 1], tf.float32),
        )

    def _step_inputs(self, observation, first, state) -> tuple:
        """The positional inputs of both steps: the networks, the trajectory, ``observation``,
        ``first``, tau [B, k, A] and repeats [B] int32 of the flat state."""
        n = tf.shape(observation)[0]
        tau = tf.reshape(state[0], [n, self._k, self._a])
        repeats = tf.cast(tf.round(state[1][:, 0]), tf.int32)
        return self.actor, self.critics, self.trajectory, observation, first, tau, repeats

    def step(self, observation, first, prev_action, prev_reward, state, greedy: bool) -> dict:
        del prev_action, prev_reward
        self.calls.assign_add(1)
        out = act_step(
            *self._step_inputs(observation, first, state),
            tf.stack([self.seed, self.calls]),
            greedy=greedy,
            epsilon=self._epsilon if greedy else 0.0,
            randomize_first=self._randomize_first,
            **self._kw,
        )
        return self._outputs(observation, out)

    def noise_step(
        self, observation, first, prev_action, prev_reward, state, noise=None, b_noise=None
    ) -> dict:
        del prev_action, prev_reward
        out = act_from_noise(
            *self._step_inputs(observation, first, state),
            noise=noise,
            b_noise=b_noise,
            **self._kw,
        )
        return self._outputs(observation, out)

    def _outputs(self, observation, out: dict) -> dict:
        n = tf.shape(observation)[0]
        # unit_action is in [-1, 1]; the clip keeps float rounding of the affine map (which
        # can land one ulp past a bound) inside the Box, as every exported action is.
        action = tf.clip_by_value(
            self._low + (out["action"] + 1.0) * 0.5 * (self._high - self._low),
            self._low,
            self._high,
        )
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


def restore_policy(logdir: str) -> TaacPolicyModule:
    """The policy of TAAC run directory ``logdir``: the learner rebuilt from ``config.json``
    (TAAC config, env id and settings, seed) with the networks of the latest checkpoint.

    Raises:
      ValueError: no config.json or no checkpoint in ``logdir`` (or none that reads back
        whole), or its env id is not a registered gymnasium id (``config_io.read_env_id``).
    """
    from tfagents_vtrace.agents.taac.config import TaacConfig
    from tfagents_vtrace.agents.taac.learner import TaacLearner
    from tfagents_vtrace.envs import env_spaces
    from tfagents_vtrace.runtime.rundir import config_io
    from tfagents_vtrace.runtime.rundir.checkpointing import intact_checkpoint

    config = config_io.read_config(logdir)
    agent_config = config_io.dataclass_from_dict(TaacConfig, config["agent_config"])
    env_id = config_io.read_env_id(config, logdir)  # a registered id: data, not code
    spaces = env_spaces(env_id, config_io.read_env_kwargs(config, env_id))
    seed = int(config["run_config"].get("seed", 0))
    action_dim = int(np.prod(spaces.action.shape))
    learner = TaacLearner(agent_config, spaces.observation.shape, action_dim, seed=seed)
    with intact_checkpoint(logdir) as latest:
        status = tf.train.Checkpoint(**learner.checkpoint_items()).restore(latest)
        status.expect_partial()  # the run counters are not needed
    return TaacPolicyModule(learner, spaces.action)
