"""Self-play (:mod:`tfagents_vtrace.runtime.self_play`): the snapshot pool's slots, draws and
checkpoint, games drawing their opponents from it, and a Connect Four run that trains against
its own snapshots, is evaluated against fixed opponents and resumes with its pool."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf

from tfagents_vtrace.envs import turn_games
from tfagents_vtrace.runtime.self_play import SnapshotOpponents, SnapshotPool

SHAPES = [(2, 3), (3,)]


def _weights(k):
    return [np.full(s, float(k), np.float32) for s in SHAPES]


def test_the_pool_keeps_the_first_snapshot_and_replaces_the_oldest_after_it():
    pool = SnapshotPool(SHAPES, size=3, latest=0.5)
    slots = [pool.add(step, _weights(step)) for step in (0, 10, 20, 30, 40)]
    assert slots == [0, 1, 2, 1, 2]  # slot 0 keeps step 0; then 10 goes, then 20
    held = sorted(pool.snapshot(i)[0] for i in range(3))
    assert held == [0, 30, 40] and len(pool) == 3
    step, weights = pool.snapshot(2)
    assert step == 40 and all(np.all(w == 40.0) and w.shape == s for w, s in zip(weights, SHAPES))


def test_draws_take_the_newest_with_probability_latest_else_any_held():
    pool = SnapshotPool(SHAPES, size=4, latest=0.25)
    for step in (0, 1, 2, 3):
        pool.add(step, _weights(step))
    rng = np.random.default_rng(0)
    draws = np.array([pool.draw(rng) for _ in range(8000)])
    # newest (slot 3): 0.25 + 0.75 / 4; each other slot 0.75 / 4
    freq = np.bincount(draws, minlength=4) / len(draws)
    np.testing.assert_allclose(freq, [0.1875, 0.1875, 0.1875, 0.4375], atol=0.02)


def test_a_share_of_the_episodes_draws_a_fixed_opponent():
    """self_play_fixed: that share of the draws returns one of the fixed opponents (each
    equally often); the rest are snapshots' policies, made once per snapshot."""
    pool = SnapshotPool(SHAPES, size=3, latest=0.5)
    pool.add(0, _weights(0))
    made = []

    def make_policy(weights):
        made.append(float(weights[0].flat[0]))
        return object()

    source = SnapshotOpponents(pool, make_policy, 0.3, ("random", "lookahead"))
    rng = np.random.default_rng(0)
    draws = [source.draw(rng) for _ in range(4000)]
    counts = {name: sum(d is f for d in draws) / len(draws)
              for name, f in turn_games.OPPONENTS.items()}  # fmt: skip
    assert counts == pytest.approx({"random": 0.15, "lookahead": 0.15}, abs=0.02)
    assert made == [0.0]  # the one snapshot's policy, made once
    pool.add(5, _weights(5))  # slot 1: a new snapshot, read when first drawn
    _ = [source.draw(rng) for _ in range(50)]
    assert made == [0.0, 5.0]


def test_the_pool_is_in_a_checkpoint(tmp_path):
    pool = SnapshotPool(SHAPES, size=3, latest=0.5)
    for step in (0, 7, 9, 11):
        pool.add(step, _weights(step))
    path = tf.train.Checkpoint(pool=pool).save(str(tmp_path / "ckpt"))
    again = SnapshotPool(SHAPES, size=3, latest=0.5)
    tf.train.Checkpoint(pool=again).restore(path).assert_consumed()
    assert len(again) == 3 and int(again.newest.numpy()) == int(pool.newest.numpy())
    for slot in range(3):
        step, weights = again.snapshot(slot)
        assert step == pool.snapshot(slot)[0] and np.all(weights[0] == step)
    assert again.add(12, _weights(12)) == pool.add(12, _weights(12))


