"""The defaults an agent resolves at the start of a run: the MLP activation "auto" per agent,
and IMPALA's minibatch split checked before anything runs."""

import os

import pytest

import tfagents_vtrace
from tfagents_vtrace.networks import NetworkConfig
from tfagents_vtrace.settings import build_configs, read_flagfile

CONFIGS = os.path.join(os.path.dirname(tfagents_vtrace.__file__), "configs")


@pytest.mark.parametrize(
    "agent, expected", [("impala", "relu"), ("a2c", "tanh"), ("a3c", "tanh"), ("acer", "tanh")]
)
def test_auto_activation_resolves_per_agent_and_a_given_one_is_kept(agent, expected):
    assert build_configs(agent, {}).network_config.activation == expected
    given = build_configs(agent, {"activation": "elu"}).network_config.activation
    assert given == "elu"


def test_auto_activation_outside_a_run_is_tanh():
    assert NetworkConfig().activation == "auto"
    assert NetworkConfig().mlp_activation == "tanh"
    assert NetworkConfig(activation="relu").mlp_activation == "relu"


def test_impala_defaults_are_clipped_reuse_and_the_reference_preset_is_the_papers_update():
    agent = build_configs("impala", {}).agent_config
    assert (agent.policy_loss, agent.num_epochs, agent.num_minibatches) == ("clipped", 4, 4)
    settings = read_flagfile(os.path.join(CONFIGS, "impala_reference.cfg"))
    settings.pop("agent")
    preset = build_configs("impala", settings)
    config = preset.agent_config
    assert (config.policy_loss, config.num_epochs, config.num_minibatches) == ("vtrace", 1, 1)
    assert preset.network_config.activation == "tanh"


@pytest.mark.parametrize(
    "settings, columns",
    [
        ({"num_envs": 6}, 6),
        ({"num_envs": 4, "batch_unrolls": 1, "replay_ratio": 1.0, "num_minibatches": 3}, 8),
    ],
)
def test_a_batch_that_does_not_split_into_minibatches_is_refused_at_start(settings, columns):
    with pytest.raises(ValueError, match=rf"^num_minibatches: a batch of {columns} columns"):
        build_configs("impala", settings)


def test_a_batch_that_splits_is_accepted():
    build_configs("impala", {"num_envs": 8})
    build_configs("impala", {"num_envs": 6, "num_minibatches": 3})
    build_configs("impala", {"num_envs": 6, "num_minibatches": 4, "minibatch_unit": "steps"})
    with pytest.raises(ValueError, match=r"^num_minibatches: a batch of 90 steps"):
        build_configs(
            "impala",
            {"num_envs": 6, "unroll_length": 15, "num_minibatches": 4, "minibatch_unit": "steps"},
        )
