"""LiteRT and ONNX exports act like the SavedModel: trajectory parity (issue #17).

For each network (MLP categorical; MLP + LSTM with previous action, reward and time step;
Nature CNN on small uint8 images; Gaussian and tanh-Gaussian heads) the SavedModel acts 200
steps in a toy environment whose episodes end every 4-12 steps, sampling from recorded
noise (``export.parity.record``). ONE child process that can import neither this package nor
TensorFlow replays the recorded inputs through every ``.tflite`` (ai-edge-litert) and
``.onnx`` (ONNX Runtime) file with the runtimes' own APIs, carrying its own state. Greedy and
sampled actions must equal the SavedModel's and every float output must be within 1e-5.
In process, ``check_parity`` (what ``tfv-export --check`` runs) also covers the
IMPALA ResNet + LSTM, the MinAtar CNN, Discrete observations with a Q head, ACER's stochastic
dueling head and a separate value torso. The tests of a format are skipped when its extra
(``litert``, ``onnx``) is not installed.
"""

import importlib.util
import json
import os
import subprocess
import sys
import sysconfig

import gymnasium as gym
import numpy as np
import pytest

from tfagents_vtrace.export import parity
from tfagents_vtrace.export.litert import export_tflite
from tfagents_vtrace.export.onnx import export_onnx
from tfagents_vtrace.export.saved_model import export_policy
from tfagents_vtrace.networks import NetworkConfig, make_network

# One xdist worker runs the module (make test: --dist loadgroup), so its module-scoped
# fixture is built once, not once per worker.
pytestmark = pytest.mark.xdist_group("export_portable")

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "export_portable_child.py")
OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
IMAGE = gym.spaces.Box(0, 255, (36, 36, 2), np.uint8)  # the Nature CNN's smallest input
BOX = gym.spaces.Box(np.array([-1.0, 0.0], np.float32), np.array([1.0, 3.0], np.float32))
META = dict(core="lstm", lstm_size=6, use_prev_action=True, use_prev_reward=True)
CASES = {
    "mlp_categorical": (NetworkConfig(hidden_sizes=(8,)), OBS, gym.spaces.Discrete(4)),
    "lstm_meta_rl": (
        NetworkConfig(hidden_sizes=(8,), use_time_step=True, **META),
        OBS,
        gym.spaces.Discrete(3),
    ),
    "nature_cnn": (
        NetworkConfig(torso="nature_cnn", cnn_dense_size=16),
        IMAGE,
        gym.spaces.Discrete(4),
    ),
    "gaussian": (NetworkConfig(hidden_sizes=(8,)), OBS, BOX),
    "tanh_gaussian": (
        NetworkConfig(hidden_sizes=(8,), policy_head="tanh_gaussian", gaussian_std="global"),
        OBS,
        BOX,
    ),
}
FORMATS = {"tflite": ("ai_edge_litert",), "onnx": ("tf2onnx", "onnxruntime")}
STEPS = 200
ATOL = 1e-5


def _installed(fmt: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in FORMATS[fmt])


class ToyEnv(gym.Env):
    """Random observations of the given space; reward ~ N(0, 1); episodes of 4-12 steps."""

    def __init__(self, observation_space, action_space):
        self.observation_space, self.action_space = observation_space, action_space
        self._rng, self._left = np.random.default_rng(0), 0

    def _obs(self):
        space = self.observation_space
        if isinstance(space, gym.spaces.Discrete):
            return int(self._rng.integers(0, space.n))
        if space.dtype == np.uint8:  # in the space's bounds (0/1 MinAtar grids, 0-255 images)
            return self._rng.integers(space.low, space.high.astype(np.int64) + 1).astype(np.uint8)
        return self._rng.uniform(-1, 1, space.shape).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._left = int(self._rng.integers(4, 13))
        return self._obs(), {}

    def step(self, action):
        assert self.action_space.contains(np.asarray(action, self.action_space.dtype))
        self._left -= 1
        return self._obs(), float(self._rng.normal()), self._left <= 0, False, {}