def test_a_game_against_self_draws_a_snapshot_each_episode_and_needs_a_run():
    pytest.importorskip("pettingzoo")
    pytest.importorskip("pygame")
    from pettingzoo.classic import connect_four_v3

    drawn = []

    class Source(turn_games.SnapshotSource):
        def draw(self, rng):
            drawn.append("self")
            return turn_games.random_opponent

        def oldest(self):
            drawn.append("oldest")
            return turn_games.random_opponent

    game = turn_games.TurnGame(connect_four_v3.env, opponent="self")
    with pytest.raises(ValueError, match=r"^opponent: 'self' and 'oldest' play snapshots"):
        game.reset(seed=0)
    turn_games.set_snapshot_source(Source())
    try:
        rng = np.random.default_rng(0)
        obs, _ = game.reset(seed=0)
        for _ in range(3):
            done = False
            while not done:
                obs, _, terminated, truncated, _ = game.step(
                    turn_games.random_opponent(obs, "", rng)
                )
                done = terminated or truncated
            obs, _ = game.reset()
        assert drawn == ["self"] * 4
        turn_games.TurnGame(connect_four_v3.env, opponent="oldest").reset(seed=1)
        assert drawn[-1] == "oldest"
    finally:
        turn_games.set_snapshot_source(None)


def connect_four(opponent="self"):
    from pettingzoo.classic import connect_four_v3

    return turn_games.TurnGame(connect_four_v3.env, opponent=opponent)


def connect_four_self_only():
    from pettingzoo.classic import connect_four_v3

    return turn_games.TurnGame(connect_four_v3.env, opponent="self")


def test_a_self_play_run_snapshots_evaluates_against_fixed_opponents_and_resumes(
    tmp_path, monkeypatch
):
    pytest.importorskip("pettingzoo")
    pytest.importorskip("pygame")
    import tfagents_vtrace as tv
    from tfagents_vtrace.runtime import actor_learner
    from tfagents_vtrace.runtime.acting.policies import NumpyMLPPolicy

    sources = []  # what the run's learner makes this process's snapshot source
    set_source = turn_games.set_snapshot_source
    monkeypatch.setattr(actor_learner, "set_snapshot_source",
                        lambda s: (sources.append(s), set_source(s)))  # fmt: skip
    logdir = str(tmp_path / "run")
    small = dict(num_envs=8, unroll_length=16, hidden_sizes=(16,), eval_episodes=4,
                 eval_every=1024, self_play_every=512, self_play_pool=3, verbose=0,
                 export=False)  # fmt: skip
    first = tv.train("impala", env=connect_four, logdir=logdir, total_steps=1024, **small)
    # snapshots at steps 0, 512 and 1024 (after the updates that pass them)
    assert first["self_play_snapshots"] == 3
    for prefix in ("eval_", "eval_oldest_"):
        rates = [first[f"{prefix}{k}_rate"] for k in ("win", "draw", "loss")]
        assert sum(rates) == pytest.approx(1.0)
    # the opponents' moves, one game's at a time, in numpy (the board and its mask)
    opponents = [p for s in sources for p in s._policies.values()]
    assert opponents and all(isinstance(p, NumpyMLPPolicy) for p in opponents)
    again = tv.train("impala", env=connect_four, logdir=logdir, total_steps=2048, **small)
    assert again["resumed"] and again["self_play_snapshots"] == 3
    # the final checkpoint's pool: the run's first snapshot (step 0, restored, not a new
    # one at the resumed step 1024) and the newest ones after it
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(f"{logdir}/checkpoints"))
    steps = sorted(reader.get_tensor("self_play/steps/.ATTRIBUTES/VARIABLE_VALUE").tolist())
    assert steps[0] == 0 and steps[-1] >= 2048 - 512 and len(set(steps)) == 3
    rows = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    assert all(row["self_play_snapshots"] >= 1 for row in rows if "self_play_snapshots" in row)


