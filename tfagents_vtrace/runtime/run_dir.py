"""The run directory's rules: may a run start in a directory, and has the run there ended.

Layout (DESIGN.md "Experiments contract")::

    DIR/config.json        agent + network + run config and env id (rebuilds the network)
    DIR/metrics.jsonl      one JSON object per log interval / evaluation (strict JSON:
                           ``null`` for non-finite values, as in config.json / final.json)
    DIR/events.out.tfevents.*   TensorBoard scalars (same values)
    DIR/checkpoints/       tf.train.CheckpointManager checkpoints (+ replay archives)
    DIR/policy/            SavedModel written at the end of training
    DIR/final.json         the final row of a run that ended

Before a run starts, :func:`prepare_logdir` checks ``DIR``: a directory holding files but
no checkpoint is refused (nothing a user wrote is replaced without ``overwrite=True``), and
so is a checkpointed run of another agent, environment or network (its checkpoint could not
be restored); other config changes are allowed, listed, and the previous ``config.json`` is
kept as ``config.before-resume-<n>.json``. A run that already ended (``final.json`` at the
checkpoint's step, with ``total_steps`` or ``stop_return`` reached) is not trained again
(:func:`finished_row`).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import sys
from typing import Any

from tfagents_vtrace.runtime.checkpointing import has_checkpoint
from tfagents_vtrace.runtime.config_io import read_config
from tfagents_vtrace.runtime.run_lock import LOCK_NAME

# ---------------------------------------------------------------- starting and stopping runs
# Entries a run writes into its directory, as glob patterns (``prepare_logdir(overwrite=True)``
# removes them from a run's directory).
_RUN_ENTRIES = (
    "config.json",
    "metrics.jsonl",
    "final.json",
    "checkpoints",
    "policy",
    "events.out.tfevents.*",
    "config.before-resume-*.json",
    "config.damaged-*.json",
    "policy.tmp-*",  # an export killed before its rename (export_target.write_atomically)
    "policy.old-*",
)
# What a write killed before its rename leaves: not counted as files, removed with the run.
_PARTIAL_WRITES = ("config.json.tmp", "final.json.tmp", "metrics.jsonl.tmp")
# Config entries that must match to resume: the checkpoint holds their variables.
_STRUCTURAL = ("agent", "env_id", "network_config")
# Network settings a checkpoint does not depend on: the conv torsos' compute dtype
# ("mixed_bfloat16" keeps float32 variables), which "auto" resolves per machine.
_NOT_STRUCTURAL = {"network_config": ("cnn_compute_dtype",)}


def _structural_part(config: dict) -> dict:
    out = {}
    for key in _STRUCTURAL:
        value = config.get(key)
        if isinstance(value, dict) and key in _NOT_STRUCTURAL:
            value = {k: v for k, v in value.items() if k not in _NOT_STRUCTURAL[key]}
        out[key] = value
    return out


def _is_run_config(logdir: str) -> bool:
    """Whether ``DIR/config.json`` is a run's (a JSON object naming an agent and an env)."""
    path = os.path.join(logdir, "config.json")
    if os.path.islink(path) or not os.path.isfile(path):
        return False
    try:
        with open(path) as f:
            config = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and "agent" in config and "env_id" in config


def _matching(logdir: str, patterns: tuple[str, ...]) -> list[str]:
    """The paths in ``logdir`` whose names match ``patterns`` (symlinks included)."""
    root = glob.escape(logdir)
    return sorted({p for pattern in patterns for p in glob.glob(os.path.join(root, pattern))})


def _remove(path: str) -> None:
    """Removes ``path``; a symbolic link is unlinked, never followed."""
    if os.path.islink(path) or not os.path.isdir(path):
        os.unlink(path)
    else:
        shutil.rmtree(path)


