"""The files of ``DIR/checkpoints``, read from the directory itself rather than from the state
file: which checkpoints are complete, whether one reads back whole, moving a damaged one aside,
and the state file rewritten from what is on disk.

``tf.train.CheckpointManager`` writes ``ckpt-<n>_temp/`` and renames its shards into
``ckpt-<n>.data-<i>-of-<k>`` beside ``ckpt-<n>.index``, then rewrites the state file
``checkpoint``. A kill can leave the temporary directory, a garbled or empty state file, or a
newest checkpoint whose data a full disk or a bad sector cut short. As Orbax does with its
commit marker, a reader here trusts only what it can verify: a checkpoint is *complete* when
its index and every data shard it names exist, and *intact* when every tensor reads back
(TensorFlow checks each tensor's CRC32C as it reads). Damaged files are moved into
``DIR/checkpoints/damaged/``, never deleted.

Checkpoints are read through :class:`~tfagents_vtrace.utils.tf_paths.DirAlias` (TensorFlow's readers
take a path as a glob pattern).

A run writes, rewrites and removes files in ``DIR/checkpoints``, so it works only in a folder
that is its own: :func:`foreign_entry` finds anything there a run does not write (a user's
notes, a folder of theirs, a symbolic link, a ``checkpoint`` file that is not a state file),
and :func:`check_own` refuses such a folder before anything in it is touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys

STATE_FILE = "checkpoint"
DAMAGED_DIR = "damaged"
_INDEX_RE = re.compile(r"^ckpt-(\d+)\.index$")
_DATA_RE = re.compile(r"^ckpt-(\d+)\.data-(\d+)-of-(\d+)$")
# What saves killed before their rename leave: TensorFlow's shard directory, and its state
# file written as checkpoint.tmp<uuid> (or ours, checkpoint.tmp).
_TEMP_RE = re.compile(r"^(ckpt-\d+_temp|checkpoint\.tmp)")
# Every name a run writes in DIR/checkpoints: TensorFlow's checkpoint files (and the
# ``.tempstate<n>`` files its bundle writer renames them from), the state file and its temporary
# copies, the shard directory of a save in progress, the replay archives
# (:func:`tfagents_vtrace.replay.storage.replay_path`) and their temporary names.
_OWN_FILE_RE = re.compile(
    r"^(ckpt-\d+\.(index|data-\d+-of-\d+)(\.tempstate\d+)?|checkpoint(\.tmp[0-9A-Za-z]*)?"
    r"|replay-\d+(\.tmp)?\.npz)$"
)
_OWN_DIR_RE = re.compile(r"^ckpt-\d+_temp$")
_PART_RE = re.compile(r"^part-\d+-of-\d+")  # what a ckpt-<n>_temp/ shard directory holds
_COPY_SUFFIX_RE = re.compile(r"\.\d+$")  # move_aside's "name.1" when "name" was taken
_STATE_KEYS = (
    'model_checkpoint_path: "',
    'all_model_checkpoint_paths: "',
    "all_model_checkpoint_timestamps: ",
    "last_preserved_timestamp: ",
)
# The lines of a state file (tf.train.CheckpointManager's text proto, or write_state's).
_STATE_LINE_RE = re.compile(
    r'^(model_checkpoint_path|all_model_checkpoint_paths): ".*"$'
    r"|^(all_model_checkpoint_timestamps|last_preserved_timestamp): [-+0-9.eE]+$"
)


def _is_state_text(path: str) -> bool:
    """Whether file ``path`` reads as a checkpoint state file, or as the start of one (a write
    cut by a kill): every whole line is a state line, a last unterminated line begins one."""
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 16)
    except OSError:
        return False
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return False
    *lines, last = text.split("\n")
    if not all(_STATE_LINE_RE.match(line) for line in lines if line):
        return False
    keys = _STATE_KEYS
    return not last or any(key.startswith(last) or last.startswith(key) for key in keys)


def foreign_in(directory: str, name: str, copies: bool) -> str | None:
    """``directory/name`` (or the first path inside it) when it is not something a run
    writes in its checkpoints folder; ``copies``: names may carry move_aside's ``.<n>``."""
    path = os.path.join(directory, name)
    base = _COPY_SUFFIX_RE.sub("", name) if copies else name
    if os.path.islink(path):
        return path
    if os.path.isdir(path):
        if not (_OWN_DIR_RE.match(base) or (copies and _OWN_DIR_RE.match(name))):
            return path
        for inner in sorted(os.listdir(path)):  # TensorFlow's part-<i>-of-<k>* shards
            inner_path = os.path.join(path, inner)
            if os.path.islink(inner_path) or not _PART_RE.match(inner):
                return inner_path
        return None
    if not os.path.isfile(path):  # a device, a socket, a fifo
        return path
    if not (_OWN_FILE_RE.match(base) or (copies and _OWN_FILE_RE.match(name))):
        return path
    if base == STATE_FILE and not _is_state_text(path):
        return path
    return None