def test_a_self_play_run_stopped_between_evaluations_is_evaluated_against_both(tmp_path):
    """A callback's stop at a row that was no evaluation: the driver closes acting, then
    evaluates; the oldest snapshot still plays, and the snapshots end with the run."""
    pytest.importorskip("pettingzoo")
    pytest.importorskip("pygame")
    import tfagents_vtrace as tv

    final = tv.train("impala", env=connect_four, logdir=str(tmp_path / "run"), num_envs=8,
                     unroll_length=16, hidden_sizes=(16,), eval_episodes=2, eval_every=10**6,
                     total_steps=10**6, verbose=0,
                     self_play_eval_opponents="random,lookahead,oldest",
                     callbacks=[lambda row: row["step"] >= 512])  # fmt: skip
    assert final["stopped_by"] == "callback" and "eval_oldest_win_rate" in final
    for prefix in ("eval_", "eval_lookahead_", "eval_oldest_"):  # each opponent's games
        rates = [final[f"{prefix}{k}_rate"] for k in ("win", "draw", "loss")]
        assert sum(rates) == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"^opponent: 'self' and 'oldest'"):
        turn_games.snapshot_source()
    # after the run, its game against 'self' is refused in one line; a fixed opponent plays
    # (the int8 board and mask fed as the exported policy takes them)
    policy = tv.load_policy(final["policy"])
    with pytest.raises(ValueError, match=r"^env: .* plays against opponent 'self', snapshots"):
        tv.evaluate(policy, connect_four, episodes=2)
    out = tv.evaluate(policy, connect_four, episodes=4, env_kwargs={"opponent": "lookahead"})
    assert out["win_rate"] + out["draw_rate"] + out["loss_rate"] == pytest.approx(1.0)


def test_self_play_settings_a_run_refuses(tmp_path):
    pytest.importorskip("pettingzoo")
    pytest.importorskip("pygame")
    import tfagents_vtrace as tv

    maker = (r"^env: a self-play game's maker must take opponent= \(its evaluations play it "
             r"against self_play_eval_opponents: random, oldest\): ")  # fmt: skip
    with pytest.raises(ValueError, match=maker):
        tv.train("impala", env=connect_four_self_only, logdir=str(tmp_path / "a"),
                 total_steps=64)  # fmt: skip
    with pytest.raises(ValueError, match=r"^env: acer does not take"):
        tv.train("acer", env=connect_four, logdir=str(tmp_path / "b"), total_steps=64)
    with pytest.raises(ValueError, match=r"^self_play_pool: expected an int >= 2"):
        tv.train("impala", env=connect_four, logdir=str(tmp_path / "c"), self_play_pool=1,
                 total_steps=64)  # fmt: skip
    with pytest.raises(ValueError, match=r"^self_play_fixed_opponents: expected names from "
                                         r"\['lookahead', 'random'\]"):  # fmt: skip
        tv.train("impala", env=connect_four, logdir=str(tmp_path / "d"), self_play_fixed=0.2,
                 self_play_fixed_opponents="random,minimax", total_steps=64)  # fmt: skip
    with pytest.raises(ValueError, match=r"^self_play_eval_opponents: expected names from "
                                         r"\['lookahead', 'oldest', 'random'\]"):  # fmt: skip
        tv.train("impala", env=connect_four, logdir=str(tmp_path / "e"),
                 self_play_eval_opponents="self", total_steps=64)  # fmt: skip
    with pytest.raises(ValueError, match=r"^self_play_eval_opponents: expected a str of names "):
        tv.train("impala", env=connect_four, logdir=str(tmp_path / "f"),
                 self_play_eval_opponents=3, total_steps=64)  # fmt: skip
    assert not any((tmp_path / name).exists() for name in "abcdef")


