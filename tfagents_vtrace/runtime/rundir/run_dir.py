"""The run directory's rules: may a run start in a directory, and has the run there ended.

Layout (docs/design.md, "The run directory")::

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

A run touches only what is its own. ``DIR/checkpoints`` is the run's only when it holds
nothing but a run's checkpoint files, replay archives and ``damaged/``
(:func:`~tfagents_vtrace.runtime.rundir.checkpoint_files.foreign_entry`); anything else in it, and
a symbolic link in place of a run's entry (``checkpoints``, ``config.json``, ``policy``...:
through it a run would write and remove files outside its directory), makes a start refuse
in one line naming the path. A start records the entries the directory held before it
(:data:`START_RECORD`, written when the start finds no checkpoint to restore and removed
with its first checkpoint), so a start that fails or is killed before that checkpoint is
undone by removing only the entries it added (:func:`discard_start_files`).
"""

from __future__ import annotations

import contextlib
import fnmatch
import glob
import json
import os
import shutil
import sys
from typing import Any

from tfagents_vtrace.runtime.rundir import checkpoint_files
from tfagents_vtrace.runtime.rundir.checkpoint_files import has_checkpoint
from tfagents_vtrace.runtime.rundir.config_io import read_config
from tfagents_vtrace.runtime.rundir.run_lock import LOCK_NAME
from tfagents_vtrace.runtime.rundir.write_errors import writing

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
    "policy.tmp-*",  # an export killed before its rename (export.target.write_atomically)
    "policy.old-*",
)
# What a write killed before its rename leaves: not counted as files, removed with the run.
_PARTIAL_WRITES = ("config.json.tmp", "final.json.tmp", "metrics.jsonl.tmp")
START_RECORD = ".tfv-start.json"
"""The record of a start in progress: the names ``DIR`` (and ``DIR/checkpoints``) held before
it (:func:`record_start`)."""
_RECORD_KEY = "tfagents_vtrace_start"
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


def _own_layers_hint(old: dict, differences: list[str]) -> str:
    """`` To resume it, pass torso='package.module:Name' again.`` for each layer of one's own
    that the old run's network names and ``differences`` (``"key: old -> new"``) changes (a
    run directory never imports code: the user names it again), else ``""``."""
    network = old.get("network_config") or {}
    named = [
        f"{name}={network[name]!r}"
        for name in ("torso", "core")
        if isinstance(network.get(name), str)
        and ":" in network[name]
        and any(d.startswith(f"network_config.{name}: ") for d in differences)
    ]
    return f" To resume it, pass {' and '.join(named)} again." if named else ""


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


