"""A resumed run trains with the settings its command gives (issue: a changed learning rate
was announced, written to config.json, and overwritten by the optimizer's restored variable).

One short base run per agent; each case copies it, resumes it with one setting changed and
reads the effect in the rows written after the resume."""

import json
import os
import shutil

import pytest

import tfagents_vtrace as tv

BASE = dict(
    env="CartPole-v1", total_steps=1024, num_envs=8, unroll_length=8, eval_every=0,
    eval_episodes=1, log_every_steps=128, jit_compile=False, export=False, seed=0,
    learning_rate=1e-3, lr_decay="none",
)  # fmt: skip
MORE = 2048  # --total_steps of the resuming call


def _rows(logdir):
    with open(os.path.join(logdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def base_runs(tmp_path_factory):
    runs = {}
    root = tmp_path_factory.mktemp("base")
    for agent, extra in (("impala", {"entropy_cost": 0.01, "entropy_cost_end": 0.0}),
                         ("a3c", {"num_workers": 2})):  # fmt: skip
        logdir = str(root / agent)
        tv.train(agent, logdir=logdir, **BASE, **extra)
        runs[agent] = (logdir, extra)
    return runs


def _resume(base_runs, tmp_path, agent, **changed):
    source, extra = base_runs[agent]
    logdir = str(tmp_path / agent)
    shutil.copytree(source, logdir)
    final = tv.train(agent, logdir=logdir, **{**BASE, **extra, "total_steps": MORE, **changed})
    with open(os.path.join(source, "final.json")) as f:
        ended = json.load(f)["step"]  # the base run's last step: where the resume starts
    rows = _rows(logdir)
    before = [r for r in rows if r["step"] <= ended]
    after = [r for r in rows if r["step"] > ended and "learning_rate" in r]
    assert final["resumed"] and final["step"] >= MORE and after
    return before, after


@pytest.mark.parametrize("agent", ["impala", "a3c"])
def test_a_changed_learning_rate_takes_effect(base_runs, tmp_path, agent):
    before, after = _resume(base_runs, tmp_path, agent, learning_rate=1e-2)
    assert {round(r["learning_rate"], 6) for r in before if "learning_rate" in r} == {1e-3}
    assert {round(r["learning_rate"], 6) for r in after} == {1e-2}


def test_a_changed_entropy_cost_takes_effect(base_runs, tmp_path):
    before, after = _resume(base_runs, tmp_path, "impala", entropy_cost=0.05)
    # Annealed linearly to 0 over the run: the weight now starts from 0.05, not 0.01.
    assert max(r["entropy_coef"] for r in before if "entropy_coef" in r) <= 0.01 + 1e-6
    assert after[0]["entropy_coef"] > 0.01


@pytest.mark.parametrize(
    "agent, changed, named",
    [
        ("impala", {"hidden_sizes": (8,)}, "hidden_sizes"),
        ("impala", {"env": "CartPoleNoVel-v1"}, "env_id"),
        ("impala", {"optimizer": "rmsprop"}, "optimizer"),
        # IMPALA's checkpoint lists a constant rate's variable, a decaying rate has none
        ("impala", {"lr_decay": "linear"}, "lr_decay"),
        ("a3c", {"num_workers": 3}, "num_workers"),
        ("a3c", {"lr_decay": "linear"}, "lr_decay"),
    ],
)
def test_a_change_the_checkpoint_cannot_take_is_refused(base_runs, tmp_path, agent, changed, named):
    source, extra = base_runs[agent]
    logdir = str(tmp_path / "run")
    shutil.copytree(source, logdir)
    with pytest.raises(ValueError, match=rf"^logdir: .*cannot resume.*{named}") as error:
        tv.train(agent, logdir=logdir, **{**BASE, **extra, "total_steps": MORE, **changed})
    assert "\n" not in str(error.value)
    assert _rows(logdir) == _rows(source)  # nothing trained, nothing rewritten
