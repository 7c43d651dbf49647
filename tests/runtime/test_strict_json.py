"""metrics.jsonl, final.json and config.json are strict JSON: non-finite floats are null."""

import json
import math
import os

import numpy as np
import pytest

from tfagents_vtrace.runtime.rundir import config_io, metrics_log


def _strict(text):
    def refuse(constant):
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_metrics_rows_write_null_for_non_finite_values(tmp_path):
    log = metrics_log.MetricsLog(str(tmp_path), tensorboard=False)
    log.write({"step": 1, "loss": math.nan, "grad_norm": np.float32(np.inf),
               "nested": {"a": -math.inf, "b": [np.float64("nan"), 1.5]}, "ok": 2.0})  # fmt: skip
    log.close()
    with open(tmp_path / "metrics.jsonl") as f:
        (line,) = f.readlines()
    assert "NaN" not in line and "Infinity" not in line
    assert _strict(line) == {"step": 1, "loss": None, "grad_norm": None,
                             "nested": {"a": None, "b": [None, 1.5]}, "ok": 2.0}  # fmt: skip
    assert metrics_log.read_metrics(str(tmp_path))[0]["loss"] is None


def test_dumps_refuses_nothing_it_can_convert(tmp_path):
    path = config_io.write_config(str(tmp_path), {"x": (1, np.int64(2)), "y": math.inf})
    assert _strict(open(path).read()) == {"x": [1, 2], "y": None}
    assert not os.path.exists(path + ".tmp")
    with pytest.raises(ValueError, match="not strict JSON"):
        _strict('{"a": NaN}')  # the check itself