def _refuse_links(logdir: str) -> None:
    """Raises ValueError (one line) naming the first of a run's entries in ``logdir`` that
    is a symbolic link: a run writes, rewrites and removes its entries, and through a link
    it would do so outside its directory."""
    for path in _matching(logdir, (*_RUN_ENTRIES, *_PARTIAL_WRITES, START_RECORD)):
        if os.path.islink(path):
            raise ValueError(
                f"logdir: {path!r} is a symbolic link (to {os.readlink(path)!r}); a run writes "
                "and removes its own entries, never through a link: replace the link by what "
                "it points to, or choose another logdir"
            )


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
    run_lock`, taken by ``tfv-train`` before this call) is not counted as a file.

    Raises:
      ValueError: naming ``logdir``, when it holds files but no checkpoint, or a checkpointed
        run whose agent, environment or network differs from ``config``; with ``overwrite``,
        when it holds a run's entry names but is not a run's directory; naming the path, when
        ``checkpoints/`` holds anything that is not a run's
        (:func:`checkpoint_files.check_own`), or (without ``overwrite``, which unlinks them)
        a run's entry is a symbolic link.
    """
    if not os.path.isdir(logdir):
        if os.path.exists(logdir):
            raise ValueError(f"logdir: {logdir!r} exists and is not a directory")
        return "new"
    ckpt_dir = os.path.join(logdir, "checkpoints")
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
        if not os.path.islink(ckpt_dir):  # a link is unlinked, never followed
            checkpoint_files.check_own(ckpt_dir)
        for path in owned + _matching(logdir, _PARTIAL_WRITES):
            _remove(path)
        record = os.path.join(logdir, START_RECORD)
        if os.path.islink(record) or read_start_record(logdir) or _empty_record(logdir):
            _remove(record)
        return "new"
    _refuse_links(logdir)
    checkpoint_files.check_own(ckpt_dir)
    foreign = foreign_in_policy(os.path.join(logdir, "policy"))
    if foreign is not None:  # the end of the run would replace this policy/
        raise ValueError(
            f"logdir: {foreign!r} is not a file of an exported policy; a run replaces its "
            "policy/ when it ends: move it out, or choose another logdir"
        )
    ignored = {LOCK_NAME, *_PARTIAL_WRITES}
    if read_start_record(logdir) is not None or _empty_record(logdir):
        ignored.add(START_RECORD)
    entries = sorted(
        e
        for e in os.listdir(logdir)
        if e not in ignored and (e != "checkpoints" or has_checkpoint(logdir))
    )
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
            f"in {'; '.join(structural)}.{_own_layers_hint(old, structural)} Choose another "
            "logdir, or overwrite=True (--overwrite)"
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
# The names a start may add to DIR: only entries it added with one of these names are
# removed when the start is undone.
_START_NAMES = (
    "config.json",
    "metrics.jsonl",
    "checkpoints",
    "config.damaged-*.json",
    *_START_FILES,
    *_PARTIAL_WRITES,
)


def _metrics_rows_past_start(logdir: str) -> bool:
    """Whether ``DIR/metrics.jsonl`` holds a row past step 0 (a run's work, not its start).
    A row without a numeric step is damage, not work (the resume drops it:
    :meth:`~tfagents_vtrace.runtime.rundir.metrics_log.MetricsLog.truncate_after`)."""
    from tfagents_vtrace.runtime.rundir.metrics_log import row_step

    path = os.path.join(logdir, "metrics.jsonl")
    if not os.path.exists(path):
        return False
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                step = row_step(json.loads(line))
            except json.JSONDecodeError:
                continue
            if step is not None and step > 0:
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
        damaged = os.path.join(ckpt_dir, checkpoint_files.DAMAGED_DIR)
        if os.path.isdir(damaged) and any(  # trained checkpoints existed: not a mere start
            not (n.startswith("ckpt-0.") or n.startswith("replay-0.")) for n in os.listdir(damaged)
        ):
            return False
    return True


# ------------------------------------------------------------------ the record of a start
def start_snapshot(logdir: str) -> dict:
    """The names ``logdir`` and ``logdir/checkpoints`` hold now (``checkpoints`` None when it
    is absent or not a directory): what a start that begins now did not write."""
    ckpt_dir = os.path.join(logdir, "checkpoints")
    own = os.path.isdir(ckpt_dir) and not os.path.islink(ckpt_dir)
    return {
        "before": sorted(os.listdir(logdir)) if os.path.isdir(logdir) else [],
        "checkpoints_before": sorted(os.listdir(ckpt_dir)) if own else None,
    }


def read_start_record(logdir: str) -> dict | None:
    """The record of ``logdir``'s start in progress (:func:`record_start`), or None when
    there is none, or the file by that name is not one (a symbolic link, other content)."""
    path = os.path.join(logdir, START_RECORD)
    if os.path.islink(path) or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    ok = isinstance(record, dict) and record.get(_RECORD_KEY) == 1
    ok = ok and isinstance(record.get("before"), list)
    ok = ok and isinstance(record.get("checkpoints_before"), list | type(None))
    return record if ok else None


def _empty_record(logdir: str) -> bool:
    path = os.path.join(logdir, START_RECORD)
    return not os.path.islink(path) and os.path.isfile(path) and os.path.getsize(path) == 0


def record_start(logdir: str, snapshot: dict) -> None:
    """Writes :data:`START_RECORD` with ``snapshot`` (:func:`start_snapshot`, taken before the
    start wrote anything) unless a record is already there: that of an earlier start which
    never reached its first checkpoint, whose snapshot is older and stays.

    Raises:
      ValueError: naming the path, when a file of that name is there and is not a record.
    """
    path = os.path.join(logdir, START_RECORD)
    if read_start_record(logdir) is not None:
        return
    if _empty_record(logdir):  # a start killed as it wrote the record: it wrote nothing else
        os.unlink(path)
    if os.path.lexists(path):
        raise ValueError(
            f"logdir: {path!r} is not a run's start record; move it, or choose another logdir"
        )
    data = json.dumps({_RECORD_KEY: 1, **snapshot}).encode()
    with writing("run directory", logdir):
        os.makedirs(logdir, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            os.write(fd, data)  # one write: a kill leaves the record whole or empty
        finally:
            os.close(fd)


def end_start(logdir: str) -> None:
    """Removes the record of ``logdir``'s start: its first checkpoint is written, what it
    wrote is the run's."""
    if read_start_record(logdir) is not None or _empty_record(logdir):
        with contextlib.suppress(OSError):  # left behind, the next start removes it
            os.unlink(os.path.join(logdir, START_RECORD))


def _discard_checkpoint_files(ckpt_dir: str, before: set[str] | None, keep_damaged: bool):
    """Removes the run's files of ``ckpt_dir`` not named in ``before`` (None: the folder is
    the start's own), never anything :func:`checkpoint_files.foreign_entry` would name (a
    file that is not a run's, a link: left where it is), ``damaged/`` only when not
    ``keep_damaged``; the folder too when it ends empty and the start made it."""
    if os.path.islink(ckpt_dir) or not os.path.isdir(ckpt_dir):
        return
    for name in os.listdir(ckpt_dir):
        if before is not None and name in before:
            continue
        if name == checkpoint_files.DAMAGED_DIR and keep_damaged:
            continue
        path = os.path.join(ckpt_dir, name)
        if name == checkpoint_files.DAMAGED_DIR:
            if os.path.islink(path) or not os.path.isdir(path):
                continue
            for inner in os.listdir(path):
                if not checkpoint_files.foreign_in(path, inner, copies=True):
                    _remove(os.path.join(path, inner))
            with contextlib.suppress(OSError):
                os.rmdir(path)
        elif not checkpoint_files.foreign_in(ckpt_dir, name, copies=False):
            _remove(path)
    if before is None:
        with contextlib.suppress(OSError):  # not empty: something else is in it
            os.rmdir(ckpt_dir)


def discard_start_files(logdir: str) -> None:
    """Undoes a start that failed or was killed before its step-0 checkpoint, so the directory
    is left as it was: removes the entries the start added (config.json, metrics.jsonl,
    TensorBoard files, partial writes, the run's files in ``checkpoints/``), as its record
    (:func:`record_start`) shows, and the record. Nothing that was there before the start is
    removed, nor anything the start did not name as a run's entry, nor anything in
    ``checkpoints/`` that is not a run's file; ``checkpoints/damaged/`` (files moved aside,
    never deleted) goes only with a ``checkpoints/`` the start itself made.

    Without a record (a directory a start of an earlier version left, or another worker's
    temporary directory), the start's entries are recognised by name only: ``prepare_logdir``
    calls this only when :func:`_only_start_files` showed they are a start of the same run,
    and ``checkpoints/damaged/`` is kept. Call it only for a directory holding no complete
    checkpoint.
    """
    if has_checkpoint(logdir):
        raise ValueError(f"logdir: {logdir!r} holds a checkpoint; its files are kept")
    if not os.path.isdir(logdir):
        return
    record = read_start_record(logdir)
    before = set(record["before"]) if record is not None else set()
    ckpt_dir = os.path.join(logdir, "checkpoints")
    for name in os.listdir(logdir):
        if name in before or not any(fnmatch.fnmatchcase(name, p) for p in _START_NAMES):
            continue
        path = os.path.join(logdir, name)
        if name == "checkpoints" and not os.path.islink(path):
            made = record is not None  # and not in before: the start made it
            _discard_checkpoint_files(path, None, keep_damaged=not made)
            continue
        _remove(path)
    if record is not None and "checkpoints" in before:
        kept = set(record["checkpoints_before"] or ())
        _discard_checkpoint_files(ckpt_dir, kept, keep_damaged=True)
    end_start(logdir)


def remove_partial_exports(logdir: str) -> None:
    """Cleans what exports killed before their rename left (``export.target.
    write_atomically``): ``policy.tmp-*`` are removed; a ``policy.old-*`` (the previous
    export, moved away just before the new one took its place) is put back as ``policy/``
    when there is none, else removed. Only in a directory holding a checkpoint: a run exports
    after it checkpoints, so elsewhere such names are not a run's."""
    if not has_checkpoint(logdir):
        return
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


# What tf.saved_model.save writes in a SavedModel directory.
_SAVED_MODEL_NAMES = {
    "saved_model.pb",
    "fingerprint.pb",
    "keras_metadata.pb",
    "variables",
    "assets",
}


def foreign_in_policy(path: str) -> str | None:
    """The first path in a run's ``policy/`` without ``saved_model.pb`` (an export cut by a
    kill, before exports were atomic) that such an export does not write: anything but
    :data:`_SAVED_MODEL_NAMES`, ``variables/variables.*`` and ``assets/`` content; None when
    it is all an export's (or ``path`` is absent, a link, or a whole SavedModel). A folder
    that is itself all an export's is one group's policy (``policy/<group>/``: a game of
    several groups, :mod:`tfagents_vtrace.runtime.groups`)."""
    if os.path.islink(path) or not os.path.isdir(path):
        return None
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        return None
    for name in sorted(os.listdir(path)):
        inner = os.path.join(path, name)
        if name not in _SAVED_MODEL_NAMES and os.path.isdir(inner) and not os.path.islink(inner):
            if foreign_in_policy(inner) is not None:  # not a group's policy: named whole
                return inner
            continue
        if name not in _SAVED_MODEL_NAMES or os.path.islink(inner):
            return inner
        if name == "variables" and os.path.isdir(inner):
            for leaf in sorted(os.listdir(inner)):
                if not leaf.startswith("variables.") or os.path.islink(os.path.join(inner, leaf)):
                    return os.path.join(inner, leaf)
    return None


def with_policy(final: dict, logdir: str) -> dict:
    """``final`` (a run's final row) with ``policy``, the path of ``logdir/policy``, when it
    holds an exported SavedModel (or ``policies``, ``{group: path}``, when its folders do):
    the row ``tv.train`` returns and ``on_end`` gets."""
    policy = os.path.join(logdir, "policy")
    if os.path.isfile(os.path.join(policy, "saved_model.pb")):
        return {**final, "policy": policy}
    if os.path.isdir(policy):  # a game of several groups: a policy per group
        groups = {name: os.path.join(policy, name) for name in sorted(os.listdir(policy))
                  if os.path.isfile(os.path.join(policy, name, "saved_model.pb"))}  # fmt: skip
        if groups:
            return {**final, "policies": groups}
    return final


def export_into_run(path: str, export) -> None:
    """``export(path)`` into a run's ``policy/``; a ``policy/`` that is not a SavedModel but
    holds only what an export writes (the run's own export, cut by a kill before exports were
    atomic) is replaced first. One holding anything else is left to ``export``, which refuses
    a directory that is not a SavedModel."""
    partial = os.path.isdir(path) and not os.path.islink(path) and os.listdir(path)
    if partial and not os.path.isfile(os.path.join(path, "saved_model.pb")):
        if foreign_in_policy(path) is None:
            shutil.rmtree(path)
    export(path)