def foreign_entry(directory: str) -> str | None:
    """The first path under a run's checkpoints folder ``directory`` that a run does not
    write there, or None when everything in it is a run's (or it does not exist).

    A run's: checkpoint files (``ckpt-<n>.index``, ``ckpt-<n>.data-<i>-of-<k>``, a
    ``ckpt-<n>_temp/`` shard directory of ``part-*`` files), a state file ``checkpoint``
    whose text is a state file's, their temporary names, replay archives
    (``replay-<n>.npz``) and ``damaged/`` holding such names (with :func:`move_aside`'s
    ``.<n>`` suffixes). A symbolic link is never a run's (a run writes none): through one, a
    run would rewrite and remove files outside its directory. ``directory`` itself being a
    symbolic link, or not a directory, is returned as foreign.
    """
    if os.path.islink(directory):
        return directory
    if not os.path.lexists(directory):
        return None
    if not os.path.isdir(directory):
        return directory
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if name == DAMAGED_DIR and os.path.isdir(path) and not os.path.islink(path):
            for inner in sorted(os.listdir(path)):
                found = foreign_in(path, inner, copies=True)
                if found:
                    return found
            continue
        found = foreign_in(directory, name, copies=False)
        if found:
            return found
    return None


def check_own(directory: str) -> None:
    """Raises ValueError naming the first path of :func:`foreign_entry` (one line): a run
    rewrites and removes files in its checkpoints folder, so it refuses one that holds
    anything else, before it touches a file there."""
    found = foreign_entry(directory)
    if found is None:
        return
    if found == directory and os.path.islink(directory):
        raise ValueError(
            f"logdir: {directory!r} is a symbolic link (to {os.readlink(directory)!r}); a run "
            "writes and removes files in its checkpoints folder: make it a directory of the "
            "run, or choose another logdir"
        )
    if found == directory:
        raise ValueError(f"logdir: {directory!r} is not a directory; choose another logdir")
    kind = "a symbolic link" if os.path.islink(found) else "not a run's checkpoint file"
    raise ValueError(
        f"logdir: {found!r} is {kind}; a run writes and removes files in "
        f"{directory!r}, which may hold only its checkpoints, replay archives and damaged/: "
        "move it out, or choose another logdir"
    )


