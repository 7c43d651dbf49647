"""Hyperparameter searches with Optuna (https://optuna.org): each trial is a ``tv.train`` run
in a directory of its own, reports its evaluation returns to the trial as it trains (a pruner
can end it early), and the best trial's settings are written as a flagfile ``tfv-train
--flagfile=`` takes (docs/guide/extending.md, "Sweeps")::

    import optuna
    import tfagents_vtrace as tv

    objective = tv.sweeps.optuna_objective(
        "impala", "CartPole-v1",
        space={"learning_rate": (1e-4, 3e-3, "log"), "entropy_cost": [0.0, 0.01]},
        base_settings={"total_steps": 50_000, "eval_every": 5_000},
        root="sweeps/cartpole",
    )
    study = optuna.create_study(direction="maximize", pruner=optuna.pruners.MedianPruner())
    study.optimize(objective, n_trials=20)
    tv.sweeps.write_best_flagfile(study, "sweeps/cartpole/best.cfg")

Needs the ``optuna`` package (``pip install 'tfagents_vtrace[optuna]'``), imported when an
objective is made.
"""

from __future__ import annotations

import json
import math
import numbers
import os
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["OptunaPruning", "optuna_objective", "suggest", "write_best_flagfile"]


def _optuna():
    try:
        import optuna
    except ImportError as e:
        raise ImportError(
            "sweeps: needs the optuna package: pip install 'tfagents_vtrace[optuna]'"
        ) from e
    return optuna


def _check_space(space: Any) -> None:
    """Raises ``ValueError("space: ...")`` for a space :func:`suggest` cannot draw from."""
    if callable(space):
        return
    if not isinstance(space, Mapping) or not space:
        raise ValueError(
            f"space: expected a function trial -> {{setting: value}} or a non-empty dict of "
            f"settings, received {space!r}"
        )
    for name, spec in space.items():
        if isinstance(spec, list) and spec:
            continue
        if isinstance(spec, tuple) and len(spec) in (2, 3):
            low, high = spec[:2]
            numeric = all(
                isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)
                for v in (low, high)
            )
            if numeric and low < high and (len(spec) == 2 or spec[2] == "log"):
                if len(spec) == 2 or low > 0:
                    continue
        raise ValueError(
            f"space: {name}: expected a list of choices, (low, high) or (low, high, 'log') "
            f"with low < high (and low > 0 for 'log'), received {spec!r}"
        )


def suggest(trial, space) -> dict:
    """The settings trial ``trial`` draws from ``space``.

    ``space`` is either a function ``trial -> {setting: value}`` (any of Optuna's
    ``trial.suggest_*``), or a dict ``{setting: spec}``, each spec one of:

    - a list: one of its values (``trial.suggest_categorical``);
    - ``(low, high)``: a number between them, an int when both are ints
      (``suggest_int``), else a float (``suggest_float``);
    - ``(low, high, "log")``: the same on a log scale.
    """
    if callable(space):
        return dict(space(trial))
    values = {}
    for name, spec in space.items():
        if isinstance(spec, list):
            values[name] = trial.suggest_categorical(name, spec)
            continue
        low, high = spec[:2]
        log = len(spec) == 3
        if isinstance(low, int) and isinstance(high, int):
            values[name] = trial.suggest_int(name, low, high, log=log)
        else:
            values[name] = trial.suggest_float(name, float(low), float(high), log=log)
    return values


class OptunaPruning:
    """A callback reporting each row's ``metric`` to ``trial`` (``trial.report(value,
    step=row["step"])``) and stopping the run when the trial's pruner says so
    (``trial.should_prune()``); then ``pruned_at`` is the row's step (None while it runs on).
    The objective raises ``optuna.TrialPruned`` after the run ended (checkpointed)."""

    def __init__(self, trial, metric: str = "eval_return"):
        self.trial, self.metric = trial, metric
        self.pruned_at: int | None = None

    def __repr__(self) -> str:
        return f"OptunaPruning(trial {self.trial.number}, {self.metric})"

    def on_row(self, row: dict) -> bool:
        value = row.get(self.metric)
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False  # not on this row (eval_return: evaluation rows), or NaN (null)
        self.trial.report(float(value), step=int(row["step"]))
        if self.trial.should_prune():
            self.pruned_at = int(row["step"])
            return True
        return False


def _json_value(value: Any) -> Any:
    """A setting's value as a JSON value (Optuna's storages keep user attributes as JSON)."""
    if isinstance(value, tuple | list):
        return [_json_value(v) for v in value]
    if isinstance(value, bool | str) or value is None:
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return str(value)