def _make(name):
    """The case's network with its policy layer scaled up to O(1) logits / locs (the
    initializer's 0.01 scale makes a near-uniform policy whose parity would prove little)."""
    import keras

    keras.utils.set_random_seed(list(CASES).index(name))  # the same weights every run
    config, obs_space, act_space = CASES[name]
    net = make_network(config, obs_space, act_space)
    for variable in net.policy_head.trainable_variables:
        if len(variable.shape) == 2:
            variable.assign(variable * 100.0)
    return net


def _export(fmt, net, path):
    return (export_tflite if fmt == "tflite" else export_onnx)(net, path)


@pytest.fixture(scope="module")
def replays(tmp_path_factory):
    """Per case: the network, the recorded trajectory and the child's replays per format."""
    tmp = tmp_path_factory.mktemp("portable")
    formats = [f for f in FORMATS if _installed(f)]
    if not formats:
        pytest.skip("neither the litert nor the onnx extra is installed")
    recorded, jobs = {}, []
    for name, (_, obs_space, act_space) in CASES.items():
        net = _make(name)
        saved = export_policy(net, tmp / name)
        env = ToyEnv(obs_space, act_space)
        trajectory = parity.record(parity.SavedModelRunner(saved), env, STEPS)
        inputs = {k: trajectory[k] for k in (*parity.INPUTS, "noise")}
        np.savez(tmp / f"{name}_in.npz", **inputs)
        recorded[name] = (net, trajectory)
        for fmt in formats:
            path = _export(fmt, net, tmp / f"{name}.{fmt}")
            job = {"path": path, "format": fmt, "key": (name, fmt)}
            job["inputs"], job["outputs"] = (
                str(tmp / f"{name}_in.npz"),
                str(tmp / f"{name}_{fmt}.npz"),
            )
            jobs.append(job)
    (tmp / "cases.json").write_text(json.dumps(jobs))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    with open(tmp / "child.out", "w+") as out, open(tmp / "child.err", "w+") as err:
        proc = subprocess.run(  # files, not pipes: a full pipe would block the child
            [sys.executable, "-I", "-S", CHILD, str(tmp / "cases.json"),
             sysconfig.get_paths()["purelib"]],
            cwd=tmp, env=env, stdout=out, stderr=err, timeout=600,
        )  # fmt: skip
    stdout, stderr = (tmp / "child.out").read_text(), (tmp / "child.err").read_text()
    assert proc.returncode == 0, stderr[-3000:]
    status = [ln for ln in stdout.splitlines() if ln.startswith("CHILD_STATUS ")]
    outputs = {}
    for job in jobs:
        data = np.load(job["outputs"])
        outputs[tuple(job["key"])] = {k.replace("__", "/"): data[k] for k in data.files}
    return json.loads(status[-1].split(" ", 1)[1]), recorded, outputs


