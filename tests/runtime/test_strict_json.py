"""metrics.jsonl, final.json and config.json are strict JSON: non-finite floats are null."""

import json
import math
import os

import numpy as np
import pytest

from tfagents_vtrace.runtime import run_dir


def _strict(text):
    def refuse(constant):
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_metrics_rows_write_null_for_non_finite_values(tmp_path):
    log = run_dir.MetricsLog(str(tmp_path), tensorboard=False)
    log.write({"step": 1, "loss": math.nan, "grad_norm": np.float32(np.inf),
               "nested": {"a": -math.inf, "b": [np.float64("nan"), 1.5]}, "ok": 2.0})  # fmt: skip
    log.close()
    with open(tmp_path / "metrics.jsonl") as f:
        (line,) = f.readlines()
    assert "NaN" not in line and "Infinity" not in line
    assert _strict(line) == {"step": 1, "loss": None, "grad_norm": None,
                             "nested": {"a": None, "b": [None, 1.5]}, "ok": 2.0}  # fmt: skip
    assert run_dir.read_metrics(str(tmp_path))[0]["loss"] is None


def test_final_json_writes_null_for_non_finite_values(tmp_path):
    class Trainer:
        logdir, run_config = str(tmp_path), type("Run", (), {"export_policy": False})()
        metrics = run_dir.MetricsLog(str(tmp_path), tensorboard=False)

        def save(self):
            return ""

        def wall_time(self):
            return 1.0

    last_eval = {"step": 10, "eval_return": math.nan}
    final = run_dir.finish_run(Trainer(), None, last_eval, None, 10, loss=np.float32(-np.inf))
    with open(os.path.join(tmp_path, "final.json")) as f:
        text = f.read()
    assert _strict(text)["eval_return"] is None and _strict(text)["loss"] is None
    assert _strict(run_dir.dumps(final))["eval_return"] is None  # the line train prints


def test_dumps_refuses_nothing_it_can_convert(tmp_path):
    path = run_dir.write_config(str(tmp_path), {"x": (1, np.int64(2)), "y": math.inf})
    assert _strict(open(path).read()) == {"x": [1, 2], "y": None}
    assert not os.path.exists(path + ".tmp")
    with pytest.raises(ValueError, match="not strict JSON"):
        _strict('{"a": NaN}')  # the check itself
