"""experiments.evaluate: the SavedModel episode loop and the CLI's JSON line."""

import json
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

import tfagents_vtrace.envs  # noqa: F401 - registers CartPoleNoVel-v1
from tfagents_vtrace.commands import evaluate

# One xdist worker runs the module (make test: --dist loadgroup), so its module-scoped
# fixture is built once, not once per worker.
pytestmark = pytest.mark.xdist_group("evaluate")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _rule(count):
    """Push right 3 steps, left 3 steps, ... counted from the episode's first step."""
    return (
        ((count // 3) % 2 == 0).astype(np.int32)
        if hasattr(count, "astype")
        else int((count // 3) % 2 == 0)
    )


class CounterPolicy(tf.Module):
    """A hand-written policy following the export contract, with a step counter as state.

    Its graph asserts what the evaluation loop must feed: prev_action / prev_reward are 0 at
    ``first``; otherwise prev_reward is CartPole's 1 and prev_action is its own last action.
    """

    def __init__(self):
        super().__init__()
        sig = [
            tf.TensorSpec([None, 4], tf.float32, "observation"),
            tf.TensorSpec([None], tf.bool, "first"),
            tf.TensorSpec([None], tf.int32, "prev_action"),
            tf.TensorSpec([None], tf.float32, "prev_reward"),
            (tf.TensorSpec([None, 1], tf.float32, "state_0"),),
        ]
        self.action = tf.function(self._step, input_signature=sig)
        self.greedy_action = tf.function(self._step, input_signature=sig)
        self.get_initial_state = tf.function(
            lambda batch_size: (tf.zeros([batch_size, 1]),),
            input_signature=[tf.TensorSpec([], tf.int32, "batch_size")],
        )

    def _step(self, observation, first, prev_action, prev_reward, state):
        last = tf.cast(state[0][:, 0], tf.int32)
        rule = lambda c: tf.cast(tf.equal((c // 3) % 2, 0), tf.int32)  # noqa: E731
        ok_reward = tf.where(first, tf.equal(prev_reward, 0.0), tf.equal(prev_reward, 1.0))
        ok_action = tf.where(first, tf.equal(prev_action, 0), tf.equal(prev_action, rule(last)))
        with tf.control_dependencies(
            [
                tf.debugging.assert_equal(tf.reduce_all(ok_reward), True, "prev_reward"),
                tf.debugging.assert_equal(tf.reduce_all(ok_action), True, "prev_action"),
            ]
        ):
            count = tf.where(first, 0, last + 1)
        return {"action": rule(count), "state": (tf.cast(count, tf.float32)[:, None],)}


@pytest.fixture(scope="module")
def counter_policy(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("counter"))
    tf.saved_model.save(CounterPolicy(), path)
    return tf.saved_model.load(path)


def _reference_lengths(seed, episodes):
    """Episode lengths of the counter rule on plain single CartPole-v1 envs, seeded alike."""
    env = gym.make("CartPole-v1")
    env.reset(seed=seed)
    lengths = []
    for _ in range(episodes):
        env.reset()
        n = 0
        while True:
            _, _, term, trunc, _ = env.step(_rule(n))
            n += 1
            if term or trunc:
                break
        lengths.append(n)
    return lengths


def test_state_first_and_prev_inputs_match_a_plain_loop(counter_policy):
    returns, lengths = evaluate.run_episodes(counter_policy, "CartPole-v1", 6, seed=7, num_envs=1)
    expected = _reference_lengths(7, 6)
    assert len(set(expected)) > 1  # the rule gives episodes of different lengths
    assert lengths == expected
    assert returns == [float(n) for n in expected]


def test_episodes_spread_over_envs(counter_policy):
    returns, lengths = evaluate.run_episodes(counter_policy, "CartPole-v1", 7, seed=0, num_envs=3)
    assert len(returns) == 7 and returns == [float(n) for n in lengths]
    assert evaluate.summarize(returns)["episodes"] == 7


def test_summarize():
    s = evaluate.summarize([1.0, 3.0])
    assert s == {"mean": 2.0, "std": 1.0, "min": 1.0, "max": 3.0, "episodes": 2}


def test_bad_arguments(counter_policy):
    with pytest.raises(ValueError, match="episodes"):
        evaluate.run_episodes(counter_policy, "CartPole-v1", 0)
    with pytest.raises(ValueError, match="num_envs"):
        evaluate.run_episodes(counter_policy, "CartPole-v1", 2, num_envs=0)


def _export(path, env_id, **config):
    from tfagents_vtrace.export.saved_model import export_policy
    from tfagents_vtrace.networks import NetworkConfig, make_network

    env = gym.make(env_id)
    net = make_network(NetworkConfig(**config), env.observation_space, env.action_space)
    return export_policy(net, path)


def test_real_feed_forward_export(tmp_path):
    path = _export(str(tmp_path / "ff"), "CartPole-v1", hidden_sizes=(8,))
    policy = tf.saved_model.load(path)
    for greedy in (True, False):
        returns, lengths = evaluate.run_episodes(
            policy, "CartPole-v1", 3, seed=1, greedy=greedy, num_envs=2
        )
        assert len(returns) == 3 and all(1 <= r <= 500 for r in returns)


def test_cli_lstm_export_prints_json(tmp_path):
    path = _export(
        str(tmp_path / "lstm"),
        "CartPoleNoVel-v1",
        hidden_sizes=(8,),
        core="lstm",
        lstm_size=8,
        use_prev_action=True,
        use_prev_reward=True,
    )
    cmd = [sys.executable, "-m", "experiments.evaluate", f"--policy={path}"]
    cmd += ["--env=CartPoleNoVel-v1", "--episodes=4", "--num_envs=2", "--seed=3"]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    summary = json.loads(lines[-1])
    episode_returns = [float(line.split()[3]) for line in lines[:-1]]
    assert len(episode_returns) == 4 and summary["episodes"] == 4
    assert summary["mean"] == pytest.approx(np.mean(episode_returns), abs=1e-3)
    assert summary["min"] == min(episode_returns) and summary["max"] == max(episode_returns)
    assert summary["env"] == "CartPoleNoVel-v1" and summary["greedy"] is True


# ----------------------------------------------------------------------------- bad input
def _cli(*args):
    cmd = [sys.executable, "-m", "experiments.evaluate", *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def cartpole_policy_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("cp") / "policy")
    return _export(path, "CartPole-v1", hidden_sizes=(8,))


@pytest.mark.parametrize(
    "flag, expected",
    [
        ("--episodes=0", "error: --episodes: expected an int >= 1, received 0"),
        ("--num_envs=0", "error: --num_envs: expected an int >= 1, received 0"),
        ("--policy=/no/such", "error: --policy: no such file or directory: /no/such"),
        (
            "--env=NoSuchEnv-v9",
            "error: --env: 'NoSuchEnv-v9' is not a registered gymnasium id (an environment of your "
            "own: name the module that registers it, --env=package.module:ID)",
        ),  # noqa: E501
    ],
)
def test_cli_bad_flag_is_one_line_and_exit_2(cartpole_policy_path, flag, expected):
    # These are refused before TensorFlow loads, so stderr holds nothing else.
    out = _cli(f"--policy={cartpole_policy_path}", "--env=CartPole-v1", flag)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [expected]
    assert out.stdout == ""


def test_flag_checks(tmp_path):
    good = str(tmp_path)
    (tmp_path / "saved_model.pb").write_bytes(b"")
    assert evaluate.check_flags(good, 1, 1, '{"a": 1}') == {"a": 1}
    with pytest.raises(
        evaluate.FlagError, match=r"^--episodes: expected an int >= 1, received -3$"
    ):
        evaluate.check_flags(good, -3, 1, "{}")
    (tmp_path / "empty").mkdir()
    with pytest.raises(evaluate.FlagError, match=r"^--policy: no SavedModel at .*saved_model\.pb"):
        evaluate.check_flags(str(tmp_path / "empty"), 1, 1, "{}")
    with pytest.raises(evaluate.FlagError, match=r"^--env_kwargs: expected a JSON object"):
        evaluate.check_flags(good, 1, 1, "[1, 2]")
    with pytest.raises(evaluate.FlagError, match=r"^--env_kwargs: expected a JSON object"):
        evaluate.check_flags(good, 1, 1, "{oops")
    with pytest.raises(evaluate.FlagError, match=r"^--env: CartPole-v9: .*version `v9`"):
        evaluate.env_spaces("CartPole-v9", {})


def test_policy_env_mismatch_names_both_shapes(cartpole_policy_path):
    policy = tf.saved_model.load(cartpole_policy_path)
    io = evaluate.policy_io(policy)
    assert io["observation_shape"] == (4,) and io["discrete"] and io["num_actions"] == 2
    evaluate.check_policy_env(io, "CartPole-v1", *evaluate.env_spaces("CartPole-v1", {}), "P")
    with pytest.raises(evaluate.FlagError) as e:
        evaluate.check_policy_env(io, "Acrobot-v1", *evaluate.env_spaces("Acrobot-v1", {}), "P")
    expected = "Acrobot-v1 gives observations of shape (6,), the policy at P expects (4,)"
    assert str(e.value) == "--env: " + expected
    box4 = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    # an integer Box is fed cast to float32, as a policy trained on it takes it
    evaluate.check_policy_env(io, "X", gym.spaces.Box(0, 9, (4,), np.int64),
                              gym.spaces.Discrete(2), "P")  # fmt: skip
    images = gym.spaces.Box(0, 255, (4,), np.uint8)
    theirs = "the policy at P gives 2 discrete actions"
    cases = [
        (box4, gym.spaces.Discrete(3), f"X takes 3 discrete actions, {theirs}"),
        (
            box4,
            gym.spaces.Box(-1.0, 1.0, (1,)),
            f"X takes continuous actions of shape (1,), {theirs}",
        ),
        (
            images,
            gym.spaces.Discrete(2),
            "X gives uint8 observations, the policy at P expects float32",
        ),
    ]
    for obs_space, act_space, message in cases:
        with pytest.raises(evaluate.FlagError) as e:
            evaluate.check_policy_env(io, "X", obs_space, act_space, "P")
        assert str(e.value) == "--env: " + message


# ------------------------------------------------------------------------- a damaged policy
def _damage(path, how):
    """``path`` (a copy of an exported policy) damaged as a kill, a full disk or a careless
    copy leaves it."""
    import glob
    import shutil

    pb = os.path.join(path, "saved_model.pb")
    variables = os.path.join(path, "variables")
    if how == "truncated_pb":
        os.truncate(pb, os.path.getsize(pb) // 3)
    elif how == "empty_pb":
        open(pb, "wb").close()
    elif how == "garbage_pb":
        open(pb, "wb").write(b"\xff" * 512)
    elif how == "no_variables":
        shutil.rmtree(variables)
    elif how == "no_index":
        os.remove(os.path.join(variables, "variables.index"))
    elif how == "truncated_data":
        (data,) = glob.glob(os.path.join(variables, "variables.data-*"))
        os.truncate(data, 50)
    elif how == "no_data":
        (data,) = glob.glob(os.path.join(variables, "variables.data-*"))
        os.remove(data)


DAMAGE = {
    "truncated_pb": "saved_model.pb is truncated or corrupt",
    "empty_pb": "saved_model.pb is empty",
    "garbage_pb": "saved_model.pb is truncated or corrupt",
    "no_variables": "its variables/ directory is missing",
    "no_index": "variables/variables.index is missing",
    "truncated_data": "its files do not read back (",
    "no_data": "its files do not read back (",
}


@pytest.mark.parametrize("how", DAMAGE)
def test_load_policy_of_a_damaged_export_raises_one_error_naming_it(
    cartpole_policy_path, tmp_path, how
):
    import shutil

    import tfagents_vtrace as tv
    from tfagents_vtrace.export.playing import PolicyLoadError

    path = str(tmp_path / "policy")
    shutil.copytree(cartpole_policy_path, path)
    _damage(path, how)
    for load in (tv.load_policy, lambda p: tv.evaluate(p, "CartPole-v1", episodes=1)):
        with pytest.raises(PolicyLoadError) as raised:
            load(path)
        message = str(raised.value)
        assert message.startswith(f"policy: cannot load {path!r}: {DAMAGE[how]}"), message
        assert "\n" not in message and raised.value.damaged


def test_load_policy_of_a_savedmodel_that_is_no_policy_says_so(tmp_path):
    from tfagents_vtrace.export.playing import PolicyLoadError, load_policy

    module = tf.Module()
    module.f = tf.function(lambda x: x + 1, input_signature=[tf.TensorSpec([], tf.float32)])
    tf.saved_model.save(module, str(tmp_path / "other"))
    with pytest.raises(PolicyLoadError, match=r"^policy: cannot load .*: not an exported policy"):
        load_policy(str(tmp_path / "other"))
    with pytest.raises(PolicyLoadError, match=r"^policy: cannot load .*: no SavedModel") as e:
        load_policy(str(tmp_path))
    assert not e.value.damaged and isinstance(e.value, ValueError)


@pytest.mark.slow  # subprocesses importing TensorFlow
def test_cli_on_a_damaged_policy_is_one_line_and_exit_1(cartpole_policy_path, tmp_path):
    import shutil

    for how in ("truncated_pb", "no_variables"):  # the two cases
        path = str(tmp_path / how)
        shutil.copytree(cartpole_policy_path, path)
        _damage(path, how)
        out = _cli(f"--policy={path}", "--env=CartPole-v1", "--episodes=1")
        lines = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
        assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
        assert lines == [f"error: --policy: cannot load {path!r}: {DAMAGE[how]}; export it again "
                         "(tfv-export --logdir=RUN --overwrite)"], out.stderr[-2000:]  # fmt: skip
        assert out.stdout == ""


# ----------------------------------------------------------------------------- --video
class NoRenderEnv(gym.Env):
    """An environment that lists no render mode (it takes render_mode and ignores it)."""

    metadata = {"render_modes": []}
    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, render_mode=None):
        self.render_mode = render_mode

    def reset(self, *, seed=None, options=None):
        return np.zeros(4, np.float32), {}

    def step(self, action):
        return np.zeros(4, np.float32), 1.0, True, False, {}


def _decoded(path):
    """The frames of an MP4 file, decoded by PyAV: a list of [H, W, 3] uint8 arrays."""
    import av

    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def test_video_records_every_episode_of_the_first_env(counter_policy, tmp_path):
    """With one env every episode is recorded: one file per episode, one frame per
    observation (the first and one per step), at CartPole's rendered size, the first frame
    the rendering of the episode's first state (a plain CartPole seeded alike)."""
    pytest.importorskip("av")
    pytest.importorskip("pygame")
    import tfagents_vtrace as tv

    out = tmp_path / "videos"
    result = tv.evaluate(counter_policy, "CartPole-v1", 3, seed=7, num_envs=1, video_dir=out)
    expected = _reference_lengths(7, 3)
    assert [int(r) for r in result["returns"]] == expected
    assert result["videos"] == [str(out / f"episode-{k}.mp4") for k in range(3)]
    assert sorted(os.listdir(out)) == ["episode-0.mp4", "episode-1.mp4", "episode-2.mp4"]
    reference = gym.make("CartPole-v1", render_mode="rgb_array")
    reference.reset(seed=7)
    reference.reset()  # the evaluation's first episode (as _reference_lengths plays it)
    first_frame = reference.render()
    reference.close()
    for path, length in zip(result["videos"], expected):
        assert os.path.getsize(path) > 0
        frames = _decoded(path)
        assert len(frames) == length + 1
        assert all(f.shape == first_frame.shape == (400, 600, 3) for f in frames)
    frame = _decoded(result["videos"][0])[0].astype(np.float64)
    assert np.abs(frame - first_frame).mean() < 3.0  # H.264 is lossy, not the picture
    assert np.abs(frame - _decoded(result["videos"][1])[0]).mean() > 0.0  # another state


def test_video_of_several_envs_records_the_first_envs_share(counter_policy, tmp_path):
    pytest.importorskip("av")
    pytest.importorskip("pygame")
    import tfagents_vtrace as tv
    from tfagents_vtrace.export.playing import recorded_episodes

    assert recorded_episodes(5, 2) == 2 and recorded_episodes(3, 8) == 1
    result = tv.evaluate(counter_policy, "CartPole-v1", 5, num_envs=2, video_dir=tmp_path)
    assert result["episodes"] == 5
    assert sorted(os.listdir(tmp_path)) == ["episode-0.mp4", "episode-1.mp4"]  # no .part left
    assert all(len(_decoded(p)) > 1 for p in result["videos"])


def test_video_refusals_name_video_dir(counter_policy, tmp_path, monkeypatch):
    import importlib.util

    import tfagents_vtrace as tv

    (tmp_path / "episode-1.mp4").write_bytes(b"mine")
    kw = dict(episodes=2, num_envs=1, video_dir=tmp_path)
    if importlib.util.find_spec("av") is not None:
        with pytest.raises(ValueError, match=r"^video_dir: .*episode-1\.mp4 exists"):
            tv.evaluate(counter_policy, "CartPole-v1", **kw)
        assert (tmp_path / "episode-1.mp4").read_bytes() == b"mine"  # not overwritten
        with pytest.raises(ValueError, match=r"^video_dir: .* has no rgb_array rendering"):
            tv.evaluate(counter_policy, NoRenderEnv, 1, video_dir=tmp_path / "none")
        assert not (tmp_path / "none").exists()
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "av" else real(name, *a)
    )
    message = (
        "video_dir: recording videos needs PyAV, which is not installed: "
        "pip install 'tfagents_vtrace[video]'"
    )
    with pytest.raises(ValueError) as e:
        tv.evaluate(counter_policy, "CartPole-v1", 1, video_dir=tmp_path / "v")
    assert str(e.value) == message
    with pytest.raises(evaluate.FlagError) as e:
        evaluate.check_flags(str(tmp_path), 1, 1, "{}", video=str(tmp_path / "v"))
    assert str(e.value) == "--video: " + message.partition(": ")[2]


@pytest.mark.slow  # a subprocess importing TensorFlow
def test_cli_video_writes_the_files_it_lists(cartpole_policy_path, tmp_path):
    pytest.importorskip("av")
    pytest.importorskip("pygame")
    out = _cli(f"--policy={cartpole_policy_path}", "--env=CartPole-v1", "--episodes=2",
               "--num_envs=1", f"--video={tmp_path / 'v'}")  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    summary = json.loads(lines[-1])
    lengths = [int(line.split()[5]) for line in lines[:-1]]
    assert summary["videos"] == [str(tmp_path / "v" / f"episode-{k}.mp4") for k in range(2)]
    assert [len(_decoded(p)) for p in summary["videos"]] == [n + 1 for n in lengths]
    again = _cli(f"--policy={cartpole_policy_path}", "--env=CartPole-v1", "--episodes=2",
                 "--num_envs=1", f"--video={tmp_path / 'v'}")  # fmt: skip
    assert again.returncode == 2 and again.stderr.strip().splitlines() == [
        f"error: --video: {tmp_path / 'v' / 'episode-0.mp4'} exists (an earlier recording?); "
        "remove it or choose another directory"
    ]


def test_a_policy_taking_an_action_mask_evaluates_on_its_multibinary_env(tmp_path):
    from tfagents_vtrace.export.saved_model import export_policy
    from tfagents_vtrace.networks import NetworkConfig, make_network

    obs_space = gym.spaces.Dict(
        {
            "clock": gym.spaces.Box(0.0, 1.0, (1,), np.float32),
            "action_mask": gym.spaces.MultiBinary(3),  # int8, fed to the policy as float32
        }
    )
    act_space = gym.spaces.Discrete(3)
    path = export_policy(make_network(NetworkConfig(), obs_space, act_space), tmp_path / "p")
    io = evaluate.policy_io(tf.saved_model.load(str(path)))
    evaluate.check_policy_env(io, "Masked-v0", obs_space, act_space, "P")
    # PettingZoo's masks are int8 Boxes: fed as float32 too
    ints = gym.spaces.Dict(
        {"clock": obs_space["clock"], "action_mask": gym.spaces.Box(0, 1, (3,), np.int8)}
    )
    evaluate.check_policy_env(io, "X", ints, act_space, "P")
    # a uint8 image where the policy takes float32 is refused
    images = gym.spaces.Dict(
        {"clock": gym.spaces.Box(0, 255, (1,), np.uint8), "action_mask": obs_space["action_mask"]}
    )
    with pytest.raises(evaluate.FlagError, match="gives uint8 observations"):
        evaluate.check_policy_env(io, "X", images, act_space, "P")