def test_child_ran_without_this_package_and_tensorflow(replays):
    status, _, _ = replays
    assert status == {"tfagents_vtrace": False, "tensorflow": False,
                      "tensorflow_probability": False}  # fmt: skip


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("name", list(CASES))
def test_trajectory_parity(replays, name, fmt):
    if not _installed(fmt):
        pytest.skip(f"the {fmt} extra is not installed")
    _, recorded, outputs = replays
    net, trajectory = recorded[name]
    got = outputs[(name, fmt)]
    report = parity.compare(trajectory, got, atol=ATOL)
    print(name, fmt, report.to_json())  # the figures, with pytest -s
    assert report.passed, report.failures
    assert report.action_mismatches == {"greedy": 0, "sample": 0}
    assert trajectory["first"].sum() >= 10  # resets inside the window (episodes of 4-12)
    n_states = len(net.state_sizes) or 1
    params = ("logits",) if net.is_discrete else ("loc", "scale")
    expected = {"action", "value", "log_prob", *params}
    expected |= {f"state_{i}" for i in range(n_states)}
    assert {k.split("/", 1)[1] for k in report.max_abs_diff} == expected
    if net.is_discrete:
        np.testing.assert_array_equal(got["greedy/action"], trajectory["greedy/action"])
        np.testing.assert_array_equal(got["sample/action"], trajectory["sample/action"])
        # The noise matters: sampled actions are not the greedy ones.
        assert (got["sample/action"] != got["greedy/action"]).mean() > 0.2
    else:  # sampled and greedy differ, unless both were clipped to the same bound
        sample, greedy = got["sample/action"], got["greedy/action"]
        same_bound = (sample == greedy) & ((sample == BOX.low) | (sample == BOX.high))
        assert np.all((sample != greedy) | same_bound) and (sample != greedy).mean() > 0.5
        assert np.all((sample >= BOX.low) & (sample <= BOX.high))
    if net.state_sizes:  # the state evolves (and is reset): not a pass-through
        assert np.abs(got["sample/state_1"][1:] - got["sample/state_1"][:-1]).max() > 1e-3


def test_litert_model_has_builtin_ops_only(tmp_path):
    pytest.importorskip("ai_edge_litert")
    from ai_edge_litert.interpreter import Interpreter

    config, obs_space, act_space = CASES["lstm_meta_rl"]
    path = export_tflite(make_network(config, obs_space, act_space), tmp_path / "p.tflite")
    data = open(path, "rb").read()
    # The converter ran with TFLITE_BUILTINS only; a Flex (TF) kernel would be named "Flex...".
    assert data[4:8] == b"TFL3" and b"Flex" not in data

    signatures = Interpreter(model_path=path).get_signature_list()
    assert set(signatures) == {"greedy_action", "action", "get_initial_state"}
    flat = ["first", "observation", "prev_action", "prev_reward", "state_0", "state_1", "state_2"]
    assert signatures["greedy_action"]["inputs"] == flat
    assert signatures["action"]["inputs"] == sorted([*flat, "noise"])
    outputs = ["action", "log_prob", "logits", "state_0", "state_1", "state_2", "value"]
    assert signatures["action"]["outputs"] == outputs


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_check_parity_in_process_and_batched(tmp_path, fmt):
    """check_parity (what --check runs) passes; a batch of 5 matches the SavedModel too."""
    if not _installed(fmt):
        pytest.skip(f"the {fmt} extra is not installed")
    config, obs_space, act_space = CASES["lstm_meta_rl"]
    net = make_network(config, obs_space, act_space)
    saved = parity.SavedModelRunner(export_policy(net, tmp_path / "saved"))
    artefact = _export(fmt, net, tmp_path / f"p.{fmt}")
    report = parity.check_parity(saved, artefact, ToyEnv(obs_space, act_space), steps=60)
    assert report.passed and report.steps == 60 and report.episodes >= 5, report
    runner = parity.open_runner(artefact)
    rng = np.random.default_rng(3)
    inputs = {"observation": rng.uniform(-1, 1, (5, 3)).astype(np.float32),
              "first": np.array([1, 0, 0, 1, 0], bool),
              "prev_action": rng.integers(0, 3, 5).astype(np.int32),
              "prev_reward": rng.normal(size=5).astype(np.float32),
              **{f"state_{i}": rng.normal(size=(5, k)).astype(np.float32)
                 for i, k in enumerate(net.state_sizes)}}  # fmt: skip
    noise = rng.random((5, 3), dtype=np.float32)
    for want, got in ((saved.greedy(inputs), runner.greedy(inputs)),
                      (saved.sample(inputs, noise), runner.sample(inputs, noise))):  # fmt: skip
        assert set(got) == set(want)
        for k in want:
            np.testing.assert_allclose(got[k], want[k], atol=ATOL, err_msg=k)


