"""The actor refuses an action mask that allows nothing, in one line naming the step and the
environment, before the policy is called; a reset step's mask (its action is ignored) may
allow nothing."""

import gymnasium as gym
import numpy as np
import pytest

from tests._masked_game import load
from tfagents_vtrace.envs.failures import ActingError, NoActionAllowed
from tfagents_vtrace.networks import NetworkConfig, make_network
from tfagents_vtrace.runtime.acting.actor import Actor, ActorSpec

masked_game = load()
T, B = 5, 3


class EmptyMaskAt(masked_game.MaskedGame):
    """The masked game whose mask allows nothing at step ``at`` of its episodes (``at ==
    EPISODE_STEPS``: the final observation, seen at a reset step only)."""

    def __init__(self, at):
        super().__init__()
        self.at = at

    def _observe(self):
        obs = super()._observe()
        if self.t == self.at:
            self.mask[:] = 0
            obs["action_mask"] = self.mask.copy()
        return obs


def _actor(at_by_env):
    def factory(seed):
        envs = [lambda at=at: EmptyMaskAt(at) for at in at_by_env]
        env = gym.vector.SyncVectorEnv(envs, autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP)
        env.reset(seed=seed)
        return env

    game = masked_game.MaskedGame()
    net = make_network(NetworkConfig(hidden_sizes=(8,)), game.observation_space, game.action_space)
    spec = ActorSpec("MaskedGame-v0", net.config, len(at_by_env), T, seed=0)
    return Actor(spec, network=net, env_factory=factory)


def test_a_mask_allowing_nothing_is_one_line_naming_the_step_and_env():
    actor = _actor([99, 7, 99])
    actor.unroll()  # steps 0-4
    with pytest.raises(NoActionAllowed) as e:
        actor.unroll()
    message = str(e.value)
    assert message.startswith("action_mask: no action allowed at step 7 (env 1) of actor 0")
    assert "\n" not in message
    assert isinstance(e.value, ValueError) and isinstance(e.value, ActingError)


def test_a_reset_steps_empty_mask_is_not_an_error():
    episode = masked_game.EPISODE_STEPS
    actor = _actor([episode, episode, 99])
    before = masked_game.MaskedGame.masked
    unrolls = [actor.unroll()[0] for _ in range(3)]  # 15 steps: a final observation at 10
    empty = np.concatenate([(u["observation"]["action_mask"][:T].sum(-1) == 0) for u in unrolls])
    reset = np.concatenate([u["reset"][:T] for u in unrolls])
    assert empty[:, :2].any() and not empty[:, 2].any()
    assert reset[empty].all()  # only reset steps, whose actions never reached the game
    assert masked_game.MaskedGame.masked == before


def test_the_unrolls_carry_the_mask_and_the_masked_logits():
    actor = _actor([99, 99])
    u, _ = actor.unroll()
    mask = u["observation"]["action_mask"]
    assert mask.shape == (T + 1, 2, masked_game.NUM_ACTIONS)
    logits = u["policy"]["logits"]
    np.testing.assert_array_equal(logits[mask[:T] == 0], -1e9)
    assert mask[np.arange(T)[:, None], np.arange(2), u["action"]].all()
