"""Games whose agents form several groups, each trained by its own learner: two agents of
different spaces (one leaving early) give two policies by default; agents of one space give
one policy, or two through policy_for_agent. From Python and the command line; the run
resumes; each group's exported policy plays with plain TensorFlow."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

pytest.importorskip("pettingzoo")

import tfagents_vtrace as tv  # noqa: E402
from tests import games  # noqa: E402
from tests.run_kill import kill_after_a_checkpoint  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
_ITERATIONS = "{}__optimizer_variables/0/.ATTRIBUTES/VARIABLE_VALUE"  # the update count
SMALL = dict(num_envs=8, unroll_length=8, hidden_sizes=(16,), eval_episodes=4, verbose=0)


def by_name(agent):
    """Every agent its own group."""
    return f"team_{agent}"


def test_two_agents_of_different_spaces_train_two_policies_and_resume(tmp_path):
    logdir = str(tmp_path / "run")
    first = tv.train("impala", env=games.make_uneven, logdir=logdir, total_steps=1024, **SMALL)
    assert first["eval_length"] == 4.5  # a plays 6 steps, b leaves after 3
    assert sorted(os.listdir(os.path.join(logdir, "policy"))) == ["a", "b"]
    rows = [json.loads(line) for line in open(os.path.join(logdir, "metrics.jsonl"))]
    assert any("a/loss" in row and "b/loss" in row for row in rows)
    again = tv.train("impala", env=games.make_uneven, logdir=logdir, total_steps=2048, **SMALL)
    assert again["resumed"] and again["step"] >= 2048
    # each group's policy takes its own agent's observation and acts in its own space
    a = tv.load_policy(os.path.join(logdir, "policy", "a"))
    b = tv.load_policy(os.path.join(logdir, "policy", "b"))
    act_a, _ = a.step(np.zeros((3, 2), np.float32), a.initial_state(3), greedy=True)
    act_b, _ = b.step(np.ones((3, 3), np.float32), b.initial_state(3), greedy=True)
    assert set(np.asarray(act_a).tolist()) <= {0, 1}
    assert set(np.asarray(act_b).tolist()) <= {0, 1, 2}
    # one group's policy cannot play the whole game: one line naming env
    with pytest.raises(
        ValueError, match=r"^env: .* is a game of several groups of agents \(a, b\)"
    ):
        tv.evaluate(a, games.make_uneven, episodes=2)


def test_agents_of_one_space_share_a_policy_or_split_by_policy_for_agent(tmp_path):
    shared = tv.train("a2c", env=games.make_relay, logdir=str(tmp_path / "one"),
                      total_steps=512, **SMALL)  # fmt: skip
    assert os.path.isfile(tmp_path / "one" / "policy" / "saved_model.pb")  # one policy
    split = tv.train("a2c", env=games.make_relay, logdir=str(tmp_path / "two"),
                     total_steps=512, policy_for_agent=by_name, **SMALL)  # fmt: skip
    assert sorted(os.listdir(tmp_path / "two" / "policy")) == ["team_a", "team_b"]
    config = json.load(open(tmp_path / "two" / "config.json"))
    assert config["run_config"]["env_kwargs"]["agent_groups"] == {"a": "team_a", "b": "team_b"}
    assert shared["eval_length"] == split["eval_length"] == 4.5


@pytest.mark.slow  # two training subprocesses, each importing TensorFlow
def test_cli_trains_groups_named_by_a_module_function_and_resumes_after_a_kill(tmp_path):
    """SIGKILLed after a checkpoint of the running training, the same command resumes
    every group from it: both learners' entries restored, the rows up to it kept."""
    logdir = str(tmp_path / "run")
    cmd = [sys.executable, "-m", "experiments.train", "--agent=impala",
           "--env=tests.games:make_relay",
           "--policy_for_agent=tests.api.test_game_groups_runs:by_name",
           f"--logdir={logdir}", "--num_envs=8", "--unroll_length=8", "--hidden_sizes=16",
           "--eval_episodes=2"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([*cmd, "--total_steps=100000000", "--checkpoint_every_s=0.2"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    saved = kill_after_a_checkpoint(proc, logdir)
    assert saved > 0
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(f"{logdir}/checkpoints"))
    iterations = {group: int(reader.get_tensor(_ITERATIONS.format(group)))
                  for group in ("team_a", "team_b")}  # fmt: skip
    assert all(n > 0 for n in iterations.values()), iterations
    rows_file = os.path.join(logdir, "metrics.jsonl")
    before = [json.loads(line)["step"] for line in open(rows_file) if line.endswith("\n")]
    again = subprocess.run([*cmd, f"--total_steps={saved + 1024}"], capture_output=True,
                           text=True, cwd=ROOT, env=env, timeout=600)  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    final = json.load(open(os.path.join(logdir, "final.json")))
    assert final["resumed"] and final["step"] == saved + 1024
    assert sorted(os.listdir(os.path.join(logdir, "policy"))) == ["team_a", "team_b"]
    rows = [json.loads(line) for line in open(rows_file)]
    steps = [row["step"] for row in rows]
    assert [s for s in before if s <= saved] == [s for s in steps if s <= saved]
    assert all(a < b for a, b in zip(steps, steps[1:]))
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(f"{logdir}/checkpoints"))
    after = {group: int(reader.get_tensor(_ITERATIONS.format(group))) for group in iterations}
    # each optimizer went on from its own count: together, every update of the run, each
    # num_epochs x num_minibatches optimizer steps
    agent = json.load(open(os.path.join(logdir, "config.json")))["agent_config"]
    per_update = agent["num_epochs"] * agent["num_minibatches"]
    assert all(after[g] > iterations[g] for g in after)
    assert sum(after.values()) == final["updates"] * per_update


def test_settings_a_game_of_several_groups_refuses(tmp_path):
    with pytest.raises(ValueError, match=r"^env: a3c does not train a game of several groups"):
        tv.train("a3c", env=games.make_uneven, logdir=str(tmp_path / "a"), total_steps=64)
    with pytest.raises(ValueError, match=r"^env_groups: a game of several groups"):
        tv.train("impala", env=games.make_uneven, logdir=str(tmp_path / "b"), env_groups=2,
                 num_envs=8, total_steps=64)  # fmt: skip
    with pytest.raises(ValueError, match=r"^policy_for_agent: agents 'a' and 'b' of group 'x'"):
        tv.train("impala", env=games.make_uneven, logdir=str(tmp_path / "c"),
                 policy_for_agent=lambda agent: "x", total_steps=64)  # fmt: skip
    assert not any((tmp_path / name).exists() for name in "abc")


def test_a_groups_vector_is_never_made_again_alone(tmp_path):
    """A NaN reward makes an actor remake its vector; a group's share of games the other
    group steps too cannot be: the run ends at once with the cause, and a checkpoint."""
    from tfagents_vtrace.envs.multi_agent import GameHubBroken

    start = time.monotonic()
    with pytest.raises(GameHubBroken, match=r"the game of many agents failed \(.*nan") as broken:
        tv.train("impala", env=games.make_nan_reward, logdir=str(tmp_path / "run"),
                 total_steps=10**6, **SMALL)  # fmt: skip
    assert time.monotonic() - start < 120, "not after a group's wait timed out"
    assert os.listdir(tmp_path / "run" / "checkpoints"), broken.value


def test_the_groups_of_one_game_share_its_seed_but_not_their_draws(monkeypatch):
    """Both groups' actors of one index step the same games (one seed), while their actions
    are sampled with seeds of their own: equal seeds would draw the same numbers for both."""
    from tfagents_vtrace.envs.multi_agent import GameHubs
    from tfagents_vtrace.envs.user_envs import resolve_env
    from tfagents_vtrace.networks import NetworkConfig
    from tfagents_vtrace.runtime.acting import actor as actor_lib

    seeds = []
    make_policy = actor_lib.make_policy

    def recording(network, impl, seed=0, label=""):
        seeds.append(seed)
        return make_policy(network, impl, seed=seed, label=label)

    monkeypatch.setattr(actor_lib, "make_policy", recording)
    env_id = resolve_env(games.make_uneven)
    hubs = GameHubs(env_id, 2, 30.0)
    actors = [
        actor_lib.Actor(
            actor_lib.ActorSpec(
                env_id, NetworkConfig(hidden_sizes=(8,)), 2, 4, seed=5, env_kwargs={"group": g}
            ),
            0,
            None,
            lambda seed, g=g: hubs.vector(g, seed),
        )  # fmt: skip
        for g in ("a", "b")
    ]
    assert seeds[0] != seeds[1]
    assert actors[0]._seed(0) == actors[1]._seed(0)  # the games' seed, shared
    hubs.abort()