MORE = {  # the other torsos and heads: in process, a shorter window
    "impala_resnet_lstm": (
        NetworkConfig(torso="impala_resnet", cnn_dense_size=8, core="lstm", lstm_size=4),
        gym.spaces.Box(0, 255, (16, 16, 3), np.uint8),
    ),
    "minatar_cnn": (
        NetworkConfig(torso="minatar_cnn", cnn_dense_size=8),
        gym.spaces.Box(0, 1, (10, 10, 4), np.uint8),
    ),
    "discrete_obs_q_head": (
        NetworkConfig(hidden_sizes=(8,), q_head="discrete"),
        gym.spaces.Discrete(5),
    ),
    "acer_sdn": (NetworkConfig(hidden_sizes=(8,), q_head="stochastic_dueling"), OBS),
    "value_torso": (NetworkConfig(hidden_sizes=(8,), value_hidden_sizes=(8,)), OBS),
}


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_other_torsos_and_heads(tmp_path, fmt):
    if not _installed(fmt):
        pytest.skip(f"the {fmt} extra is not installed")
    act_space = gym.spaces.Discrete(3)
    for name, (config, obs_space) in MORE.items():
        net = make_network(config, obs_space, act_space)
        saved = export_policy(net, tmp_path / name)
        artefact = _export(fmt, net, tmp_path / f"{name}.{fmt}")
        report = parity.check_parity(saved, artefact, ToyEnv(obs_space, act_space), steps=30)
        assert report.passed, (name, report.failures)
        if name == "discrete_obs_q_head":
            assert "greedy/q" in report.max_abs_diff


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_parity_check_catches_a_different_policy(tmp_path, fmt):
    """An artefact of slightly different weights fails: the check can fail."""
    if not _installed(fmt):
        pytest.skip(f"the {fmt} extra is not installed")
    config, obs_space, act_space = CASES["gaussian"]
    net = make_network(config, obs_space, act_space)
    saved = export_policy(net, tmp_path / "saved")
    bias = net.value_head.value.bias
    bias.assign(bias + 1e-3)  # the value only: actions and parameters still agree
    artefact = _export(fmt, net, tmp_path / f"p.{fmt}")
    report = parity.check_parity(saved, artefact, ToyEnv(obs_space, act_space), steps=20)
    assert not report.passed
    assert report.failures == [
        f"{k}/value: max abs diff {report.max_abs_diff[f'{k}/value']:.3g} > "
        "1e-05 + 1e-06 * |reference|"
        for k in ("greedy", "sample")
    ]
    assert abs(report.max_abs_diff["greedy/value"] - 1e-3) < 1e-6


def test_compare_counts_mismatches_and_nan():
    ref = {"first": np.ones((4, 1), bool), "greedy/action": np.array([[0], [1], [2], [1]]),
           "sample/action": np.zeros((4, 1, 2), np.float32),
           "sample/value": np.zeros((4, 1), np.float32)}  # fmt: skip
    got = {"greedy/action": np.array([[0], [2], [2], [1]]),
           "sample/action": np.array([[[0, 0]], [[np.nan, 0]], [[0, 2e-5]], [[0, 0]]], np.float32),
           "sample/value": np.full((4, 1), 5e-6, np.float32)}  # fmt: skip
    report = parity.compare(ref, got)
    assert not report.passed and report.action_mismatches == {"greedy": 1, "sample": 2}
    assert report.failures == ["greedy/action: differs at 1 of 4 steps",
                               "sample/action: differs at 2 of 4 steps"]  # fmt: skip
    with pytest.raises(ValueError, match="candidate: no output 'sample/value'"):
        parity.compare(ref, {k: v for k, v in got.items() if k != "sample/value"})
    got["sample/value"] = np.full((4, 1), np.nan, np.float32)
    assert (
        "sample/value: max abs diff nan > 1e-05 + 1e-06 * |reference|"
        in parity.compare(ref, got).failures
    )