def _differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    """``"key: old -> new"`` for every leaf that differs between two config.json dicts."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new)):
            name = f"{prefix}.{key}" if prefix else str(key)
            out += _differences(old.get(key), new.get(key), name)
        return out
    return [] if old == new else [f"{prefix}: {old!r} -> {new!r}"]


def _keep_aside(logdir: str, name: str, pattern: str, copy: bool = False) -> str:
    """Copies (or moves) ``DIR/name`` to the first free ``pattern.format(n=1, 2, ...)``."""
    n = 1
    while os.path.exists(os.path.join(logdir, pattern.format(n=n))):
        n += 1
    kept = os.path.join(logdir, pattern.format(n=n))
    (shutil.copyfile if copy else os.replace)(os.path.join(logdir, name), kept)
    return kept


def prepare_logdir(logdir: str, config: dict, *, overwrite: bool = False) -> str:
    """Checks that a run with ``config`` may start in ``logdir``; returns ``"new"`` or
    ``"resume"``.

    ``config`` is the :func:`run_config_dict` of the new run. ``overwrite=True`` removes the
    entries of a previous run (``config.json``, ``metrics.jsonl``, ``final.json``,
    ``checkpoints/``, ``policy/``, TensorBoard event files, ``config.before-resume-*.json``,
    partial ``*.tmp`` writes; a symbolic link is unlinked, never followed) and starts
    afresh, but only when ``config.json`` shows the directory is a run's: other files are
    kept, and any of those names in a directory that is not a run's is refused. In a
    multi-worker cluster only the chief calls it (the others write elsewhere, and would see
    the chief's new files). The run lock's file (``.lock``, :mod:`~tfagents_vtrace.runtime.
    run_lock`, taken by ``experiments.train`` before this call) is not counted as a file.

    Raises:
      ValueError: naming ``logdir``, when it holds files but no checkpoint, or a checkpointed
        run whose agent, environment or network differs from ``config``; with ``overwrite``,
        when it holds a run's entry names but is not a run's directory.
    """
    if not os.path.isdir(logdir):
        if os.path.exists(logdir):
            raise ValueError(f"logdir: {logdir!r} exists and is not a directory")
        return "new"
    ignored = {LOCK_NAME, *_PARTIAL_WRITES}
    entries = sorted(
        e
        for e in os.listdir(logdir)
        if e not in ignored and (e != "checkpoints" or has_checkpoint(logdir))
    )
    if overwrite:
        owned = _matching(logdir, _RUN_ENTRIES)
        if owned and not _is_run_config(logdir):
            names = [os.path.basename(p) for p in owned]
            shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            raise ValueError(
                f"logdir: {logdir!r} holds {shown} but no run's config.json; overwrite "
                "(--overwrite) removes only a run's own entries: move them, or choose another "
                "logdir"
            )
        for path in owned + _matching(logdir, _PARTIAL_WRITES):
            _remove(path)
        return "new"
    if not entries:
        return "new"
    if not has_checkpoint(logdir) and _only_start_files(logdir, entries, config):
        discard_start_files(logdir)  # a start killed or failed before its first checkpoint
        return "new"
    if not has_checkpoint(logdir):
        shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
        raise ValueError(
            f"logdir: {logdir!r} already holds files ({shown}) but no checkpoint to resume; "
            "choose another logdir, or overwrite=True (--overwrite) to replace that run"
        )
    if not _is_run_config(logdir):  # damaged: the checkpoint decides what can resume
        kept = _keep_aside(logdir, "config.json", "config.damaged-{n}.json")
        print(
            f"warning: {os.path.join(logdir, 'config.json')} is unreadable; moved to "
            f"{os.path.basename(kept)}, resuming from the checkpoint with this command's config",
            file=sys.stderr,
            flush=True,
        )
        return "resume"
    old, new = read_config(logdir), config
    structural = _differences(_structural_part(old), _structural_part(new))
    for path in new.get("resume_fixed") or ():  # e.g. "agent_config.actor_hidden_sizes"
        section, name = path.split(".", 1)
        before, after = (old.get(section) or {}), (new.get(section) or {})
        if name in before and name in after:
            structural += _differences(before[name], after[name], path)
    if structural:
        raise ValueError(
            f"logdir: {logdir!r} holds a run of agent={old.get('agent')!r} on "
            f"env={old.get('env_id')!r} whose checkpoint this command cannot resume; it differs "
            f"in {'; '.join(structural)}. Choose another logdir, or overwrite=True (--overwrite)"
        )
    changed = _differences(old, new)
    if changed:
        kept = _keep_aside(logdir, "config.json", "config.before-resume-{n}.json", copy=True)
        print(
            f"Resuming {logdir} with a changed config ({'; '.join(changed)}); the previous "
            f"config is kept as {os.path.basename(kept)}.",
            file=sys.stderr,
        )
    return "resume"


# What a run writes before its step-0 checkpoint (besides config.json and metrics.jsonl).
_START_FILES = ("events.out.tfevents.*", "config.before-resume-*.json", "policy.tmp-*")


def _metrics_rows_past_start(logdir: str) -> bool:
    """Whether ``DIR/metrics.jsonl`` holds a row past step 0 (a run's work, not its start)."""
    path = os.path.join(logdir, "metrics.jsonl")
    if not os.path.exists(path):
        return False
    with open(path) as f:
        for line in f:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict) and (row.get("step") or 0) > 0:
                return True
    return False


def _only_start_files(logdir: str, entries: list[str], config: dict) -> bool:
    """Whether ``entries`` (a directory without a complete checkpoint) are only what a start
    of the same run (agent, environment and network of ``config``) writes before its step-0
    checkpoint: its ``config.json``, a ``metrics.jsonl`` with no row past step 0, TensorBoard
    files, an empty or leftover-only ``checkpoints/``."""
    if "config.json" not in entries or not _is_run_config(logdir):
        return False
    old = read_config(logdir)
    if any(old.get(k) != config.get(k) for k in _STRUCTURAL):
        return False
    starts = {os.path.basename(p) for p in _matching(logdir, _START_FILES)}
    allowed = {"config.json", "metrics.jsonl", "checkpoints", *starts}
    if not set(entries) <= allowed or _metrics_rows_past_start(logdir):
        return False
    ckpt_dir = os.path.join(logdir, "checkpoints")
    if os.path.isdir(ckpt_dir) and not os.path.islink(ckpt_dir):
        from tfagents_vtrace.runtime.checkpoint_files import DAMAGED_DIR

        damaged = os.path.join(ckpt_dir, DAMAGED_DIR)
        if os.path.isdir(damaged) and any(  # trained checkpoints existed: not a mere start
            not (n.startswith("ckpt-0.") or n.startswith("replay-0.")) for n in os.listdir(damaged)
        ):
            return False
    return True


def discard_start_files(logdir: str) -> None:
    """Removes what a start wrote before its step-0 checkpoint (config.json, metrics.jsonl,
    TensorBoard files, ``checkpoints/`` without a complete checkpoint, partial writes), so a
    failed or killed start leaves the directory as it was. Call it only for a directory
    holding no complete checkpoint."""
    if has_checkpoint(logdir):
        raise ValueError(f"logdir: {logdir!r} holds a checkpoint; its files are kept")
    patterns = ("config.json", "metrics.jsonl", "checkpoints", *_START_FILES, *_PARTIAL_WRITES)
    for path in _matching(logdir, patterns):
        _remove(path)


def remove_partial_exports(logdir: str) -> None:
    """Cleans what exports killed before their rename left (``export_target.
    write_atomically``): ``policy.tmp-*`` are removed; a ``policy.old-*`` (the previous
    export, moved away just before the new one took its place) is put back as ``policy/``
    when there is none, else removed."""
    policy = os.path.join(logdir, "policy")
    for path in _matching(logdir, ("policy.tmp-*",)):
        _remove(path)
    for path in _matching(logdir, ("policy.old-*",)):
        if not os.path.lexists(policy) and os.path.isfile(os.path.join(path, "saved_model.pb")):
            os.rename(path, policy)
        else:
            _remove(path)


def finished_row(logdir: str, run, step: int) -> dict | None:
    """The final row of the run in ``logdir`` if it already ended at ``step`` (the restored
    checkpoint's) and ``run`` asks for nothing more; else None.

    Nothing more: ``step >= run.total_steps``, or the run was solved (``solve_step``) and
    ``run.stop_return`` is at most the return it reached. The row gains
    ``already_finished: True``.
    """
    path = os.path.join(logdir, "final.json")
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            final = json.load(f)
    except (OSError, json.JSONDecodeError):
        return None
    if final.get("step") != step:
        return None
    solved = (
        final.get("solve_step") is not None
        and run.stop_return is not None
        and final.get("eval_return") is not None
        and final["eval_return"] >= run.stop_return
    )
    if step < run.total_steps and not solved:
        return None
    return {**final, "already_finished": True}


def export_into_run(path: str, export) -> None:
    """``export(path)`` into a run's ``policy/``; a ``policy/`` that is not a SavedModel (the
    run's own export, cut by a kill before exports were atomic) is replaced first."""
    partial = os.path.isdir(path) and not os.path.islink(path) and os.listdir(path)
    if partial and not os.path.isfile(os.path.join(path, "saved_model.pb")):
        shutil.rmtree(path)
    export(path)
