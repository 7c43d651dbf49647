"""tv.train's callbacks and verbose: on_row sees the rows metrics.jsonl holds, on_checkpoint
each checkpoint, on_end the final row; a callback's stop ends the run as documented (and the
same call trains on); an exception in one is checkpointed and raised as one line naming it;
the built-in StopAtValue, StopWhenNoImprovement and WandbLogger (W&B offline)."""

import glob
import json
import os
import re
import struct
import time

import pytest

import tfagents_vtrace as tv
from tfagents_vtrace.runtime.callbacks import CallbackError, CallbackList
from tfagents_vtrace.runtime.rundir.metrics_log import read_metrics

# A few seconds of CartPole with a row every 250 steps and an evaluation every 500.
FAST = dict(
    total_steps=2000,
    num_envs=8,
    unroll_length=5,
    eval_episodes=2,
    eval_every=500,
    log_every_steps=250,
    seed=0,
    hidden_sizes=(32, 32),
)


def _train(logdir, **kwargs):
    return tv.train("impala", env="CartPole-v1", logdir=str(logdir), **{**FAST, **kwargs})


def _env_steps(path: str) -> int:
    """The environment steps a checkpoint holds (read with TensorFlow, not our restore)."""
    import tensorflow as tf

    return int(tf.train.load_checkpoint(path).get_tensor("env_steps/.ATTRIBUTES/VARIABLE_VALUE"))


class Recorder:
    """Checkpoints and the end, as the callback saw them; no on_row (skipped)."""

    def __init__(self):
        self.checkpoints, self.ends = [], []

    def on_checkpoint(self, step, path):
        self.checkpoints.append((step, path, os.path.isfile(path + ".index"), _env_steps(path)))

    def on_end(self, final_row):
        self.ends.append(final_row)


def test_callbacks_see_every_row_each_checkpoint_and_the_final_row(tmp_path):
    rows, recorder = [], Recorder()
    final = _train(tmp_path / "run", callbacks=[rows.append, recorder], checkpoint_every_s=0.3)
    written = read_metrics(str(tmp_path / "run"))
    assert len(written) >= 8 and rows == written  # every row, as metrics.jsonl holds it
    steps = [c[0] for c in recorder.checkpoints]
    assert steps[0] == 0 and steps[-1] == final["step"] and steps == sorted(set(steps))
    for step, path, existed, held in recorder.checkpoints:
        assert existed and held == step
        assert os.path.basename(path) == f"ckpt-{step}"
    assert recorder.ends == [final] and final["policy"] == str(tmp_path / "run" / "policy")
    assert "stopped_by" not in final


def test_a_callback_returning_true_stops_at_that_row_and_the_same_call_trains_on(tmp_path):
    logdir, seen = tmp_path / "run", []
    stop = tv.callbacks.StopAtValue("step", 1001)  # the first row past step 1000

    final = _train(logdir, callbacks=[seen.append, stop])
    at = next(row for row in seen if row["step"] >= 1001)
    assert (
        final["stopped_by"] == "callback" and final["stop_callback"] == "StopAtValue(step >= 1001)"
    )
    assert final["step"] == at["step"] < FAST["total_steps"]
    assert json.load(open(logdir / "final.json")) == {
        k: v for k, v in final.items() if k != "policy"
    }
    assert os.path.isfile(logdir / "checkpoints" / f"ckpt-{at['step']}.index")
    assert _env_steps(str(logdir / "checkpoints" / f"ckpt-{at['step']}")) == at["step"]
    assert os.path.isfile(logdir / "policy" / "saved_model.pb")
    rows = read_metrics(str(logdir))
    assert max(r["step"] for r in rows) == at["step"]  # nothing trained after the stop
    # The final row's evaluation is of the stop's step (the stop row's, or one after it).
    evaluated = [r for r in rows if r["step"] == at["step"] and "eval_return" in r]
    assert evaluated and final["eval_return"] == evaluated[-1]["eval_return"]

    again = _train(logdir)  # the same call, no callback: resumes and trains on
    assert again["resumed"] and again["step"] >= FAST["total_steps"]
    assert "stopped_by" not in again and "stopped_by" not in json.load(open(logdir / "final.json"))
    assert _train(logdir)["already_finished"]


class Boom:
    def on_row(self, row):
        if row["step"] > 1000:
            raise ValueError("boom\nsecond line")