def test_compare_tolerance_grows_with_the_reference():
    """A value of 100 two float32 spacings off (1.53e-5: a solved CartPole's value through
    ONNX) is close; 1e-3 off is not; a logit near 0 gets no more than ``atol``."""
    ref = {"first": np.ones((2, 1), bool),
           "greedy/value": np.array([[100.0], [-100.0]], np.float32),
           "greedy/logits": np.zeros((2, 1, 2), np.float32)}  # fmt: skip
    near = {"greedy/value": ref["greedy/value"] + np.float32(1.53e-5),
            "greedy/logits": ref["greedy/logits"] + np.float32(9e-6)}  # fmt: skip
    assert parity.compare(ref, near).passed
    far = {**near, "greedy/value": ref["greedy/value"] - np.float32(1e-3)}
    assert parity.compare(ref, far).failures == [
        "greedy/value: max abs diff 0.000999 > 1e-05 + 1e-06 * |reference|"
    ]
    off = {**near, "greedy/logits": ref["greedy/logits"] + np.float32(2e-5)}
    assert [f.split(":")[0] for f in parity.compare(ref, off).failures] == ["greedy/logits"]


def test_replay_teacher_forcing_feeds_the_reference_states():
    """replay carries the candidate's own state, or with teacher_forcing the reference's
    ``sample/state_*`` of the previous step; every noise input is passed by name."""

    class Recorder:  # a candidate whose state output is its input + 1
        def __init__(self):
            self.states, self.noises = [], []

        def initial_state(self, batch_size):
            return {"state_0": np.zeros((batch_size, 2), np.float32)}

        def greedy(self, inputs):
            return {"action": np.zeros(1, np.int32), "state_0": inputs["state_0"] + 1}

        def sample(self, inputs, noise):
            self.states.append(inputs["state_0"].copy())
            self.noises.append(noise)
            return {"action": np.zeros(1, np.int32), "state_0": inputs["state_0"] + 1}

    steps = 4
    reference_states = np.arange(steps * 2, dtype=np.float32).reshape(steps, 1, 2) * 10
    trajectory = {"observation": np.zeros((steps, 1, 3), np.float32),
                  "first": np.zeros((steps, 1), bool),
                  "prev_action": np.zeros((steps, 1), np.int32),
                  "prev_reward": np.zeros((steps, 1), np.float32),
                  "noise": np.full((steps, 1, 2), 0.5, np.float32),
                  "b_noise": np.full((steps, 1), 0.25, np.float32),
                  "sample/state_0": reference_states}  # fmt: skip
    own, forced = Recorder(), Recorder()
    parity.replay(own, trajectory)
    parity.replay(forced, trajectory, teacher_forcing=True)
    np.testing.assert_array_equal(np.stack(own.states)[:, 0, 0], [0, 1, 2, 3])
    np.testing.assert_array_equal(np.stack(forced.states[1:]), reference_states[:-1])
    np.testing.assert_array_equal(forced.states[0], np.zeros((1, 2)))
    assert set(forced.noises[0]) == {"noise", "b_noise"}
    assert forced.noises[2]["b_noise"].tolist() == [0.25]


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_file_export_replaces_only_its_own_format(tmp_path, fmt):
    if not _installed(fmt):
        pytest.skip(f"the {fmt} extra is not installed")
    config, obs_space, act_space = CASES["mlp_categorical"]
    net = make_network(config, obs_space, act_space)
    write = export_tflite if fmt == "tflite" else export_onnx
    notes = tmp_path / f"notes.{fmt}"
    notes.write_text("mine")
    for overwrite in (False, True):
        with pytest.raises(ValueError, match=r"^path: .* is a file that is not a"):
            write(net, notes, overwrite=overwrite)
    assert notes.read_text() == "mine"
    target = tmp_path / f"p.{fmt}"
    write(net, target)
    with pytest.raises(ValueError, match=r"^path: .* exists; pass overwrite=True"):
        write(net, target)
    before = target.stat().st_mtime_ns
    write(net, target, overwrite=True)
    assert target.stat().st_mtime_ns >= before
    assert parity.open_runner(target).initial_state(2)["state_0"].shape == (2, 1)
    assert sorted(os.listdir(tmp_path)) == sorted([notes.name, target.name])  # no temp files
    if fmt == "onnx":
        import onnx

        meta = {p.key: p.value for p in onnx.load(str(target)).metadata_props}
        assert json.loads(meta["tfagents_vtrace"])["noise_law"] == "uniform"


