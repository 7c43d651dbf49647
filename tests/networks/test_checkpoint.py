"""tf.train.Checkpoint round trip restores every weight of every network shape."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tfagents_vtrace.networks import NetworkConfig, make_network

BOX = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
FRAMES = gym.spaces.Box(0, 255, (36, 36, 2), np.uint8)
CASES = [
    (NetworkConfig(), BOX, gym.spaces.Discrete(2)),
    (NetworkConfig(core="lstm", lstm_size=8), BOX, gym.spaces.Discrete(2)),
    (NetworkConfig(torso="nature_cnn", cnn_dense_size=16), FRAMES, gym.spaces.Discrete(3)),
    (
        NetworkConfig(torso="impala_resnet", cnn_dense_size=16, core="lstm", lstm_size=8),
        FRAMES,
        gym.spaces.Discrete(3),
    ),
    (NetworkConfig(q_head="stochastic_dueling"), BOX, gym.spaces.Box(-1.0, 1.0, (2,), np.float32)),
]


@pytest.mark.parametrize("config,obs_space,action_space", CASES)
def test_checkpoint_restores_every_weight(tmp_path, config, obs_space, action_space):
    source = make_network(config, obs_space, action_space)
    target = make_network(config, obs_space, action_space)
    assert len(source.weights) == len({id(v) for v in source.weights})  # none listed twice
    for v in target.weights:  # differ from the source everywhere, zero-initialised biases too
        v.assign(tf.random.normal(v.shape, seed=1))
    path = tf.train.Checkpoint(network=source).save(str(tmp_path / "ckpt"))
    tf.train.Checkpoint(network=target).restore(path).assert_existing_objects_matched()
    for a, b, v in zip(source.get_weights(), target.get_weights(), source.weights):
        np.testing.assert_array_equal(a, b, err_msg=v.path)
