"""The composed network: step == unroll with resets, meta-RL inputs, XLA, MirroredStrategy."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tfagents_vtrace.networks import NetInputs, NetworkConfig, make_network

BOX_OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
FRAMES = gym.spaces.Box(0, 255, (12, 12, 2), np.uint8)
DISCRETE = gym.spaces.Discrete(3)
BOX_ACT = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)

META_LSTM = NetworkConfig(
    hidden_sizes=(8,),
    core="lstm",
    lstm_size=6,
    use_prev_action=True,
    use_prev_reward=True,
    use_time_step=True,
    q_head="discrete",
)


def random_inputs(net, rng, T, B, reset_at=None):
    """Random [T, B] inputs; first at t=0 for all entries and at (reset_at) if given."""
    shape = net.observation_spec.shape
    if net.observation_spec.dtype == tf.uint8:
        obs = rng.integers(0, 256, size=(T, B, *shape)).astype(np.uint8)
    else:
        obs = rng.normal(size=(T, B, *shape)).astype(np.float32)
    first = np.zeros((T, B), bool)
    first[0] = True
    if reset_at is not None:
        first[reset_at] = True
    if net.is_discrete:
        act = rng.integers(0, net.num_actions, size=(T, B)).astype(np.int32)
    else:
        act = rng.uniform(-1, 1, size=(T, B, net.action_dim)).astype(np.float32)
    rew = rng.normal(size=(T, B)).astype(np.float32)
    return NetInputs(obs, first, act, rew)


def at(inputs, t):
    return NetInputs(*(x[t] for x in inputs))


@pytest.mark.parametrize(
    "config,action_space",
    [
        (META_LSTM, DISCRETE),
        (
            NetworkConfig(
                hidden_sizes=(8,), core="lstm", lstm_size=5, use_prev_action=True,
                policy_head="tanh_gaussian",
            ),
            BOX_ACT,
        ),
    ],
)  # fmt: skip
def test_stepping_equals_unroll_with_reset(config, action_space, rng):
    T, B = 7, 3
    net = make_network(config, BOX_OBS, action_space)
    inputs = random_inputs(net, rng, T, B, reset_at=(4, 1))  # entry 1 restarts at t=4
    state0 = tuple(tf.random.normal([B, n]) for n in net.state_sizes)
    seq = net.unroll(inputs, state0)
    state = state0
    for t in range(T):
        out = net(at(inputs, t), state)
        for k in out.policy:
            np.testing.assert_allclose(out.policy[k].numpy(), seq.policy[k][t].numpy(), atol=1e-5)
        np.testing.assert_allclose(out.value.numpy(), seq.value[t].numpy(), atol=1e-5)
        if out.q is not None:
            np.testing.assert_allclose(out.q.numpy(), seq.q[t].numpy(), atol=1e-5)
        state = out.state
    for a, b in zip(state, seq.state):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)


def test_reset_forgets_the_past_for_that_entry_only(rng):
    net = make_network(META_LSTM, BOX_OBS, DISCRETE)
    T, B = 6, 2
    inputs = random_inputs(net, rng, T, B, reset_at=(3, 0))
    full = net.unroll(inputs, net.initial_state(B))
    # Entry 0 from t=3 on equals a fresh unroll of its second episode alone.
    tail = NetInputs(*(x[3:, :1] for x in inputs))
    fresh = net.unroll(tail, net.initial_state(1))
    np.testing.assert_allclose(full.value[3:, 0].numpy(), fresh.value[:, 0].numpy(), atol=1e-5)
    # Entry 1 (no reset) depends on its past: changing t=0 changes t=5.
    obs = inputs.observation.copy()
    obs[0, 1] += 1.0
    other = net.unroll(inputs._replace(observation=obs), net.initial_state(B))
    assert not np.allclose(other.value[5, 1].numpy(), full.value[5, 1].numpy())
    np.testing.assert_allclose(other.value[5, 0].numpy(), full.value[5, 0].numpy(), atol=1e-6)


def test_meta_inputs_masked_on_first_and_used_otherwise(rng):
    net = make_network(META_LSTM, BOX_OBS, DISCRETE)
    inputs = at(random_inputs(net, rng, 1, 4), 0)
    inputs = inputs._replace(first=np.array([True, True, False, False]))
    state = net.initial_state(4)
    base = net(inputs, state)
    changed = net(
        inputs._replace(
            prev_action=(inputs.prev_action + 1) % 3, prev_reward=inputs.prev_reward + 1
        ),
        state,
    )
    np.testing.assert_allclose(base.value[:2].numpy(), changed.value[:2].numpy(), atol=1e-6)
    assert not np.allclose(base.value[2:].numpy(), changed.value[2:].numpy())
    # The time-step counter advances by one per step.
    np.testing.assert_array_equal(base.state[2].numpy()[:2, 0], [1.0, 1.0])


TORSO_CASES = [
    (NetworkConfig(torso="mlp", hidden_sizes=(8,)), BOX_OBS, DISCRETE),
    (NetworkConfig(torso="mlp", hidden_sizes=(8,), q_head="stochastic_dueling",
                   policy_head="tanh_gaussian", sdn_hidden_sizes=(8,)), BOX_OBS, BOX_ACT),
    (NetworkConfig(torso="mlp", hidden_sizes=(8,), q_head="stochastic_dueling",
                   sdn_hidden_sizes=(8,)), BOX_OBS, DISCRETE),
    (NetworkConfig(torso="nature_cnn", cnn_dense_size=8, core="lstm", lstm_size=4,
                   gaussian_std="global"), gym.spaces.Box(0, 255, (36, 36, 2), np.uint8), BOX_ACT),
    (NetworkConfig(torso="impala_resnet", cnn_dense_size=8, core="lstm", lstm_size=4,
                   q_head="discrete"), FRAMES, DISCRETE),
]  # fmt: skip


@pytest.mark.parametrize("config,obs_space,action_space", TORSO_CASES)
def test_every_torso_and_head_runs_under_xla(config, obs_space, action_space, rng):
    net = make_network(config, obs_space, action_space)
    T, B = 3, 2
    inputs = random_inputs(net, rng, T, B, reset_at=(1, 0))
    state = net.initial_state(B)
    sdn = config.q_head == "stochastic_dueling"
    actions = inputs.prev_action if sdn else None

    def unroll(inputs, state):
        out = net.unroll(inputs, state, actions=actions)
        return out._replace(q=out.q if not sdn else out.q - out.q)  # SDN q is stochastic

    def step(inputs, state):
        out = net(at(inputs, 0), state)
        return out.value, net.greedy_action(out.policy), net.distribution(out.policy).sample()

    eager = unroll(inputs, state)
    xla = tf.function(unroll, jit_compile=True)(inputs, state)
    for k in eager.policy:
        np.testing.assert_allclose(xla.policy[k].numpy(), eager.policy[k].numpy(), atol=1e-4)
    np.testing.assert_allclose(xla.value.numpy(), eager.value.numpy(), atol=1e-4)
    assert xla.value.shape == (T, B)
    value, greedy, sample = tf.function(step, jit_compile=True)(inputs, state)
    np.testing.assert_allclose(value.numpy(), eager.value[0].numpy(), atol=1e-4)
    assert greedy.shape[0] == B and sample.shape == greedy.shape


def test_mirrored_strategy_per_replica_forward_equals_single_device(rng):
    devices = [d.name for d in tf.config.list_logical_devices("CPU")][:2]
    assert len(devices) == 2, "tests/conftest.py should create 2 logical CPUs"
    strategy = tf.distribute.MirroredStrategy(devices)
    with strategy.scope():
        dist_net = make_network(META_LSTM, BOX_OBS, DISCRETE)
    mirrored = [v.value for v in dist_net.weights]
    assert all(isinstance(v, tf.distribute.DistributedValues) for v in mirrored), mirrored[0]
    assert [c.device.split("/")[-1] for c in mirrored[0].values] == ["device:CPU:0", "device:CPU:1"]
    net = make_network(META_LSTM, BOX_OBS, DISCRETE)
    net.set_weights(dist_net.get_weights())
    T, B = 4, 2
    per_replica = [random_inputs(net, rng, T, B, reset_at=(2, 1)) for _ in range(2)]
    values = strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.nest.map_structure(tf.constant, per_replica[ctx.replica_id_in_sync_group])
    )

    @tf.function
    def forward(inputs):
        return dist_net.unroll(inputs, dist_net.initial_state(B)).value

    result = strategy.run(forward, args=(values,))
    for replica, local in enumerate(strategy.experimental_local_results(result)):
        expected = net.unroll(per_replica[replica], net.initial_state(B)).value
        np.testing.assert_allclose(local.numpy(), expected.numpy(), atol=1e-5)


def test_unroll_traces_once_for_dynamic_time_and_batch(rng):
    net = make_network(META_LSTM, BOX_OBS, DISCRETE)
    spec = NetInputs(
        tf.TensorSpec([None, None, 4], tf.float32),
        tf.TensorSpec([None, None], tf.bool),
        tf.TensorSpec([None, None], tf.int32),
        tf.TensorSpec([None, None], tf.float32),
    )
    state_spec = tuple(tf.TensorSpec([None, n], tf.float32) for n in net.state_sizes)
    unroll = tf.function(lambda i, s: net.unroll(i, s).value, input_signature=[spec, state_spec])
    for T, B in [(2, 3), (5, 1)]:
        inputs = random_inputs(net, rng, T, B)
        got = unroll(inputs, net.initial_state(B))
        expected = net.unroll(inputs, net.initial_state(B)).value
        np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=1e-5)
    assert unroll.experimental_get_tracing_count() == 1


def test_separate_value_network_is_a_function_of_the_observation_alone(rng):
    """value_hidden_sizes: V(s) = head(MLP_v(s)) on weights of its own. Its gradient reaches
    none of the policy torso's weights (and the policy's none of the value MLP's), and V
    equals a numpy forward pass through the value MLP and value head only."""
    config = NetworkConfig(hidden_sizes=(8, 8), value_hidden_sizes=(5,))
    net = make_network(config, BOX_OBS, DISCRETE)
    inputs = random_inputs(net, rng, 3, 4)
    with tf.GradientTape(persistent=True) as tape:
        out = net.unroll(inputs)
        value_sum = tf.reduce_sum(out.value)
        logits_sum = tf.reduce_sum(out.policy["logits"])
    torso_vars = net.torso.trainable_variables
    value_vars = net.value_torso.trainable_variables
    assert all(g is None for g in tape.gradient(value_sum, torso_vars))
    assert all(g is None for g in tape.gradient(logits_sum, value_vars))
    assert all(g is not None for g in tape.gradient(value_sum, value_vars))
    [(kernel, bias)] = [(d.kernel, d.bias) for d in net.value_torso.dense_layers]
    head = net.value_head
    head_kernel, head_bias = head.trainable_variables
    h = np.tanh(inputs.observation @ kernel.numpy() + bias.numpy())
    want = (h @ head_kernel.numpy() + head_bias.numpy())[..., 0]
    np.testing.assert_allclose(out.value.numpy(), want, rtol=1e-5, atol=1e-5)
    step = net(at(inputs, 1))
    np.testing.assert_allclose(step.value.numpy(), want[1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(value_hidden_sizes=(0,)), "value_hidden_sizes"),
        (dict(value_hidden_sizes=(8,), core="lstm"), "value_hidden_sizes.*core='lstm'"),
        (dict(value_hidden_sizes=(8,), q_head="discrete"), "value_hidden_sizes.*q_head='discrete'"),
    ],
)
def test_separate_value_network_bad_config_names_the_field(kwargs, match):
    with pytest.raises(ValueError, match=match):
        NetworkConfig(**kwargs)
