"""IMPALA, A2C and A3C train on the masked game (examples/masked_game.py, which counts the
actions it takes and raises on a masked one): no masked action is ever taken, in training or
by the exported policy; the game is learned (``long``: above the random-allowed-action
return on two seeds)."""

import numpy as np
import pytest

import tfagents_vtrace as tv
from tests._masked_game import load

masked_game = load()
FAST = dict(total_steps=3000, num_envs=8, unroll_length=5, eval_episodes=4, seed=0)


def _train(agent, logdir, **settings):
    game = masked_game.MaskedGame
    steps, masked = game.steps, game.masked
    final = tv.train(agent, env=game, logdir=str(logdir), **settings)
    return final, game.steps - steps, game.masked - masked


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["impala", "a2c", "a3c"])
def test_training_never_takes_a_masked_action(tmp_path, agent):
    settings = dict(FAST, num_workers=2) if agent == "a3c" else FAST
    final, steps, masked = _train(agent, tmp_path / agent, **settings)
    assert final["final"] and steps >= FAST["total_steps"] * 0.8
    assert masked == 0
    assert final.get("env_restarts", 0) == 0  # a masked action would have restarted the env
    game = masked_game.MaskedGame
    before = game.steps, game.masked
    result = tv.evaluate(final["policy"], game, episodes=20, greedy=False)
    assert game.steps - before[0] >= 200 and game.masked == before[1]
    assert np.isfinite(result["mean_return"])


@pytest.mark.long
@pytest.mark.parametrize("agent", ["impala", "a2c"])
@pytest.mark.parametrize("seed", [0, 1])
def test_the_masked_game_is_learned(tmp_path, agent, seed):
    final, _, masked = _train(agent, tmp_path / agent, total_steps=20_000, seed=seed)
    game = masked_game.MaskedGame
    before = game.steps, game.masked
    result = tv.evaluate(final["policy"], game, episodes=1000, seed=100 + seed)
    assert game.steps - before[0] >= 10_000 and masked == 0 and game.masked == before[1]
    # Random allowed actions earn 4.01, the best policy 10.
    assert result["mean_return"] > masked_game.RANDOM_ALLOWED_RETURN + 3.0
