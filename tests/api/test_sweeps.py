"""tv.sweeps: Optuna trials as tv.train runs, their evaluation returns reported as they train,
pruning through a callback, and the best settings as a flagfile the settings reader and the
config builder take back."""

import json
import os

import pytest

import tfagents_vtrace as tv
from tests.api.test_callbacks import FAST
from tfagents_vtrace.runtime.rundir.metrics_log import read_metrics
from tfagents_vtrace.settings import build_configs, flag_text, read_flagfile

optuna = pytest.importorskip("optuna")
optuna.logging.set_verbosity(optuna.logging.WARNING)

# test_callbacks' few seconds of CartPole, at the default row cadence
BASE = {k: v for k, v in FAST.items() if k != "log_every_steps"}
SPACE = {"learning_rate": (1e-4, 1e-2, "log"), "entropy_cost": [0.0, 0.01], "unroll_length": (4, 6)}


def test_suggest_draws_each_kind_of_spec():
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(20):
        values = tv.sweeps.suggest(study.ask(), SPACE)
        assert 1e-4 <= values["learning_rate"] <= 1e-2 and type(values["learning_rate"]) is float
        assert values["entropy_cost"] in (0.0, 0.01)
        assert 4 <= values["unroll_length"] <= 6 and type(values["unroll_length"]) is int
    assert tv.sweeps.suggest(study.ask(), lambda trial: {"seed": 3}) == {"seed": 3}


@pytest.mark.parametrize(
    "space",
    [{}, {"learning_rate": (1e-2, 1e-4)}, {"learning_rate": (0.0, 1.0, "log")}, {"x": "abc"}, 3],
)
def test_bad_spaces_are_refused_in_one_line(tmp_path, space):
    with pytest.raises(ValueError, match=r"^space: ") as raised:
        tv.sweeps.optuna_objective("impala", "CartPole-v1", space, root=tmp_path)
    assert "\n" not in str(raised.value)


def test_flag_text_reads_back_as_the_value():
    values = dict(
        learning_rate=0.0012520653814999472,
        hidden_sizes=(32, 16),
        normalize_advantages=False,
        stop_return=None,
        total_steps=1234,
        optimizer="rmsprop",
    )
    configs = build_configs("impala", {k: flag_text(v) for k, v in values.items()})
    agent, run, network = configs.agent_config, configs.run_config, configs.network_config
    assert agent.learning_rate == values["learning_rate"] and agent.optimizer == "rmsprop"
    assert agent.normalize_advantages is False and network.hidden_sizes == (32, 16)
    assert run.stop_return is None and run.total_steps == 1234


@pytest.mark.slow
def test_a_sweep_reports_evaluations_prunes_and_writes_the_best_flagfile(tmp_path):
    objective = tv.sweeps.optuna_objective(
        "impala", "CartPole-v1", SPACE, base_settings=BASE, root=tmp_path / "sweep"
    )
    study = optuna.create_study(
        direction="maximize",
        sampler=optuna.samplers.TPESampler(seed=0),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=1),
    )
    study.optimize(objective, n_trials=3)
    states = [t.state for t in study.trials]
    assert len(states) == 3 and states[0] == optuna.trial.TrialState.COMPLETE
    assert set(states) <= {optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED}
    for trial in study.trials:
        logdir = trial.user_attrs["logdir"]
        assert logdir == str(tmp_path / "sweep" / study.study_name / f"trial-{trial.number:04d}")
        evals = {r["step"]: r["eval_return"] for r in read_metrics(logdir) if "eval_return" in r}
        final = json.load(open(os.path.join(logdir, "final.json")))
        if trial.state == optuna.trial.TrialState.PRUNED:  # stopped at its last report
            assert final["step"] == max(evals)
            if final["step"] < BASE["total_steps"]:  # else it ended as at total_steps
                assert final["stopped_by"] == "callback"
        else:
            assert trial.value == final["eval_return"] and "stopped_by" not in final
        assert trial.intermediate_values == evals  # every evaluation row, at its step
        assert trial.user_attrs["settings"]["unroll_length"] == trial.params["unroll_length"]

    best = tv.sweeps.write_best_flagfile(study, tmp_path / "best.cfg")
    values = read_flagfile(best)
    assert values["agent"] == "impala" and values["env"] == "CartPole-v1"
    configs = build_configs(values.pop("agent"), values)
    params = study.best_trial.params
    assert configs.agent_config.learning_rate == params["learning_rate"]
    assert configs.agent_config.entropy_cost == params["entropy_cost"]
    assert configs.run_config.unroll_length == params["unroll_length"]
    assert configs.run_config.total_steps == BASE["total_steps"]
    assert configs.network_config.hidden_sizes == (32, 32)
    with pytest.raises(ValueError, match=r"^path: .* exists; pass overwrite=True"):
        tv.sweeps.write_best_flagfile(study, best)
    short = tv.sweeps.write_best_flagfile(study, best, overwrite=True, exclude=("total_steps",))
    assert "total_steps" not in read_flagfile(short)


def test_a_pruned_trial_stops_its_run_at_the_first_report(tmp_path):
    objective = tv.sweeps.optuna_objective(
        None, None, {"entropy_cost": [0.01]}, base_settings=BASE, root=tmp_path,
        flagfile="impala_cartpole",
    )  # fmt: skip
    # Every reported value is below the threshold: the first report prunes.
    study = optuna.create_study(pruner=optuna.pruners.ThresholdPruner(lower=1e9))
    study.optimize(objective, n_trials=1)
    (trial,) = study.trials
    assert trial.state == optuna.trial.TrialState.PRUNED
    logdir = trial.user_attrs["logdir"]
    final = json.load(open(os.path.join(logdir, "final.json")))
    first = next(r["step"] for r in read_metrics(logdir) if "eval_return" in r)
    assert list(trial.intermediate_values) == [final["step"]] == [first]
    assert final["stopped_by"] == "callback" and final["stop_callback"].startswith("OptunaPruning")
    # The flagfile's settings are the trial's too (agent and env from it).
    settings = trial.user_attrs["settings"]
    assert settings["optimizer"] == "rmsprop" and settings["total_steps"] == BASE["total_steps"]
    assert trial.user_attrs["agent"] == "impala" and trial.user_attrs["env"] == "CartPole-v1"
    with pytest.raises(ValueError, match=r"^study: no completed trial"):
        tv.sweeps.write_best_flagfile(study, tmp_path / "best.cfg")
