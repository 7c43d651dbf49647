"""export_policy: a SavedModel round trip through a process that cannot import this package.

All cases (MLP and LSTM, discrete and continuous, batch sizes 1 and 7) run in ONE child
process (tests/export_roundtrip_child.py) to pay TensorFlow's start-up once. Each case steps
20 times with an episode reset in the middle and must match the in-process network to 1e-5.
"""

import json
import os
import subprocess
import sys
import sysconfig

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tfagents_vtrace.export import export_policy
from tfagents_vtrace.networks import NetInputs, NetworkConfig, make_network

# One xdist worker runs the module (make test: --dist loadgroup), so its module-scoped
# fixture is built once, not once per worker.
pytestmark = pytest.mark.xdist_group("export")

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "export_roundtrip_child.py")
OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
DISCRETE = gym.spaces.Discrete(4)
BOX = gym.spaces.Box(np.array([-1.0, 0.0], np.float32), np.array([1.0, 3.0], np.float32))
LSTM = dict(core="lstm", lstm_size=6, use_prev_action=True, use_prev_reward=True)
CASES = {
    "mlp_discrete": (NetworkConfig(hidden_sizes=(8,)), DISCRETE),
    "mlp_tanh": (NetworkConfig(hidden_sizes=(8,), policy_head="tanh_gaussian"), BOX),
    "lstm_discrete": (NetworkConfig(hidden_sizes=(8,), use_time_step=True, **LSTM), DISCRETE),
    "lstm_gaussian": (NetworkConfig(hidden_sizes=(8,), gaussian_std="global", **LSTM), BOX),
}
T = 20


def make_inputs(net, rng, batch):
    obs = rng.normal(size=(T, batch, 3)).astype(np.float32)
    first = np.zeros((T, batch), bool)
    first[0] = True
    first[10, 0] = True  # entry 0 starts a new episode mid-way
    if net.is_discrete:
        pa = rng.integers(0, net.num_actions, size=(T, batch)).astype(np.int32)
    else:
        pa = rng.uniform(-1, 1, size=(T, batch, net.action_dim)).astype(np.float32)
    pr = rng.normal(size=(T, batch)).astype(np.float32)
    return obs, first, pa, pr


def in_process(net, obs, first, pa, pr):
    state = net.initial_state(first.shape[1])
    rec = {"value": [], "action": []}
    for t in range(T):
        out = net(NetInputs(obs[t], first[t], pa[t], pr[t]), state)
        rec["value"].append(out.value.numpy())
        greedy = net.greedy_action(out.policy).numpy()
        if net.action_low is not None:  # the exported action is clipped to the Box
            greedy = np.clip(greedy, net.action_low, net.action_high)
        rec["action"].append(greedy)
        for k, v in out.policy.items():
            rec.setdefault(k, []).append(v.numpy())
        state = out.state
    return {k: np.stack(v) for k, v in rec.items()}, state