@pytest.mark.parametrize("name", ["mlp_categorical", "gaussian", "tanh_gaussian"])
def test_action_from_noise_draws_the_policy_distribution(name):
    """The SavedModel's action_from_noise (no extra needed): Gumbel-max frequencies match the
    softmax; log_prob matches TFP's distribution for every kind."""
    import tensorflow as tf

    from tfagents_vtrace.export.actor_critic import ActorCriticPolicy

    net = _make(name)
    module = ActorCriticPolicy(net)
    n = 20000
    obs = np.tile(np.array([[0.3, -0.5, 0.9]], np.float32), (n, 1))
    rng = np.random.default_rng(7)
    noise = parity.draw_noises(_metadata(net), rng, n)["noise"]
    first = np.ones(n, bool)
    prev_action = np.zeros((n, *net.action_spec.shape), net.action_spec.dtype.as_numpy_dtype)
    state = module.get_initial_state(tf.constant(n))
    args = (obs, first, prev_action, np.zeros(n, np.float32), state)
    out = module.action_from_noise(*args, noise)
    greedy = module.greedy_action(*args)
    params = {k: out[k] for k in ("logits", "loc", "scale") if k in out}
    pre = None if net.is_discrete else out["loc"].numpy() + out["scale"].numpy() * noise
    if name == "tanh_gaussian":  # float64 from the pre-squash draw: TFP inverts the float32
        want = _tanh_gaussian_log_prob(params, noise)  # action (atanh loses ~1e-4 near +-1)
    elif name == "gaussian":  # the unclipped draw's (the action is clipped to the Box)
        want = net.distribution(params).log_prob(pre).numpy()
    else:
        want = net.distribution(params).log_prob(out["action"]).numpy()
    np.testing.assert_allclose(out["log_prob"].numpy(), want, atol=2e-5)
    np.testing.assert_allclose(out["value"].numpy(), greedy["value"].numpy(), atol=1e-6)
    if net.is_discrete:
        probs = tf.nn.softmax(out["logits"][0]).numpy()
        freq = np.bincount(out["action"].numpy(), minlength=net.num_actions) / n
        assert probs.max() - probs.min() > 0.1  # a policy far from uniform
        np.testing.assert_allclose(freq, probs, atol=0.015)
    else:
        if name == "gaussian":
            clipped = np.clip(pre, BOX.low, BOX.high)
            np.testing.assert_allclose(out["action"].numpy(), clipped, atol=1e-6)
        else:
            squashed = (BOX.high + BOX.low) / 2 + (BOX.high - BOX.low) / 2 * np.tanh(pre)
            np.testing.assert_allclose(out["action"].numpy(), squashed, atol=1e-6)


def _tanh_gaussian_log_prob(params, noise):
    loc, scale = (params[k].numpy().astype(np.float64) for k in ("loc", "scale"))
    x = loc + scale * noise
    gauss = -0.5 * noise.astype(np.float64) ** 2 - np.log(scale) - 0.5 * np.log(2 * np.pi)
    half = (BOX.high.astype(np.float64) - BOX.low) / 2
    return (gauss - np.log(half * (1 - np.tanh(x) ** 2))).sum(-1)


def _metadata(net):
    from tfagents_vtrace.export.actor_critic import policy_metadata

    return policy_metadata(net)