def test_the_opponents_settings_take_a_comma_separated_str_or_a_list_or_tuple():
    """From Python, self_play_fixed_opponents and self_play_eval_opponents take a list or a
    tuple of names as well as the flag's comma-separated str; any other value is refused
    in one line naming the setting."""
    from tfagents_vtrace.runtime.config import RunConfig
    from tfagents_vtrace.runtime.self_play import eval_opponents, fixed_opponents

    for value in ("random,lookahead", " random , lookahead,", ("random", "lookahead"),
                  ["random", "lookahead"]):  # fmt: skip
        run = RunConfig(self_play_fixed_opponents=value, self_play_eval_opponents=value)
        assert fixed_opponents(run) == eval_opponents(run) == ("random", "lookahead")
    assert eval_opponents(RunConfig()) == ("random", "oldest")  # the default
    assert fixed_opponents(RunConfig()) == ("random",)
    run = RunConfig(self_play_eval_opponents=("oldest", "random", "oldest"))
    assert eval_opponents(run) == ("oldest", "random")  # each once, in order
    for field, check in (("self_play_fixed_opponents", fixed_opponents),
                         ("self_play_eval_opponents", eval_opponents)):  # fmt: skip
        for value in (3, None, {"random": 1}, ("random", 3)):
            with pytest.raises(ValueError, match=rf"^{field}: expected a str of names separated "
                                                 r"by commas or a list or tuple of names, "
                                                 r"received .*$") as e:  # fmt: skip
                check(SimpleNamespace(**{field: value}))  # a run that skipped RunConfig's checks
            assert "\n" not in str(e.value)
        unknown = rf"^{field}: expected names from .* separated by commas, received \("
        with pytest.raises(ValueError, match=unknown + r"'random', 'minimax'\)$"):
            check(SimpleNamespace(**{field: ("random", "minimax")}))


def test_every_run_config_checks_the_opponents_settings():
    """A run without self-play (CartPole) refuses bad opponents' names when its RunConfig is
    made, in one line naming the setting, as a self-play run would; good ones pass."""
    from tfagents_vtrace.runtime.config import RunConfig

    fixed, evaluated = "['lookahead', 'random']", "['lookahead', 'oldest', 'random']"
    names = "expected names from {} separated by commas, received {!r}"
    not_names = "expected a str of names separated by commas or a list or tuple of names, "
    refused = [
        ("self_play_eval_opponents", "minimax", names.format(evaluated, "minimax")),
        ("self_play_eval_opponents", "self", names.format(evaluated, "self")),
        ("self_play_eval_opponents", " , ", names.format(evaluated, " , ")),  # none
        ("self_play_eval_opponents", 3, not_names + "received 3"),
        ("self_play_fixed_opponents", "random,oldest", names.format(fixed, "random,oldest")),
        ("self_play_fixed_opponents", ["random", None], not_names + "received ['random', None]"),
        ("self_play_fixed_opponents", (), names.format(fixed, ())),  # none
    ]
    for field, value, message in refused:
        with pytest.raises(ValueError) as e:
            RunConfig(env_id="CartPole-v1", **{field: value})
        assert str(e.value) == f"{field}: {message}"
    for value in ("random,lookahead", " random , lookahead,", ("random", "lookahead"),
                  ["random", "lookahead"]):  # fmt: skip
        RunConfig(env_id="CartPole-v1", self_play_fixed_opponents=value,
                  self_play_eval_opponents=value)  # fmt: skip
    RunConfig(env_id="CartPole-v1", self_play_eval_opponents="oldest,random,oldest")
    RunConfig(env_id="CartPole-v1", self_play_eval_opponents=["lookahead", "oldest"])


def test_a_self_play_run_takes_a_list_of_opponents_from_python():
    """The Python API's keywords (a list becomes a tuple in the settings layer) make the run
    the shipped config's comma-separated flags make."""
    pytest.importorskip("pettingzoo")
    pytest.importorskip("pygame")
    import tfagents_vtrace as tv
    from tfagents_vtrace.runtime.self_play import eval_opponents, fixed_opponents

    shipped = tv.make_configs(flagfile="impala_connect_four").run_config  # flags' text
    listed = tv.make_configs(flagfile="impala_connect_four",
                             self_play_fixed_opponents=["random", "lookahead"],
                             self_play_eval_opponents=["random", "lookahead", "oldest"],
                             ).run_config  # fmt: skip
    assert shipped.self_play_eval_opponents == "random,lookahead,oldest"
    assert listed.self_play_eval_opponents == ("random", "lookahead", "oldest")
    for run in (shipped, listed):
        assert fixed_opponents(run) == ("random", "lookahead")
        assert eval_opponents(run) == ("random", "lookahead", "oldest")