def test_an_exception_in_a_callback_is_checkpointed_and_raised_in_one_line(tmp_path):
    logdir, seen = tmp_path / "run", []
    with pytest.raises(CallbackError) as raised:
        _train(logdir, callbacks=[seen.append, Boom()])
    error = raised.value
    step = seen[-1]["step"]  # the row Boom raised at (seen.append ran first)
    path = str(logdir / "checkpoints" / f"ckpt-{step}")
    assert str(error) == (
        f"callbacks: Boom.on_row raised ValueError: boom; checkpoint {path} holds the newest state"
    )
    assert isinstance(error.__cause__, ValueError) and error.callback == "Boom"
    assert error.hook == "on_row" and error.checkpoint == path and _env_steps(path) == step
    assert not (logdir / "final.json").exists()
    resumed = _train(logdir)  # the same call without it resumes from that checkpoint
    assert resumed["resumed"] and resumed["step"] >= FAST["total_steps"]


def test_verbose_0_prints_no_progress_and_no_start_line(tmp_path, capfd):
    _train(tmp_path / "run", verbose=0)
    quiet = capfd.readouterr().err
    _train(tmp_path / "run", total_steps=2500)  # verbose=1: today's lines
    shown = capfd.readouterr().err
    assert re.search(r"^step=\d+ ", shown, re.M) and "Resuming" in shown
    assert not re.search(r"^step=\d+ ", quiet, re.M) and "Resuming" not in quiet


@pytest.mark.parametrize(
    "call, message",
    [
        (dict(callbacks=[42]), r"^callbacks: 42 has none of on_row, on_checkpoint, on_end"),
        (dict(callbacks="abc"), r"^callbacks: expected a list of callbacks"),
        (dict(verbose=2), r"^verbose: expected 0 or 1, received 2"),
    ],
)
def test_bad_callbacks_and_verbose_are_refused_before_anything_is_written(tmp_path, call, message):
    with pytest.raises(ValueError, match=message) as raised:
        _train(tmp_path / "run", **call)
    assert "\n" not in str(raised.value) and not (tmp_path / "run").exists()


def test_a_function_is_an_on_row_and_a_missing_hook_is_skipped():
    def watch(row):
        return row["x"] > 1

    class OnlyEnd:
        def on_end(self, final_row):
            pass

    callbacks = CallbackList([watch, OnlyEnd()])
    assert callbacks.row({"x": 0}) is None and callbacks.row({"x": 2}).endswith("watch")
    assert [len(callbacks.hooks[h]) for h in ("on_row", "on_checkpoint", "on_end")] == [1, 0, 1]
    assert not CallbackList(None) and not CallbackList([])


# ------------------------------------------------------------------ built-in callbacks
def _first_stop(callback, rows) -> int | None:
    """The index of the first row ``callback.on_row`` stops at."""
    return next((i for i, row in enumerate(rows) if callback.on_row(row)), None)


def test_stop_at_value_on_synthetic_rows():
    rows = [{"step": 1}, {"step": 2, "eval_return": 100.0}, {"step": 3, "eval_return": None},
            {"step": 4, "eval_return": 474.9}, {"step": 5, "eval_return": 475.0}]  # fmt: skip
    assert _first_stop(tv.callbacks.StopAtValue("eval_return", 475), rows) == 4
    assert _first_stop(tv.callbacks.StopAtValue("eval_return", 475.1), rows) is None
    losses = [{"loss": 3.0}, {"loss": float("nan")}, {"loss": 0.4}, {"loss": 0.1}]
    assert _first_stop(tv.callbacks.StopAtValue("loss", 0.5, mode="min"), losses) == 2


def test_stop_when_no_improvement_on_synthetic_rows():
    values = [1.0, 2.0, 2.5, None, 2.4, 2.6, 2.0, 1.0, 3.0]
    rows = [
        {"step": i} if v is None else {"step": i, "eval_return": v} for i, v in enumerate(values)
    ]
    # Improvements: 1.0, 2.0, 2.5, 2.6 (rows 0, 1, 2, 5); after row 5, rows 6 and 7 do not.
    assert _first_stop(tv.callbacks.StopWhenNoImprovement("eval_return", 2), rows) == 7
    # min_delta=0.5: improving by more is 1.0, 2.0, 2.6 (rows 0, 1, 5); rows 6, 7 and 8 wait
    # (3.0 is only 0.4 above 2.6).
    stop = tv.callbacks.StopWhenNoImprovement("eval_return", 3, min_delta=0.5)
    assert _first_stop(stop, rows) == 8 and stop.best == 2.6
    # mode="min": a loss that stops falling.
    losses = [{"loss": v} for v in (5.0, 4.0, 4.5, 3.9, 4.0, 4.1)]
    assert _first_stop(tv.callbacks.StopWhenNoImprovement("loss", 2, mode="min"), losses) == 5


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: tv.callbacks.StopAtValue("", 1), r"^metric: "),
        (lambda: tv.callbacks.StopAtValue("eval_return", float("nan")), r"^value: "),
        (lambda: tv.callbacks.StopAtValue("eval_return", 1, mode="up"), r"^mode: "),
        (lambda: tv.callbacks.StopWhenNoImprovement("eval_return", 0), r"^patience_rows: "),
        (lambda: tv.callbacks.StopWhenNoImprovement("x", 2, min_delta=-1), r"^min_delta: "),
    ],
)
def test_built_in_callbacks_refuse_bad_arguments_in_one_line(make, message):
    with pytest.raises(ValueError, match=message) as raised:
        make()
    assert "\n" not in str(raised.value)


