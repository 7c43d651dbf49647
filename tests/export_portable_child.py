"""Child process of tests/test_export_portable.py: replays LiteRT and ONNX policies with their
runtimes alone (ai-edge-litert's interpreter, ONNX Runtime): no TensorFlow, no this package.

Run as ``python -I -S export_portable_child.py CASES_JSON SITE_PACKAGES`` from a temporary
directory: ``-S`` skips site-packages' .pth files (so the editable install of tfagents_vtrace
is not on the path) and only the plain SITE_PACKAGES directory is added back. Each case names
an artefact, the recorded inputs (``observation, first, prev_action, prev_reward`` and the
noise inputs ``noise`` (and TAAC's ``b_noise``), ``[T, 1, ...]``) and an output npz:
``greedy__<name>`` / ``sample__<name>`` ``[T, 1, ...]``, the artefact's own recurrent state
carried from step to step.
"""

import importlib.util
import json
import sys

sys.path.append(sys.argv[2])
if importlib.util.find_spec("tfagents_vtrace") is not None:
    raise SystemExit("tfagents_vtrace must not be importable in the export child")

import numpy as np  # noqa: E402

INPUTS = ("observation", "first", "prev_action", "prev_reward")


def litert_steps(path: str):
    """(initial state, step(inputs, state, noise) -> (greedy, sample)) of a LiteRT model."""
    from ai_edge_litert.interpreter import Interpreter

    model = Interpreter(model_path=path)
    greedy = model.get_signature_runner("greedy_action")
    sample = model.get_signature_runner("action")
    state = model.get_signature_runner("get_initial_state")(batch_size=np.int32(1))

    def step(inputs, state, noise):
        return greedy(**inputs, **state), sample(**inputs, **state, **noise)

    return dict(state), step


def onnx_steps(path: str):
    """The same for an ONNX model: one run gives the greedy and the sampled outputs."""
    import onnxruntime as ort

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    state = {
        i.name: np.zeros([1, i.shape[-1]], np.float32)
        for i in session.get_inputs()
        if i.name.startswith("state_")
    }

    def step(inputs, state, noise):
        out = dict(zip(names, session.run(None, {**inputs, **state, **noise})))
        sample, greedy = {}, {}  # greedy_X: the greedy step's X; X alone: the sampled step's,
        for k, v in out.items():  # and the greedy one's too when there is no greedy_X
            k = k.replace("next_state_", "state_")
            if k.startswith("greedy_"):
                greedy[k[len("greedy_") :]] = v
            else:
                sample[k] = v
        return {**sample, **greedy}, sample

    return state, step


def run_case(case: dict) -> dict:
    data = np.load(case["inputs"])
    state, step = (litert_steps if case["format"] == "tflite" else onnx_steps)(case["path"])
    noise_keys = [k for k in data.files if k == "noise" or k.endswith("_noise")]
    rec: dict[str, list] = {}
    for t in range(len(data["first"])):
        inputs = {k: data[k][t] for k in INPUTS}
        greedy, sample = step(inputs, state, {k: data[k][t] for k in noise_keys})
        for prefix, out in (("greedy", greedy), ("sample", sample)):
            for k, v in out.items():
                rec.setdefault(f"{prefix}__{k}", []).append(np.asarray(v))
        state = {k: v for k, v in sample.items() if k.startswith("state_")}
    return {k: np.stack(v) for k, v in rec.items()}


def main() -> None:
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    for case in cases:
        np.savez(case["outputs"], **run_case(case))
    status = {
        name: name in sys.modules
        for name in ("tfagents_vtrace", "tensorflow", "tensorflow_probability")
    }
    print("CHILD_STATUS " + json.dumps(status))


if __name__ == "__main__":
    main()
