"""An agent defined outside the package, registered with ``register_agent``, works end to end:
``tv.train`` trains CartPole with it, the same call resumes, and the run exports a policy that
loads and acts. The agent is REINFORCE with a learned baseline (Williams 1992, "Simple
statistical gradient-following algorithms for connectionist reinforcement learning"), written
here from the library's parts: its config, a ``Learner`` the actor-learner feeds unrolls, and
the spaces it declares (Discrete actions only, so the space check is its spec's, not a table's).
"""

import dataclasses
import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfagents_vtrace as tv
from tfagents_vtrace import agents
from tfagents_vtrace.agents.learner_config import AgentConfig
from tfagents_vtrace.agents.loss_inputs import episode_targets
from tfagents_vtrace.agents.spaces import AgentSpaces
from tfagents_vtrace.agents.spec import AgentSpec
from tfagents_vtrace.networks import NetInputs
from tfagents_vtrace.ops import returns
from tfagents_vtrace.runtime.actor_learner import actor_learner


@dataclasses.dataclass(frozen=True)
class ReinforceConfig(AgentConfig):
    """REINFORCE's settings: the ones every agent has, plus the baseline's weight."""

    baseline_cost: float = 0.5
    """Weight of the baseline's squared error."""
    reward_clipping: str = "none"
    """How rewards are clipped ("none": not at all)."""


class ReinforceLearner:
    """``-log pi(a|s) * (G - V(s)) + c * (G - V(s))^2 / 2`` with ``G`` the discounted return
    to the unroll's end (bootstrapped from the baseline there)."""

    def __init__(self, config, network_factory, strategy=None, total_updates=None, seed=0):
        self.config = config
        self.network = network_factory()
        self.optimizer = keras.optimizers.Adam(config.learning_rate)
        self.optimizer.build(self.network.trainable_variables)
        self._step = tf.function(self._update, autograph=False)

    def _update(self, batch):
        with tf.GradientTape() as tape:
            inputs = NetInputs(
                batch["observation"], batch["first"], batch["prev_action"], batch["prev_reward"]
            )
            out = self.network.unroll(inputs, tuple(batch["state"]))
            values = out.value
            rewards, discounts, mask = episode_targets(
                batch, values, self.config.discount, self.config.reward_clipping, 1.0
            )
            target = returns.generalized_advantage_estimation(
                rewards, tf.stop_gradient(values[:-1]), tf.stop_gradient(values[-1]),
                discounts, 1.0,
            ).returns  # fmt: skip
            policy = {k: v[:-1] for k, v in out.policy.items()}
            dist = self.network.distribution(policy)
            log_prob = dist.log_prob(batch["action"])
            advantage = tf.stop_gradient(target - values[:-1])
            n = tf.maximum(tf.reduce_sum(mask), 1.0)
            pg_loss = -tf.reduce_sum(mask * log_prob * advantage) / n
            baseline_loss = 0.5 * tf.reduce_sum(mask * tf.square(target - values[:-1])) / n
            loss = pg_loss + self.config.baseline_cost * baseline_loss
        grads = tape.gradient(loss, self.network.trainable_variables)
        grads, _ = tf.clip_by_global_norm(grads, 40.0)
        self.optimizer.apply(grads, self.network.trainable_variables)
        return tf.stack([loss, pg_loss, baseline_loss])

    def train_step(self, batch):
        batch = {k: v for k, v in batch.items() if k != "policy"}
        loss, pg_loss, baseline_loss = self._step(batch).numpy().tolist()
        return {"loss": loss, "pg_loss": pg_loss, "baseline_loss": baseline_loss}

    def get_weights(self):
        return self.network.get_weights()

    def checkpoint_items(self):
        return {"network": self.network, "optimizer": self.optimizer}


SPEC = AgentSpec(
    "reinforce",
    ReinforceConfig,
    actor_learner(ReinforceLearner),
    spaces=AgentSpaces(observations=("Box",), actions=("Discrete",)),
)
RUN = dict(total_steps=3000, num_envs=8, unroll_length=16, eval_every=0, eval_episodes=5,
           learning_rate=3e-3, seed=0)  # fmt: skip


@pytest.fixture
def reinforce():
    agents.register_agent("reinforce", SPEC)
    yield SPEC
    agents._REGISTRY.pop("reinforce", None)


def test_an_agent_registered_from_outside_trains_resumes_and_exports(tmp_path, reinforce):
    logdir = str(tmp_path / "run")
    final = tv.train("reinforce", env="CartPole-v1", logdir=logdir, **RUN)
    assert final["step"] >= 3000 and final["policy"] == os.path.join(logdir, "policy")
    with open(os.path.join(logdir, "config.json")) as f:
        assert json.load(f)["agent"] == "reinforce"
    longer = tv.train("reinforce", env="CartPole-v1", logdir=logdir, **{**RUN, "total_steps": 6000})
    assert longer["resumed"] and longer["step"] >= 6000
    # It learned: a uniform random policy's CartPole episodes last ~22 steps.
    assert longer["eval_return"] > 30
    policy = tv.load_policy(longer["policy"])
    obs = np.zeros((3, 4), np.float32)
    action, _ = policy.step(obs, greedy=True)
    assert np.shape(action) == (3,) and set(np.asarray(action).tolist()) <= {0, 1}


def test_the_space_check_reads_the_agents_declared_spaces(tmp_path, reinforce):
    with pytest.raises(ValueError, match=r"^env: reinforce does not take Box actions"):
        tv.train("reinforce", env="Pendulum-v1", logdir=str(tmp_path / "run"), **RUN)


def test_a_spec_without_its_spaces_is_refused():
    with pytest.raises(ValueError, match="spaces"):
        AgentSpec("mine", ReinforceConfig, actor_learner(ReinforceLearner))
