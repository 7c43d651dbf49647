"""Your own torso and core through a whole run (tv.train): IMPALA, A2C and A3C train with
them, config.json records the import path, the checkpoint holds the layer's weights and a
resume continues from them, a resume without the layer (or with another) is refused in one
line, TAAC refuses it, and ``torso="auto"`` resolves in the run's configs.
The exports of such a run: tests/test_export_own_network.py."""

import json
import os

import gymnasium as gym
import numpy as np
import pytest

import tests.user_layers as mine
import tfagents_vtrace as tv
import tfagents_vtrace.api
from tfagents_vtrace.runtime.rundir.checkpointing import restore_network

FAST = dict(env="CartPole-v1", total_steps=1024, num_envs=8, unroll_length=8, eval_episodes=1,
            eval_every=0, seed=0)  # fmt: skip
PATH = "tests.user_layers:LayerNormTorso"


def _norm_weights(network):
    """LayerNormTorso's gamma and beta (1 and 0 when fresh)."""
    return [w.numpy() for w in network.torso.norm.weights]


def test_impala_trains_checkpoints_and_resumes_a_torso_of_ones_own(tmp_path):
    logdir = str(tmp_path / "run")
    final = tv.train("impala", logdir=logdir, torso=mine.LayerNormTorso, **FAST)
    assert final["final"]
    config = json.load(open(os.path.join(logdir, "config.json")))
    assert config["network_config"]["torso"] == PATH
    trained = restore_network(logdir)  # the latest checkpoint's weights
    gamma, beta = _norm_weights(trained)
    assert np.abs(gamma - 1.0).max() > 1e-4 and np.abs(beta).max() > 1e-4  # trained
    # Without the torso (the default, auto -> mlp) or with another: refused in one line.
    for torso, shown in ((None, "'mlp'"), (mine.SpaceTorso, "'tests.user_layers:SpaceTorso'")):
        extra = {} if torso is None else {"torso": torso}
        with pytest.raises(ValueError) as refused:
            tv.train("impala", logdir=logdir, **{**FAST, "total_steps": 2048}, **extra)
        message = str(refused.value)
        assert "\n" not in message
        assert f"network_config.torso: {PATH!r} -> {shown}" in message
        assert f"pass torso={PATH!r} again" in message
    # The same torso resumes from the checkpoint's weights (a tiny step size keeps them).
    again = tv.train("impala", logdir=logdir, torso=PATH, learning_rate=1e-12,
                     **{**FAST, "total_steps": 2048})  # fmt: skip
    assert again["resumed"] and again["step"] >= 2048
    for before, after in zip((gamma, beta), _norm_weights(restore_network(logdir))):
        np.testing.assert_allclose(after, before, atol=1e-6)


def test_a2c_trains_with_a_torso_and_a_gru_core_of_ones_own(tmp_path):
    logdir = str(tmp_path / "run")
    final = tv.train("a2c", logdir=logdir, torso=mine.LayerNormTorso, core=mine.SmallGRU,
                     use_prev_action=True, **FAST)  # fmt: skip
    assert final["final"]
    network = json.load(open(os.path.join(logdir, "config.json")))["network_config"]
    assert (network["torso"], network["core"]) == (PATH, "tests.user_layers:SmallGRU")
    policy = tv.load_policy(final["policy"])
    assert tv.evaluate(policy, "CartPole-v1", episodes=2)["episodes"] == 2
    assert [int(s.shape[-1]) for s in policy.initial_state(1).core] == [8]  # the GRU's state


def test_a3c_workers_train_with_a_torso_of_ones_own(tmp_path):
    final = tv.train("a3c", logdir=str(tmp_path / "run"), torso=PATH, num_workers=2,
                     **{**FAST, "num_envs": 4})  # fmt: skip
    assert final["final"] and final["step"] >= FAST["total_steps"]


def test_taac_refuses_a_torso_of_ones_own(tmp_path):
    with pytest.raises(ValueError, match=r"^torso: agent 'taac' builds its own networks"):
        tv.train("taac", env="Pendulum-v1", logdir=str(tmp_path / "r"), torso=PATH)
    assert not (tmp_path / "r").exists()


class Frames(gym.Env):
    """84x84x3 uint8 frames; two actions; episodes of 5 steps."""

    observation_space = gym.spaces.Box(0, 255, (84, 84, 3), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self._t += 1
        return self.observation_space.sample(), 0.0, self._t >= 5, False, {}


def test_auto_torso_is_resolved_recorded_and_printed(tmp_path, capsys):
    line = "torso auto -> small_atari_cnn (84x84x3 uint8 images)"
    assert tv.make_configs("impala", env=Frames).start_lines == (line,)
    assert tv.make_configs("impala", env=Frames, torso="mlp").start_lines == ()
    logdir = str(tmp_path / "run")
    tv.train("impala", env=Frames, logdir=logdir, total_steps=32, num_envs=4, unroll_length=4,
             eval_episodes=1, eval_every=0, cnn_dense_size=8)  # fmt: skip
    assert line in capsys.readouterr().err.splitlines()
    network = json.load(open(os.path.join(logdir, "config.json")))["network_config"]
    assert network["torso"] == "small_atari_cnn"


def _shipped_torso(name):
    """The ``--torso`` line of a shipped config, else None."""
    from tfagents_vtrace.settings import read_flagfile

    return read_flagfile(tv.config_path(name)).get("torso")


@pytest.mark.parametrize(
    "name", sorted(n[:-4] for n in os.listdir(tv.api.CONFIG_DIR) if n.endswith(".cfg"))
)
def test_every_shipped_config_builds_the_network_it_built_before_auto(name):
    """A shipped config without a --torso line had the mlp torso (the default before
    "auto"); with "auto" its network config is the same in every field."""
    configs = tv.make_configs(flagfile=name)
    if _shipped_torso(name) is None:
        assert configs.network_config == tv.make_configs(flagfile=name, torso="mlp").network_config
    else:
        assert configs.network_config.torso == _shipped_torso(name)


def test_make_network_gives_the_runs_network_for_a_summary():
    net = tv.make_network("impala", env="CartPole-v1", torso=mine.LayerNormTorso)
    lines = []
    net.summary(print_fn=lambda line, **kw: lines.append(line))
    assert "LayerNormTorso" in "\n".join(lines) and net.config.torso == PATH
    with pytest.raises(ValueError, match=r"^agent: 'taac' builds its own networks"):
        tv.make_network("taac", env="Pendulum-v1")
