"""IMPALA's replay in the training loop: each batch holds the fresh unrolls plus replayed ones."""

import numpy as np
import pytest

from tfagents_vtrace.agents import get_agent
from tfagents_vtrace.networks import NetworkConfig
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.driver import make_driver

AGENT = get_agent("impala")


def _trainer(tmp_path, agent_config, **run):
    config = RunConfig(total_steps=640, num_envs=4, unroll_length=8, eval_episodes=1,
                       export_policy=False, num_actors=0, **run)  # fmt: skip
    return make_driver(config, AGENT, agent_config, NetworkConfig(hidden_sizes=(8,)), str(tmp_path))


def test_batches_carry_replayed_unrolls_with_their_own_behaviour_policy(tmp_path):
    config = AGENT.Config(replay_ratio=1.0, replay_unrolls=4, num_minibatches=2)
    trainer = _trainer(tmp_path, config, batch_unrolls=2)
    seen = []
    train_step = trainer.agent.learner.train_step

    def spy(batch):
        seen.append(batch)
        return train_step(batch)

    trainer.agent.learner.train_step = spy
    final = trainer.run()
    assert final["step"] == 640  # env steps count fresh unrolls only: 10 updates of 2 x 4 x 8
    assert len(seen) == 10
    for i, batch in enumerate(seen):
        assert batch["reward"].shape == (8, 16)  # 2 fresh + 2 replayed unrolls of 4 envs
        fresh, replayed = batch["policy"]["logits"][:, :8], batch["policy"]["logits"][:, 8:]
        if i >= 2:  # replayed columns are earlier unrolls' data, with their own mu
            earlier = np.concatenate([b["policy"]["logits"][:, :8] for b in seen[:i]], axis=1)
            for col in range(8):
                match = np.all(earlier == replayed[:, col : col + 1], axis=(0, 2))
                assert match.any()
            assert not np.array_equal(replayed, fresh)


def test_replay_ratio_must_give_whole_unrolls(tmp_path):
    with pytest.raises(ValueError, match="replay_ratio"):
        _trainer(tmp_path, AGENT.Config(replay_ratio=0.5), batch_unrolls=1)
