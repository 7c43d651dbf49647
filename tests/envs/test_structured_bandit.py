"""The eleven-armed structured bandit: payoffs by hand, the informative arm, NEXT_STEP."""

import numpy as np
import pytest

import tfagents_vtrace.envs as envs


def test_payoffs_and_regret_by_hand():
    env = envs.make_vector_env(envs.STRUCTURED_BANDIT_ID, 3, seed=0)
    assert env.single_action_space.n == 11
    env.reset(options={"target": [3, 0, 9]})
    # Arm 3 on target 3 pays 5; arm 3 on target 0 pays 1; the informative arm 10 on target
    # 9 pays 0.1 * 10 = 1.
    _, reward, _, _, info = env.step(np.array([3, 3, 10]))
    np.testing.assert_allclose(reward, [5.0, 1.0, 1.0])
    np.testing.assert_allclose(info["expected_regret"], [0.0, 4.0, 4.0])
    _, reward, _, _, info = env.step(np.array([10, 10, 9]))
    np.testing.assert_allclose(reward, [0.4, 0.1, 5.0])
    np.testing.assert_allclose(info["cumulative_regret"], [4.6, 8.9, 4.0])


def test_informed_policy_and_next_step():
    env = envs.make_vector_env(envs.STRUCTURED_BANDIT_ID, 10, seed=1)
    env.reset(options={"target": np.arange(10)})
    # Pull the informative arm, decode the target from its payoff, then exploit.
    _, reward, term, _, _ = env.step(np.full(10, 10))
    decoded = np.rint(reward / 0.1).astype(np.int64) - 1
    np.testing.assert_array_equal(decoded, np.arange(10))
    for t in range(4):
        _, reward, term, _, info = env.step(decoded)
        np.testing.assert_allclose(reward, 5.0)
        assert term.all() == (t == 3)
    np.testing.assert_allclose(info["cumulative_regret"], 5.0 - 0.1 * (np.arange(10) + 1))
    _, reward, term, _, info = env.step(decoded)  # reset step: new targets
    np.testing.assert_array_equal(reward, 0.0)
    assert not term.any() and (info["trial"] == 0).all()


def test_single_env_and_errors():
    env = envs.make_env(envs.STRUCTURED_BANDIT_ID, seed=0)
    obs, info = env.reset(options={"target": 4})
    assert obs.shape == (1,) and info["target"] == 4
    _, reward, term, trunc, info = env.step(4)
    assert reward == 5.0 and not term and info["expected_regret"] == 0.0
    targets = {
        envs.make_env(envs.STRUCTURED_BANDIT_ID, seed=s).reset()[1]["target"] for s in range(40)
    }
    assert len(targets) >= 6  # drawn at random
    with pytest.raises(ValueError, match="target"):
        env.reset(options={"target": 10})
    venv = envs.make_vector_env(envs.STRUCTURED_BANDIT_ID, 2, seed=0)
    with pytest.raises(ValueError, match="actions"):
        venv.step(np.array([0, 11]))
