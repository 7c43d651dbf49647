"""The metrics log: ``metrics.jsonl`` (one strict-JSON row per log interval) and TensorBoard
scalars of the same values, both trimmed to a checkpoint's step when a run resumes.

Resuming: rows of metrics.jsonl and TensorBoard summaries with a step beyond the restored
checkpoint's step are dropped (they will be recomputed), so steps stay strictly increasing
and nothing appears twice, in the JSON log or in TensorBoard. A line that is not a row the
run writes (cut by a kill, not JSON, not an object, or without a numeric ``step``: the
run's rows always carry one, :func:`row_step`) is dropped on resume the same way.
"""

from __future__ import annotations

import glob
import json
import math
import os

from tfagents_vtrace.runtime.rundir.config_io import dumps

TIMING_FIELDS = (
    "wall_time",
    "sps",
    "cpu_ms_per_step",
    "bottleneck",
    "train_wall_time",
    "train_sps",
    "train_cpu_ms_per_step",
)
"""Fields of the rows and of ``final.json`` that depend on the machine's speed and load (with
the ``time_*`` shares): what a comparison of two runs' rows leaves out."""


def row_step(row) -> int | float | None:
    """The step of a metrics row: ``row["step"]`` when ``row`` is a JSON object whose step is
    a finite number (not a bool), else None (a damaged row: ``null``, a string, missing)."""
    if not isinstance(row, dict):
        return None
    step = row.get("step")
    if isinstance(step, bool) or not isinstance(step, int | float):
        return None
    return step if math.isfinite(step) else None


def read_metrics(logdir: str) -> list[dict]:
    """The rows of ``DIR/metrics.jsonl`` (``[]`` if there is none); a row cut by a kill, and
    any line that is not a row with a numeric step (:func:`row_step`), is skipped."""
    path = os.path.join(logdir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    rows = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if row_step(row) is not None:
                rows.append(row)
    return rows


def _scalar_metadata():
    """``SummaryMetadata`` marking a float32 scalar for TensorBoard's "scalars" plugin."""
    from tensorflow.core.framework import summary_pb2

    return summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
    )


def truncate_events(logdir: str, step: int) -> int:
    """Rewrites ``DIR/events.out.tfevents.*`` without the summaries of steps after ``step``.

    Event files are TFRecord files of ``Event`` protos; events without a summary (the file
    version header) are kept. A record cut by a kill ends the file's readable part. Returns
    the number of summary events dropped.
    """
    paths = glob.glob(os.path.join(glob.escape(logdir), "events.out.tfevents.*"))
    for leftover in [p for p in paths if p.endswith(".tmp")]:  # a rewrite cut by a kill
        os.remove(leftover)
    paths = [p for p in paths if not p.endswith(".tmp")]
    if not paths:
        return 0
    import tensorflow as tf
    from tensorflow.core.util import event_pb2

    dropped = 0
    for path in paths:
        kept, changed = [], False
        try:
            for raw in tf.data.TFRecordDataset(path):
                record = raw.numpy()
                event = event_pb2.Event.FromString(record)
                if event.HasField("summary") and event.step > step:
                    dropped, changed = dropped + 1, True
                else:
                    kept.append(record)
        except tf.errors.DataLossError:  # a record cut by a kill: keep what precedes it
            changed = True
        if changed:
            tmp = path + ".tmp"
            with tf.io.TFRecordWriter(tmp) as writer:
                for record in kept:
                    writer.write(record)
            os.replace(tmp, path)
    return dropped


class MetricsLog:
    """Appends JSON rows to ``DIR/metrics.jsonl`` and mirrors scalars to TensorBoard."""

    def __init__(self, logdir: str, tensorboard: bool = True):
        self.logdir = logdir
        self.path = os.path.join(logdir, "metrics.jsonl")
        self._tensorboard = tensorboard
        self._writer = None
        self._file = None
        self.last_row: dict | None = None  # the newest row kept by truncate_after

    def truncate_after(self, step: int) -> int:
        """Drops rows (and TensorBoard summaries) with ``step > step`` (resume) and repairs the
        log first: a line cut by a kill, and a line that is not a row with a numeric step
        (:func:`row_step`), is dropped; every kept line ends with a newline. Returns the
        number of metrics rows kept; the newest is ``last_row``."""
        if self._tensorboard:
            truncate_events(self.logdir, step)
        self.last_row = None
        if not os.path.exists(self.path):
            return 0
        with open(self.path, encoding="utf-8", errors="replace") as f:  # damaged bytes too
            lines = [line.rstrip("\n") for line in f if line.strip()]
        keep = []
        for line in lines:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # a row cut by a kill
                continue
            at = row_step(row)
            if at is not None and at <= step:
                keep.append(line + "\n")
                self.last_row = row
        with open(self.path + ".tmp", "w") as f:
            f.writelines(keep)
        os.replace(self.path + ".tmp", self.path)
        return len(keep)

    def write(self, row: dict) -> None:
        """Appends ``row`` (must hold ``step``) and writes its numeric fields as scalars."""
        if self._file is None:
            os.makedirs(self.logdir, exist_ok=True)
            self._file = open(self.path, "a")  # noqa: SIM115 - kept open for the run
        self._file.write(dumps(row) + "\n")  # strict JSON: null for NaN / inf
        self._file.flush()
        if self._tensorboard:
            self._summaries(row)

    def _summaries(self, row: dict) -> None:
        import tensorflow as tf

        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.logdir)
        step = int(row["step"])
        with self._writer.as_default():
            for key, value in row.items():
                if key != "step" and isinstance(value, int | float) and not isinstance(value, bool):
                    # The scalar plugin's summary format, written without importing tensorboard.
                    tf.summary.write(
                        key,
                        tf.constant(float(value), tf.float32),
                        step=step,
                        metadata=_scalar_metadata(),
                    )

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._writer is not None:
            self._writer.flush()
            self._writer.close()
            self._writer = None