@pytest.fixture(scope="module")
def roundtrip(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export")
    rng = np.random.default_rng(0)
    cases, pending = [], {}
    for name, (config, action_space) in CASES.items():
        net = make_network(config, OBS, action_space)
        path = export_policy(net, tmp / name)
        for batch in (1, 7):
            key = f"{name}_b{batch}"
            inputs = make_inputs(net, rng, batch)
            np.savez(tmp / f"{key}_in.npz", **dict(zip(["obs", "first", "pa", "pr"], inputs)))
            pending[key] = (net, inputs)
            cases.append(
                {"path": str(path), "inputs": str(tmp / f"{key}_in.npz"),
                 "outputs": str(tmp / f"{key}_out.npz"), "key": key}
            )  # fmt: skip
    (tmp / "cases.json").write_text(json.dumps(cases))
    site_packages = sysconfig.get_paths()["purelib"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    out_file, err_file = open(tmp / "child.out", "w+"), open(tmp / "child.err", "w+")
    proc = subprocess.Popen(  # files, not pipes: a full pipe would block the child
        [sys.executable, "-I", "-S", CHILD, str(tmp / "cases.json"), site_packages],
        cwd=tmp, env=env, stdout=out_file, stderr=err_file, text=True,
    )  # fmt: skip
    # The in-process references are computed while the child runs.
    expected = {k: (net, in_process(net, *inputs), inputs) for k, (net, inputs) in pending.items()}
    proc.wait(timeout=300)
    stdout, stderr = (tmp / "child.out").read_text(), (tmp / "child.err").read_text()
    out_file.close()
    err_file.close()
    assert proc.returncode == 0, stderr[-3000:]
    status_line = [ln for ln in stdout.splitlines() if ln.startswith("ROUNDTRIP_STATUS ")]
    status = json.loads(status_line[-1].split(" ", 1)[1])
    outputs = {c["key"]: dict(np.load(c["outputs"])) for c in cases}
    return status, expected, outputs


def test_child_never_imported_the_package(roundtrip):
    status, _, _ = roundtrip
    assert status == {"tfagents_vtrace_imported": False, "tfp_imported": False}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("batch", [1, 7])
def test_loaded_policy_matches_network(roundtrip, name, batch):
    _, expected, outputs = roundtrip
    key = f"{name}_b{batch}"
    net, (ref, ref_state), (obs, first, pa, pr) = expected[key]
    got = outputs[key]
    for k, v in ref.items():
        np.testing.assert_allclose(got["greedy_" + k], v, atol=1e-5, err_msg=k)
    np.testing.assert_allclose(got["sampled_value"], ref["value"], atol=1e-5)
    final = [got[f"final_state_{i}"] for i in range(len(net.state_sizes) or 1)]
    if net.state_sizes:
        for a, b in zip(final, ref_state):
            np.testing.assert_allclose(a, b.numpy(), atol=1e-5)
    else:
        assert [s.shape for s in final] == [(batch, 1)]  # the dummy feed-forward state
    assert bool(got["greedy_deterministic"])
    assert bool(got["wrong_shape_rejected"])
    # Flat TF-Serving signatures agree with the structured functions.
    np.testing.assert_array_equal(got["flat_greedy_action"][0], got["greedy_action"][0])
    np.testing.assert_allclose(got["flat_value"][0], ref["value"][0], atol=1e-5)
    np.testing.assert_allclose(got["serving_value"][0], ref["value"][0], atol=1e-5)
    n_state = len(net.state_sizes) or 1
    assert list(got["flat_init_keys"][0]) == [f"state_{i}" for i in range(n_state)]
    assert json.loads(str(got["metadata"]))["policy_kind"] == net.policy_kind
    _check_sampled_actions(net, ref, got)


def _check_sampled_actions(net, ref, got):
    """Sampled actions are valid draws whose log-prob matches the in-process distribution
    (a Box action: in the bounds, and scored where no dimension was clipped, as the reported
    log-prob is the unclipped draw's)."""
    actions = got["sampled_action"]
    policy = {k: tf.constant(ref[k]) for k in ("logits", "loc", "scale") if k in ref}
    dist = net.distribution(policy)
    log_prob = dist.log_prob(actions).numpy()
    if net.is_discrete:
        np.testing.assert_allclose(got["sampled_log_prob"], log_prob, rtol=1e-4, atol=1e-4)
        assert actions.dtype == np.int32 and actions.min() >= 0 and actions.max() < 4
        assert not np.array_equal(actions, got["greedy_action"])  # near-uniform: P ~ 0.25^20
        return
    low, high = net.action_low, net.action_high
    assert np.all(actions >= low) and np.all(actions <= high)
    inside = np.all((actions > low) & (actions < high), axis=-1)
    assert inside.mean() > 0.3
    np.testing.assert_allclose(
        got["sampled_log_prob"][inside], log_prob[inside], rtol=1e-4, atol=1e-4
    )
    assert np.all(np.abs(actions - got["greedy_action"])[inside] > 0)


def test_refuses_to_overwrite(tmp_path):
    net = make_network(NetworkConfig(hidden_sizes=(4,)), OBS, DISCRETE)
    target = tmp_path / "policy"
    target.mkdir()
    (target / "keep.txt").write_text("x")
    for overwrite in (False, True):  # not a SavedModel: never replaced
        with pytest.raises(ValueError, match="policy"):
            export_policy(net, target, overwrite=overwrite)
    assert (target / "keep.txt").exists()
    (target / "keep.txt").unlink()
    export_policy(net, target)
    with pytest.raises(ValueError, match="overwrite=True"):
        export_policy(net, target)
    export_policy(net, target, overwrite=True)
    assert (target / "saved_model.pb").exists()


def test_export_of_mirrored_network_with_q_head(tmp_path):
    """A learner's network built under MirroredStrategy exports its (primary) weights."""
    strategy = tf.distribute.MirroredStrategy(
        [d.name for d in tf.config.list_logical_devices("CPU")][:2]
    )
    config = NetworkConfig(hidden_sizes=(4,), core="lstm", lstm_size=3, q_head="discrete")
    with strategy.scope():
        net = make_network(config, OBS, DISCRETE)
    policy = tf.saved_model.load(export_policy(net, tmp_path / "p"))
    rng = np.random.default_rng(1)
    obs, first, pa, pr = (x[0] for x in make_inputs(net, rng, 5))
    state = policy.get_initial_state(batch_size=tf.constant(5))
    got = policy.greedy_action(
        observation=obs, first=first, prev_action=pa, prev_reward=pr, state=state
    )
    ref = net(NetInputs(obs, first, pa, pr), net.initial_state(5))
    np.testing.assert_allclose(got["value"].numpy(), ref.value.numpy(), atol=1e-5)
    np.testing.assert_allclose(got["q"].numpy(), ref.q.numpy(), atol=1e-5)
    assert got["q"].shape == (5, 4)
