"""Run directory on resume: metrics rows and TensorBoard summaries past the checkpoint go."""

import glob
import json
import os

import tensorflow as tf
from tensorflow.core.util import event_pb2

from tfagents_vtrace.runtime.rundir import config_io, metrics_log


def _summary_steps(logdir: str) -> list[int]:
    steps = []
    for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
        for raw in tf.data.TFRecordDataset(path):
            event = event_pb2.Event.FromString(raw.numpy())
            if event.HasField("summary"):
                steps.extend([event.step] * len(event.summary.value))
    return steps


def test_resume_drops_rows_and_summaries_after_the_checkpoint(tmp_path):
    logdir = str(tmp_path)
    log = metrics_log.MetricsLog(logdir)
    for step in (10, 20, 30, 40):
        log.write({"step": step, "loss": float(step), "sps": 1.0})
    log.close()
    assert sorted(set(_summary_steps(logdir))) == [10, 20, 30, 40]

    resumed = metrics_log.MetricsLog(logdir)
    assert resumed.truncate_after(20) == 2
    with open(os.path.join(logdir, "metrics.jsonl")) as f:
        assert [json.loads(line)["step"] for line in f] == [10, 20]
    # Two scalars (loss, sps) per kept row; nothing of steps 30 and 40 is left.
    assert sorted(_summary_steps(logdir)) == [10, 10, 20, 20]
    resumed.write({"step": 30, "loss": 3.0})
    resumed.close()
    assert sorted(_summary_steps(logdir)) == [10, 10, 20, 20, 30]


def test_event_file_cut_by_a_kill_keeps_its_readable_part(tmp_path):
    logdir = str(tmp_path)
    log = metrics_log.MetricsLog(logdir)
    for step in (1, 2, 3):
        log.write({"step": step, "loss": 0.5})
    log.close()
    (path,) = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 5)  # the last record is now incomplete
    assert metrics_log.truncate_events(logdir, 100) == 0
    assert _summary_steps(logdir) == [1, 2]


def test_read_metrics_skips_a_cut_row_and_last_json_line_finds_the_final_row(tmp_path):
    assert metrics_log.read_metrics(str(tmp_path)) == []
    with open(tmp_path / "metrics.jsonl", "w") as f:
        f.write('{"step": 1}\n{"step": 2}\n{"step": 3, "lo')  # killed mid-row
    assert [r["step"] for r in metrics_log.read_metrics(str(tmp_path))] == [1, 2]
    stdout = 'progress\n{"final": true, "step": 9}\nstep=9 done\n{not json\n'
    assert config_io.last_json_line(stdout) == {"final": True, "step": 9}
    assert config_io.last_json_line("no json here") == {}


# Lines a run never writes: the resume drops them as it drops a row torn by a kill.
DAMAGED_ROWS = ['{"step": null}', '{"step": "20"}', '{"step": true}', '{"loss": 1.0}',
                '{"step": NaN}', '{"step": Infinity}', '[1, 2]', '7', '"step"', '{"step": [3]}',
                '{"step": {"n": 3}}']  # fmt: skip


def test_rows_without_a_numeric_step_are_repaired_like_torn_lines(tmp_path):
    logdir = str(tmp_path)
    good = ['{"step": 10, "loss": 1.0}', '{"step": 20, "loss": 2.0}', '{"step": 30.0}']
    with open(tmp_path / "metrics.jsonl", "w") as f:
        f.write("\n".join([good[0], *DAMAGED_ROWS, good[1], good[2], '{"step": 40}']) + "\n")
    assert [r["step"] for r in metrics_log.read_metrics(logdir)] == [10, 20, 30.0, 40]
    log = metrics_log.MetricsLog(logdir, tensorboard=False)
    assert log.truncate_after(30) == 3
    assert log.last_row == {"step": 30.0}
    assert open(tmp_path / "metrics.jsonl").read() == "\n".join(good) + "\n"


def test_a_row_without_a_step_is_no_work_of_a_start(tmp_path):
    from tfagents_vtrace.runtime.rundir import run_dir

    for line in DAMAGED_ROWS + ['{"step": 0}', "{torn"]:
        (tmp_path / "metrics.jsonl").write_text('{"step": 0}\n' + line + "\n")
        assert not run_dir._metrics_rows_past_start(str(tmp_path)), line
    (tmp_path / "metrics.jsonl").write_text('{"step": null}\n{"step": 5}\n')
    assert run_dir._metrics_rows_past_start(str(tmp_path))


def test_a_run_resumes_over_a_row_without_a_step(tmp_path):
    from tests.runtime.test_actor_learner import AGENT, NET, _run
    from tfagents_vtrace.runtime.driver import train

    logdir = str(tmp_path / "run")
    train(_run(512, checkpoint_every_s=1e-6), AGENT, AGENT.Config(), NET, logdir)
    with open(os.path.join(logdir, "metrics.jsonl"), "a") as f:
        f.write('{"step": null}\n{"step": "x", "loss": 1}\n')
    final = train(_run(1024, checkpoint_every_s=1e-6), AGENT, AGENT.Config(), NET, logdir)
    assert final["resumed"] and final["step"] >= 1024
    with open(os.path.join(logdir, "metrics.jsonl")) as f:
        steps = [json.loads(line)["step"] for line in f]
    assert all(isinstance(s, int) for s in steps) and steps == sorted(set(steps))