def complete_steps(directory: str) -> list[int]:
    """Steps of the complete checkpoints in ``directory`` (index and all data shards present),
    newest first."""
    try:
        names = set(os.listdir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []
    shards: dict[int, set[tuple[int, int]]] = {}
    for name in names:
        match = _DATA_RE.match(name)
        if match:
            shards.setdefault(int(match[1]), set()).add((int(match[2]), int(match[3])))
    steps = []
    for name in names:
        match = _INDEX_RE.match(name)
        if not match:
            continue
        step, present = int(match[1]), shards.get(int(match[1]), set())
        counts = {k for _, k in present}
        if len(counts) == 1 and {i for i, _ in present} == set(range(counts.pop())):
            steps.append(step)
    return sorted(steps, reverse=True)


def prefix(directory: str, step: int) -> str:
    return os.path.join(directory, f"ckpt-{int(step)}")


def damage(path_prefix: str) -> str | None:
    """Why the checkpoint ``path_prefix`` does not read back whole (every tensor is read, so
    each one's checksum is checked), or None when it does."""
    import tensorflow as tf

    try:
        reader = tf.train.load_checkpoint(path_prefix)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except Exception as e:  # noqa: BLE001 - any failure to read is damage
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return f"{type(e).__name__}: {first[:200]}"
    return None


def move_aside(directory: str, step: int, also: tuple[str, ...] = ()) -> str:
    """Moves checkpoint ``step``'s files (and the paths ``also``, e.g. its replay archive) into
    ``directory/damaged/``, never overwriting an earlier one there; returns that directory."""
    target = os.path.join(directory, DAMAGED_DIR)
    os.makedirs(target, exist_ok=True)
    own = [
        os.path.join(directory, n)
        for n in os.listdir(directory)
        if n.startswith(f"ckpt-{int(step)}.") or n.startswith(f"ckpt-{int(step)}_temp")
    ]
    for path in own + [p for p in also if os.path.exists(p)]:
        name, n = os.path.basename(path), 1
        while os.path.exists(os.path.join(target, name)):
            name, n = f"{os.path.basename(path)}.{n}", n + 1
        os.replace(path, os.path.join(target, name))
    return target


def write_state(directory: str, steps: list[int]) -> None:
    """Rewrites the state file ``directory/checkpoint`` to list ``steps`` (newest first) with
    relative paths and each one's time (its index file's), atomically; removes it when
    ``steps`` is empty. The times let ``tf.train.CheckpointManager`` delete the oldest past
    ``max_to_keep`` (it keeps those without one as preserved)."""
    path = os.path.join(directory, STATE_FILE)
    if not steps:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        return
    oldest_first = sorted(steps)
    times = [os.path.getmtime(prefix(directory, s) + ".index") for s in oldest_first]
    lines = [f'model_checkpoint_path: "ckpt-{steps[0]}"']
    lines += [f'all_model_checkpoint_paths: "ckpt-{s}"' for s in oldest_first]
    lines += [f"all_model_checkpoint_timestamps: {t!r}" for t in times]
    lines += [f"last_preserved_timestamp: {min(times) - 1.0!r}"]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


def remove_leftovers(directory: str) -> list[str]:
    """Removes what checkpoint saves killed before their rename left (``ckpt-<n>_temp*``, a
    state file's ``.tmp``); returns the removed paths."""
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    removed = []
    for name in names:
        path = os.path.join(directory, name)
        if _TEMP_RE.match(name):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.remove(path)
            removed.append(path)
    return removed


def warn(message: str) -> None:
    """One ``warning:`` line on stderr."""
    print(f"warning: {message}", file=sys.stderr, flush=True)


def newest_intact(directory: str, alias: str | None = None) -> tuple[int | None, list[str]]:
    """``(step, skipped)``: the newest checkpoint of ``directory`` that reads back whole (None
    when none does) and ``"ckpt-<n> (reason)"`` for each newer one passed over. Nothing is
    moved (readers such as ``export`` do not change a run directory). ``alias``: the name to
    read ``directory`` through (:class:`~tfagents_vtrace.utils.tf_paths.DirAlias`)."""
    skipped = []
    for step in complete_steps(directory):
        reason = damage(prefix(alias or directory, step))
        if reason is None:
            return step, skipped
        skipped.append(f"ckpt-{step} ({reason})")
    return None, skipped


def has_checkpoint(logdir: str) -> bool:
    """Whether ``DIR/checkpoints`` holds a complete checkpoint (its files, not its state
    file, decide: :func:`complete_steps`)."""
    return bool(complete_steps(os.path.join(logdir, "checkpoints")))