def test_stop_when_no_improvement_ends_a_real_run_at_its_second_evaluation(tmp_path):
    # No evaluation can beat the first by 10**6: the second evaluation row stops the run.
    stop = tv.callbacks.StopWhenNoImprovement("eval_return", patience_rows=1, min_delta=1e6)
    final = _train(tmp_path / "run", callbacks=[stop])
    evals = [r for r in read_metrics(str(tmp_path / "run")) if "eval_return" in r]
    assert len(evals) == 2 and final["step"] == evals[1]["step"] < FAST["total_steps"]
    assert final["stopped_by"] == "callback" and final["stop_callback"].startswith("StopWhen")


# ------------------------------------------------------------------ W&B, offline
def _wandb_records(run_dir: str, timeout: float = 60.0) -> list:
    """The records of an offline W&B run's transaction log (``run-<id>.wandb``): a 7-byte
    W&B header, then LevelDB's log format (32 KiB blocks of chunks, each a 7-byte header:
    CRC, little-endian length, type 1 full / 2 first / 3 middle / 4 last;
    https://github.com/google/leveldb/blob/main/doc/log_format.md), each record a
    ``wandb_internal_pb2.Record``.

    W&B's service process writes the file on its own schedule, so it can still be short
    after ``wandb.finish`` returns: the file is read again until it ends with the run's
    ``exit`` record and no chunk is cut off."""
    (path,) = glob.glob(os.path.join(run_dir, "run-*.wandb"))
    deadline = time.monotonic() + timeout
    while True:
        records, complete = _parse_wandb_log(open(path, "rb").read())
        if complete and any(r.WhichOneof("record_type") == "exit" for r in records):
            return records
        if time.monotonic() > deadline:
            return records
        time.sleep(0.2)


def _parse_wandb_log(data: bytes) -> tuple[list, bool]:
    """``(records, complete)``: complete is False when the last chunk or record is cut off."""
    from google.protobuf.message import DecodeError
    from wandb.proto import wandb_internal_pb2

    assert data[:4] == b":W&B"
    block, pos, chunks, records = 32768, 7, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's trailer
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0:  # zeros: space not yet written
            break
        if pos + 7 + length > len(data):
            return records, False
        chunks += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            try:
                record.ParseFromString(chunks)
            except DecodeError:  # a record still being written
                return records, False
            records.append(record)
            chunks = b""
    return records, not chunks


def test_wandb_logger_logs_every_row_offline(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    for name in ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home"))
    monkeypatch.setenv("WANDB_MODE", "offline")  # nothing is sent
    monkeypatch.setenv("WANDB_SILENT", "true")
    rows = []
    logger = tv.callbacks.WandbLogger(project="tfv-test", name="cartpole")
    final = _train(tmp_path / "run", total_steps=1000, callbacks=[rows.append, logger])
    (run_dir,) = glob.glob(str(tmp_path / "wandb-home" / "wandb" / "offline-run-*"))
    records = _wandb_records(run_dir)
    history = [
        (r.history.step.num, {i.key or "/".join(i.nested_key): json.loads(i.value_json)
                              for i in r.history.item})
        for r in records if r.WhichOneof("record_type") == "history"
    ]  # fmt: skip
    assert [step for step, _ in history] == [row["step"] for row in rows]
    for (_, logged), row in zip(history, rows, strict=True):
        numbers = {k: v for k, v in row.items() if k != "step" and type(v) in (int, float)}
        assert {k: logged[k] for k in numbers} == numbers
    summary = {}
    for r in records:
        if r.WhichOneof("record_type") == "summary":
            summary.update({"/".join(u.nested_key) or u.key: json.loads(u.value_json)
                            for u in r.summary.update})  # fmt: skip
    assert summary["final/eval_return"] == final["eval_return"]
    assert summary["final/step"] == final["step"]
    assert any(r.WhichOneof("record_type") == "exit" for r in records)  # finished at on_end
    assert logger.run is None
