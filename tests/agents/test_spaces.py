"""The table of the spaces each agent takes and the one-line refusal of the others."""

import gymnasium as gym
import numpy as np
import pytest

from tfagents_vtrace.agents import agent_names
from tfagents_vtrace.agents.spaces import SUPPORTED_SPACES, check_spaces

BOX = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
IMAGE = gym.spaces.Box(0, 255, (5, 5, 3), np.uint8)
DISCRETE = gym.spaces.Discrete(4)
DICT = gym.spaces.Dict({"image": IMAGE, "pos": BOX, "mode": DISCRETE})
TUPLE = gym.spaces.Tuple((BOX, DISCRETE))
MULTI_DISCRETE = gym.spaces.MultiDiscrete([3, 2])
MULTI_BINARY = gym.spaces.MultiBinary(4)
ACTIONS = {"Discrete": DISCRETE, "Box": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
           "MultiDiscrete": MULTI_DISCRETE, "MultiBinary": MULTI_BINARY}  # fmt: skip
OBSERVATIONS = {"Box": BOX, "Discrete": DISCRETE, "Dict": DICT, "Tuple": TUPLE}


def test_every_registered_agent_has_a_row():
    assert set(agent_names()) <= set(SUPPORTED_SPACES)


@pytest.mark.parametrize("agent", ["impala", "a2c", "a3c"])
def test_actor_critic_agents_take_every_space(agent):
    for obs in OBSERVATIONS.values():
        for action in ACTIONS.values():
            check_spaces(agent, obs, action)
    check_spaces(agent, IMAGE, DISCRETE)
    check_spaces(agent, gym.spaces.Dict({"inner": TUPLE, "x": BOX}), MULTI_BINARY)


@pytest.mark.parametrize("agent", list(SUPPORTED_SPACES))
def test_the_table_says_what_is_taken(agent):
    table = SUPPORTED_SPACES[agent]
    for name, space in ACTIONS.items():
        if name in table.actions:
            check_spaces(agent, BOX, space)
        else:
            with pytest.raises(ValueError, match=f"^env: {agent} does not take {name} actions"):
                check_spaces(agent, BOX, space)
    box_action = ACTIONS["Box"]
    for name, space in OBSERVATIONS.items():
        if name in table.observations:
            check_spaces(agent, space, box_action)
        else:
            message = f"^env: {agent} does not take {name} observations"
            with pytest.raises(ValueError, match=message):
                check_spaces(agent, space, box_action)


def test_refusals_are_one_line_naming_agent_and_space():
    with pytest.raises(ValueError) as e:
        check_spaces("taac", BOX, DISCRETE)
    assert str(e.value) == "env: taac does not take Discrete actions (it takes Box actions)"
    with pytest.raises(ValueError) as e:
        check_spaces("acer", DICT, DISCRETE)
    assert str(e.value) == (
        "env: acer does not take Dict observations (it takes Box or Discrete observations)"
    )
    assert "\n" not in str(e.value)


def test_sub_spaces_and_shapes_are_checked():
    holding = gym.spaces.Dict({"a": BOX, "b": MULTI_BINARY})
    with pytest.raises(ValueError, match="^env: impala does not take a Dict observation holding "
                                         "MultiBinary"):  # fmt: skip
        check_spaces("impala", holding, DISCRETE)
    with pytest.raises(ValueError, match=r"MultiDiscrete actions of shape \(2, 2\)"):
        check_spaces("a2c", BOX, gym.spaces.MultiDiscrete([[2, 2], [3, 3]]))
    with pytest.raises(ValueError, match="start"):
        check_spaces("a3c", BOX, gym.spaces.MultiDiscrete([3, 2], start=[1, 0]))
    with pytest.raises(ValueError, match=r"Box actions of shape \(2, 2\)"):
        check_spaces("impala", BOX, gym.spaces.Box(-1.0, 1.0, (2, 2)))
    with pytest.raises(ValueError, match=r"^env: taac does not take Box actions of shape"):
        check_spaces("taac", BOX, gym.spaces.Box(-1.0, 1.0, (2, 2)))


def test_unknown_agent_is_named():
    with pytest.raises(ValueError, match="^agent: expected one of"):
        check_spaces("dqn", BOX, DISCRETE)


def _masked(n, mask=None):
    return gym.spaces.Dict({"x": BOX, "action_mask": mask or gym.spaces.MultiBinary(n)})


@pytest.mark.parametrize("agent", ["impala", "a2c", "a3c"])
def test_actor_critic_agents_take_action_masks(agent):
    check_spaces(agent, _masked(4), DISCRETE)
    check_spaces(agent, _masked(5, gym.spaces.Box(0.0, 1.0, (5,), np.float32)), MULTI_DISCRETE)


@pytest.mark.parametrize(
    ("agent", "observation", "action", "message"),
    [
        ("acer", _masked(4), DISCRETE,
         "env: acer does not take action masks (the observation's 'action_mask' entry; impala, "
         "a2c and a3c do)"),
        ("taac", _masked(2), ACTIONS["Box"],
         "env: observation_space['action_mask']: action masks take Discrete or MultiDiscrete "
         "actions, got Box actions"),
        ("impala", _masked(4), MULTI_BINARY, "env: observation_space['action_mask']: action "
         "masks take Discrete or MultiDiscrete actions, got MultiBinary actions"),
        ("a2c", _masked(4), MULTI_DISCRETE,
         "env: observation_space['action_mask']: expected shape (5,) (one entry per action of "
         "MultiDiscrete([3 2])), got (4,)"),
    ],
)  # fmt: skip
def test_masks_an_agent_cannot_use_are_refused_in_one_line(agent, observation, action, message):
    with pytest.raises(ValueError) as e:
        check_spaces(agent, observation, action)
    assert str(e.value) == message