def optuna_objective(
    agent: str | None,
    env: Any,
    space,
    *,
    root: str | os.PathLike,
    base_settings: Mapping[str, Any] | None = None,
    metric: str = "eval_return",
    flagfile: str | os.PathLike | None = None,
    callbacks: list | None = None,
    verbose: int = 0,
) -> Callable[[Any], float]:
    """An Optuna objective ``objective(trial) -> float`` training ``agent`` on ``env``.

    Each trial trains with ``flagfile``'s settings (a ``.cfg`` path or a shipped config's
    name, as ``tv.train`` takes), then ``base_settings``, then :func:`suggest`'s draw from
    ``space`` over them, into ``root/<study name>/trial-<number>``. Its rows' ``metric``
    (the evaluation rows' ``eval_return``: set ``eval_every`` so that a run has several) is
    reported at each row's step; when the study's pruner prunes the trial, the run stops at
    that row (:class:`OptunaPruning`; the run directory ends as a callback's stop does) and
    the objective raises ``optuna.TrialPruned``. Otherwise it returns the final row's
    ``metric`` (the final evaluation's, for ``eval_return``).

    The trial's user attributes hold what :func:`write_best_flagfile` writes: ``settings``
    (every setting of the run, flagfile's included), ``agent``, ``env`` and ``logdir``.

    Args:
      agent, env: as ``tv.train`` takes them (``env`` a gymnasium id for the flagfile to
        name it; a class or a function trains too, the flagfile then names the id it was
        registered under in this process).
      space: a dict or a function (:func:`suggest`).
      root: the folder of the trials' run directories.
      base_settings: the settings every trial shares (a small ``total_steps``...).
      metric: the row field reported and returned.
      flagfile: the settings under ``base_settings``.
      callbacks: more callbacks for every trial's run (a logger...).
      verbose: the runs' ``verbose`` (0: no progress lines).

    Raises:
      ValueError: ``space: ...`` or ``metric: ...`` (one line), at once; a trial's
        ``tv.train`` errors when it runs.
      ImportError: without ``optuna``.
    """
    optuna = _optuna()
    from tfagents_vtrace import api
    from tfagents_vtrace.settings import read_flagfile, rename_deprecated

    _check_space(space)
    if not isinstance(metric, str) or not metric:
        raise ValueError(f"metric: expected a row field's name (a str), received {metric!r}")
    root = os.fspath(root)
    base = rename_deprecated(dict(base_settings or {}))
    from_file = dict(read_flagfile(api.config_path(flagfile))) if flagfile else {}
    extra = list(callbacks or [])

    def objective(trial) -> float:
        drawn = suggest(trial, space)
        logdir = os.path.join(root, trial.study.study_name, f"trial-{trial.number:04d}")
        pruning = OptunaPruning(trial, metric)
        settings = {**base, **drawn}
        final = api.train(
            agent,
            env,
            logdir,
            flagfile=flagfile,
            callbacks=[pruning, *extra],
            verbose=verbose,
            **settings,
        )
        with open(os.path.join(logdir, "config.json")) as f:
            config = json.load(f)
        every = {k: v for k, v in {**from_file, **settings}.items() if k not in ("agent", "env")}
        trial.set_user_attr("settings", {k: _json_value(v) for k, v in every.items()})
        trial.set_user_attr("agent", config["agent"])
        trial.set_user_attr("env", env if isinstance(env, str) else config["env_id"])
        trial.set_user_attr("logdir", logdir)
        if pruning.pruned_at is not None:
            raise optuna.TrialPruned(f"{metric} at step {pruning.pruned_at}")
        value = final.get(metric)
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ValueError(f"metric: the final row of {logdir} has no number {metric!r}")
        return float(value)

    return objective


def write_best_flagfile(
    study, path: str | os.PathLike, *, overwrite: bool = False, exclude: tuple = ()
) -> str:
    """Writes the best trial's settings of ``study`` (made by :func:`optuna_objective`) as a
    flagfile at ``path``: a comment naming the trial and its value, ``--agent=``,
    ``--env=``, then one ``--name=value`` line per setting (the flagfile's, the base
    settings and the trial's draw), except the names in ``exclude`` (e.g.
    ``("total_steps",)``, to give the full run's on the command line). ``tfv-train
    --flagfile=PATH`` and ``tv.train(flagfile=PATH)`` read it; flags after it override it.

    Returns ``path``. Raises ``ValueError("path: ...")`` when it exists and not
    ``overwrite`` (nothing a user wrote is replaced), ``ValueError("study: ...")`` for a
    study without a completed trial of :func:`optuna_objective`.
    """
    from tfagents_vtrace.settings import flag_text

    path = os.fspath(path)
    if os.path.exists(path) and not overwrite:
        raise ValueError(f"path: {path!r} exists; pass overwrite=True to replace it")
    try:
        trial = study.best_trial
    except ValueError as e:  # no completed trial
        raise ValueError(f"study: no completed trial ({e})") from None
    attrs = trial.user_attrs
    if "settings" not in attrs:
        raise ValueError(
            f"study: trial {trial.number} has no settings (not a trial of optuna_objective)"
        )
    lines = [
        f"# The best trial of study {study.study_name!r}: trial {trial.number}, "
        f"value {trial.value!r} (run directory {attrs.get('logdir')})",
        f"--agent={attrs['agent']}",
        f"--env={attrs['env']}",
    ]
    lines += [
        f"--{name}={flag_text(value)}"
        for name, value in attrs["settings"].items()
        if name not in exclude
    ]
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)
    return path
