"""Child process of tests/test_export.py: drives exported policies with plain TensorFlow.

Run as ``python -I -S export_roundtrip_child.py CASES_JSON SITE_PACKAGES`` from a temporary
directory: ``-S`` skips site-packages' .pth files (so the editable install of tfagents_vtrace
is not on the path), and only the plain SITE_PACKAGES directory is added back for TensorFlow.
For each case it loads the SavedModel, steps it over the recorded inputs and writes the
outputs to an npz file that the parent compares against the in-process network.
"""

import importlib.util
import json
import sys

sys.path.append(sys.argv[2])
if importlib.util.find_spec("tfagents_vtrace") is not None:
    raise SystemExit("tfagents_vtrace must not be importable in the export round-trip child")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def _np(x):
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x)


def run_case(case: dict) -> dict:
    policy = tf.saved_model.load(case["path"])
    data = np.load(case["inputs"])
    obs, first, prev_action, prev_reward = (data[k] for k in ("obs", "first", "pa", "pr"))
    T, B = first.shape
    state = policy.get_initial_state(batch_size=tf.constant(B))
    rec: dict[str, list] = {}
    deterministic = True
    for t in range(T):
        kw = dict(
            observation=obs[t],
            first=first[t],
            prev_action=prev_action[t],
            prev_reward=prev_reward[t],
            state=state,
        )
        greedy = policy.greedy_action(**kw)
        again = policy.greedy_action(**kw)
        sampled = policy.action(**kw)
        deterministic &= bool(np.array_equal(_np(greedy["action"]), _np(again["action"])))
        for k, v in greedy.items():
            if k != "state":
                rec.setdefault("greedy_" + k, []).append(_np(v))
        for k in ("action", "log_prob", "value"):
            rec.setdefault("sampled_" + k, []).append(_np(sampled[k]))
        if t == 0:
            flat_kw = {
                "observation": tf.constant(obs[0]),
                "first": tf.constant(first[0]),
                "prev_action": tf.constant(prev_action[0]),
                "prev_reward": tf.constant(prev_reward[0]),
            }
            flat_kw.update({f"state_{i}": s for i, s in enumerate(state)})
            flat = policy.signatures["greedy_action"](**flat_kw)
            serving = policy.signatures["serving_default"](**flat_kw)
            rec["flat_greedy_action"] = [_np(flat["action"])]
            rec["flat_value"] = [_np(flat["value"])]
            rec["serving_value"] = [_np(serving["value"])]
            init = policy.signatures["get_initial_state"](batch_size=tf.constant(B))
            rec["flat_init_keys"] = [np.array(sorted(init))]
        state = greedy["state"]
    out = {k: np.stack(v) for k, v in rec.items()}
    for i, s in enumerate(state):
        out[f"final_state_{i}"] = _np(s)
    bad = np.zeros((B, *obs.shape[2:-1], obs.shape[-1] + 1), obs.dtype)
    try:
        policy.action(
            observation=bad,
            first=first[0],
            prev_action=prev_action[0],
            prev_reward=prev_reward[0],
            state=policy.get_initial_state(batch_size=tf.constant(B)),
        )
        out["wrong_shape_rejected"] = np.array(False)
    except (TypeError, ValueError):
        out["wrong_shape_rejected"] = np.array(True)
    out["greedy_deterministic"] = np.array(deterministic)
    out["metadata"] = np.array(policy.metadata.numpy().decode())
    return out


def main() -> None:
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    for case in cases:
        np.savez(case["outputs"], **run_case(case))
    status = {
        "tfagents_vtrace_imported": "tfagents_vtrace" in sys.modules,
        "tfp_imported": "tensorflow_probability" in sys.modules,
    }
    print("ROUNDTRIP_STATUS " + json.dumps(status))


if __name__ == "__main__":
    main()
