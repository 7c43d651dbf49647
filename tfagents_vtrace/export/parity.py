"""Trajectory parity of an exported policy (LiteRT, ONNX, SavedModel) with a SavedModel.

The check that an artefact *acts* like the policy it came from (IMPALA's actor, Espeholt et
al. 2018, https://arxiv.org/abs/1802.01561, steps the same recurrent policy one call at a
time, so that is what is compared):

1. :func:`record`: the reference (a SavedModel) acts in an environment for ``steps`` steps
   at batch size 1, sampling its actions from recorded noise (``action_from_noise``); episodes
   end by termination, truncation or ``max_episode_steps``, so resets fall inside the window.
   Each step's inputs (a Dict / Tuple observation as its flat ``observation_<key>``
   inputs), the noise, and the reference's ``greedy_action`` and sampled outputs are kept.
2. :func:`replay`: the candidate is fed the same observations, ``first`` flags, previous
   actions and rewards and noise, carrying its *own* recurrent state from step to step (or,
   with ``teacher_forcing``, fed the reference's: for policies whose state dynamics amplify
   float rounding, e.g. TaacL / TaacQ).
3. :func:`compare`: greedy and sampled actions must be identical (discrete) or within
   ``atol`` (continuous); logits / loc / scale / q, value, log_prob and every state tensor
   within ``atol + rtol * |reference|`` (numpy's ``allclose`` rule; defaults 1e-5 and 1e-6:
   a few float32 roundings of values of any size, e.g. a CartPole value of 100 has a
   float32 spacing of 7.6e-6).

:func:`check_parity` runs the three (``tfv-export --check`` calls it through
:func:`tfagents_vtrace.export.artefacts.check`). Runners wrap each format behind one interface:
``initial_state(batch_size)``, ``greedy(inputs)`` and ``sample(inputs, noise)`` on dicts of
numpy arrays named as the SavedModel's flat signatures (``observation, first, prev_action,
prev_reward, state_0, ...`` -> ``action, value, log_prob, ..., state_0, ...``). ``noise`` is
the array of the ``noise`` input, or a dict of every noise input of the policy by name (a
TAAC policy has two: ``noise`` and ``b_noise``; :func:`noise_inputs`).
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

INPUTS = ("observation", "first", "prev_action", "prev_reward")
DEFAULT_ATOL = 1e-5
DEFAULT_RTOL = 1e-6


def _numpy(out: dict) -> dict:
    return {k: np.asarray(v.numpy() if hasattr(v, "numpy") else v) for k, v in out.items()}


def _noises(noise) -> dict:
    """The noise inputs by name: an array is the ``noise`` input."""
    return dict(noise) if isinstance(noise, dict) else {"noise": noise}


def is_observation_key(key: str) -> bool:
    """Whether a recorded trajectory's ``key`` is an observation input (``observation``, or
    ``observation_<key>`` of a Dict / Tuple observation's leaf)."""
    return key == "observation" or key.startswith("observation_")


def observation_inputs(observation, dtypes) -> dict:
    """The flat observation inputs of one environment observation, batch of one: ``{
    "observation": array}``, or for a Dict / Tuple observation (``dtypes`` the metadata's
    ``observation_dtype``, by input name) one ``observation_<key>`` array per leaf."""
    if not isinstance(dtypes, dict):
        return {"observation": np.asarray(observation, np.dtype(dtypes))[None]}
    from tfagents_vtrace.networks.multi_input import named_leaves

    leaves = dict(named_leaves(observation))
    if set(leaves) != set(dtypes):
        raise ValueError(
            f"env: its observation has the leaves {sorted(leaves)}, the policy takes "
            f"{sorted(dtypes)}"
        )
    return {name: np.asarray(leaves[name], np.dtype(dtypes[name]))[None] for name in dtypes}


def noise_inputs(metadata: dict) -> dict:
    """``{name: (law, shape)}`` of an exported policy's noise inputs, each ``[B, *shape]``
    float32 of law "uniform" (in [0, 1)) or "normal" (standard): the metadata's
    ``noise_inputs``, else the one ``noise`` ``[B, noise_size]`` of ``noise_law``."""
    spec = metadata.get("noise_inputs")
    if spec is None:
        return {"noise": (metadata["noise_law"], (int(metadata["noise_size"]),))}
    return {k: (v["law"], tuple(int(d) for d in v["shape"])) for k, v in spec.items()}


def is_noise_key(key: str) -> bool:
    """Whether a recorded trajectory's ``key`` is a noise input (``noise``, ``*_noise``)."""
    return key == "noise" or key.endswith("_noise")


class SavedModelRunner:
    """A SavedModel policy (a path, a loaded SavedModel, or an in-process
    :class:`~tfagents_vtrace.export.policy_module.PolicyModule`) through its flat signatures."""

    def __init__(self, policy):
        import tensorflow as tf

        self._tf = tf
        if isinstance(policy, str | os.PathLike):
            from tfagents_vtrace.utils.tf_paths import load_saved_model

            policy = load_saved_model(policy)
        if hasattr(policy, "serving_signatures"):  # in process: the exported functions
            self._signatures = policy.serving_signatures()
        else:
            self._signatures = policy.signatures
        if "action_from_noise" not in self._signatures:
            raise ValueError(
                "policy: the SavedModel has no action_from_noise signature (exported before "
                "it existed); export it again from its run directory"
            )
        self.metadata = json.loads(policy.metadata.numpy())

    def initial_state(self, batch_size: int) -> dict:
        init = self._signatures["get_initial_state"]
        return _numpy(init(batch_size=self._tf.constant(batch_size, self._tf.int32)))

    def _call(self, name: str, inputs: dict) -> dict:
        return _numpy(
            self._signatures[name](**{k: self._tf.constant(v) for k, v in inputs.items()})
        )

    def greedy(self, inputs: dict) -> dict:
        return self._call("greedy_action", inputs)

    def sample(self, inputs: dict, noise) -> dict:
        return self._call("action_from_noise", {**inputs, **_noises(noise)})


class LiteRTRunner:
    """A LiteRT model (``.tflite``) through the ``ai-edge-litert`` interpreter."""

    def __init__(self, path: str | os.PathLike, num_threads: int | None = None):
        from ai_edge_litert.interpreter import Interpreter

        self.interpreter = Interpreter(model_path=os.fspath(path), num_threads=num_threads)
        self._greedy = self.interpreter.get_signature_runner("greedy_action")
        self._sample = self.interpreter.get_signature_runner("action")
        self._init = self.interpreter.get_signature_runner("get_initial_state")

    def initial_state(self, batch_size: int) -> dict:
        return dict(self._init(batch_size=np.int32(batch_size)))

    def greedy(self, inputs: dict) -> dict:
        return dict(self._greedy(**inputs))

    def sample(self, inputs: dict, noise) -> dict:
        return dict(self._sample(**inputs, **_noises(noise)))


class OnnxRunner:
    """An ONNX model through ONNX Runtime (CPU); outputs renamed to the SavedModel's."""

    def __init__(self, path: str | os.PathLike, num_threads: int | None = None):
        import onnxruntime as ort

        options = ort.SessionOptions()
        if num_threads:
            options.intra_op_num_threads = options.inter_op_num_threads = num_threads
        self.session = ort.InferenceSession(
            os.fspath(path), options, providers=["CPUExecutionProvider"]
        )
        meta = self.session.get_modelmeta().custom_metadata_map["tfagents_vtrace"]
        self.metadata = json.loads(meta)
        self._outputs = [o.name for o in self.session.get_outputs()]
        self._state_sizes = {
            i.name: i.shape[-1] for i in self.session.get_inputs() if i.name.startswith("state_")
        }

    def initial_state(self, batch_size: int) -> dict:
        return {k: np.zeros([batch_size, n], np.float32) for k, n in self._state_sizes.items()}

    def _run(self, inputs: dict, noise) -> dict:
        return dict(zip(self._outputs, self.session.run(None, {**inputs, **_noises(noise)})))

    @staticmethod
    def _rename(out: dict, greedy: bool) -> dict:
        """The greedy or the sampled step of one run: ``greedy_X`` outputs are the greedy
        step's X, the others the sampled step's and, when there is no ``greedy_X``, both
        steps' (value, logits, ...); ``next_state_i`` is ``state_i``."""
        sample, greedy_out = {}, {}
        for k, v in out.items():
            name = k.replace("next_state_", "state_")
            if name.startswith("greedy_"):
                greedy_out[name[len("greedy_") :]] = v
            else:
                sample[name] = v
        if not greedy:
            return sample
        return {**sample, **greedy_out}

    def greedy(self, inputs: dict) -> dict:
        batch = len(inputs["first"])
        noise = {  # ignored by the greedy outputs
            name: np.full([batch, *shape], 0.5 if law == "uniform" else 0.0, np.float32)
            for name, (law, shape) in noise_inputs(self.metadata).items()
        }
        return self._rename(self._run(inputs, noise), greedy=True)

    def sample(self, inputs: dict, noise) -> dict:
        return self._rename(self._run(inputs, noise), greedy=False)


def open_runner(path: str | os.PathLike, num_threads: int | None = None, fmt: str | None = None):
    """The runner for ``path``: a SavedModel directory, a LiteRT or an ONNX file (``fmt``
    "tflite" / "onnx" when given, else by the file's extension: ``.onnx``, else LiteRT)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return SavedModelRunner(path)
    if fmt == "onnx" or (fmt is None and path.endswith(".onnx")):
        return OnnxRunner(path, num_threads)
    return LiteRTRunner(path, num_threads)


def draw_noises(metadata: dict, rng: np.random.Generator, batch_size: int = 1) -> dict:
    """Every noise input of an exported policy (:func:`noise_inputs`), drawn in order as
    float32 ``[batch_size, *shape]`` of its law ("uniform" in [0, 1) or standard "normal")."""
    return {
        name: rng.random((batch_size, *shape), dtype=np.float32)
        if law == "uniform"
        else rng.standard_normal((batch_size, *shape), dtype=np.float32)
        for name, (law, shape) in noise_inputs(metadata).items()
    }


def _env_action(action: np.ndarray, space) -> np.ndarray | int:
    """One env's action: a Python int for ``Discrete``, else :func:`~tfagents_vtrace.envs.
    env_action` (a ``Box`` clipped to its bounds)."""
    import gymnasium as gym

    from tfagents_vtrace.envs import env_action

    if isinstance(space, gym.spaces.Discrete):
        return int(action)
    return env_action(action, space)


def _act(runner, inputs: dict, state: dict, noise, rec: dict) -> dict:
    """One step of ``runner``: its greedy and sampled outputs appended to ``rec`` (as
    ``greedy/<output>``, ``sample/<output>``); returns the sampled ones."""
    greedy = runner.greedy({**inputs, **state})
    sample = runner.sample({**inputs, **state}, noise)
    for step, out in (("greedy", greedy), ("sample", sample)):
        for k, v in out.items():
            rec.setdefault(f"{step}/{k}", []).append(v)
    return sample


def record(
    reference: SavedModelRunner,
    env,
    steps: int = 300,
    seed: int = 0,
    max_episode_steps: int | None = None,
) -> dict:
    """Steps of ``reference`` acting in ``env`` (one gymnasium env, batch size 1).

    Actions are the reference's draws from recorded noise. Returns arrays with a leading
    ``[steps]`` axis: the inputs (``observation`` or its ``observation_<key>`` leaves,
    ``first, prev_action, prev_reward`` and the
    noise inputs: ``noise``, and ``b_noise`` for TAAC),
    ``greedy/<output>`` and ``sample/<output>`` (the reference's outputs, states included),
    and ``episodes`` (how many episodes the window touched).
    """
    meta = reference.metadata
    max_episode_steps = max_episode_steps or max(2, steps // 3)
    rng = np.random.default_rng(seed)
    obs_dtypes = meta["observation_dtype"]  # one dtype, or one per flat input (Dict / Tuple)
    act_dtype, act_shape = np.dtype(meta["action_dtype"]), tuple(meta["action_shape"])
    obs, _ = env.reset(seed=int(seed))
    state = reference.initial_state(1)
    prev_action, prev_reward = np.zeros((1, *act_shape), act_dtype), np.zeros(1, np.float32)
    first, length = True, 0
    rec: dict[str, list] = {}
    for _ in range(steps):
        inputs = {
            **observation_inputs(obs, obs_dtypes),
            "first": np.array([first]),
            "prev_action": prev_action,
            "prev_reward": prev_reward,
        }
        noise = draw_noises(meta, rng)
        for k, v in {**inputs, **noise}.items():
            rec.setdefault(k, []).append(v)
        sample = _act(reference, inputs, state, noise, rec)
        state = {k: v for k, v in sample.items() if k.startswith("state_")}
        action = np.asarray(sample["action"], act_dtype)
        obs, reward, terminated, truncated, _ = env.step(_env_action(action[0], env.action_space))
        length += 1
        first = bool(terminated or truncated or length >= max_episode_steps)
        if first:
            obs, _ = env.reset()
            length = 0
            prev_action, prev_reward = np.zeros_like(prev_action), np.zeros(1, np.float32)
        else:
            prev_action, prev_reward = action, np.array([reward], np.float32)
    trajectory = {k: np.stack(v) for k, v in rec.items()}
    trajectory["episodes"] = np.array(int(trajectory["first"].sum()))
    return trajectory


def replay(candidate, trajectory: dict, teacher_forcing: bool = False) -> dict:
    """``candidate``'s ``greedy/<output>`` and ``sample/<output>`` on the recorded inputs and
    noise, its own recurrent state carried from step to step (``[steps, ...]`` arrays).

    With ``teacher_forcing`` the candidate's state at step t is instead the reference's
    (``sample/state_*`` of step t - 1; both initial states at t = 0), so every step is
    compared from the same inputs: the check for policies whose own state dynamics amplify
    rounding (``PolicyModule.parity_teacher_forcing``: TaacL / TaacQ trajectories, see
    ``tfagents_vtrace.agents.taac.export``).
    """
    steps, batch = trajectory["first"].shape[:2]
    state = candidate.initial_state(batch)
    noise_keys = [k for k in trajectory if is_noise_key(k)]
    state_keys = [k for k in trajectory if k.startswith("sample/state_")]
    input_keys = [k for k in trajectory if is_observation_key(k)] + list(INPUTS[1:])
    rec: dict[str, list] = {}
    for t in range(steps):
        if teacher_forcing and t > 0:
            state = {k[len("sample/") :]: trajectory[k][t - 1] for k in state_keys}
        inputs = {k: trajectory[k][t] for k in input_keys}
        noise = {k: trajectory[k][t] for k in noise_keys}
        sample = _act(candidate, inputs, state, noise, rec)
        state = {k: v for k, v in sample.items() if k.startswith("state_")}
    return {k: np.stack(v) for k, v in rec.items()}


@dataclasses.dataclass
class ParityReport:
    """What :func:`compare` found.

    Attributes:
      passed: every check held.
      steps, episodes: the window (episodes it touched).
      max_abs_diff: per output (``greedy/value``, ``sample/state_0``, ...), over all steps.
      action_mismatches: ``{"greedy": n, "sample": n}`` steps whose actions differ (discrete:
        not equal; continuous: more than the tolerance apart).
      failures: one line per failed check.
      teacher_forcing: the candidate was fed the reference's state (:func:`replay`).
    """

    passed: bool
    steps: int
    episodes: int
    max_abs_diff: dict
    action_mismatches: dict
    failures: list
    teacher_forcing: bool = False

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)


def compare(
    trajectory: dict, candidate: dict, atol: float = DEFAULT_ATOL, rtol: float = DEFAULT_RTOL
) -> ParityReport:
    """Compares ``candidate`` (a :func:`replay`) with the reference outputs in ``trajectory``:
    a float output fails where ``|candidate - reference| > atol + rtol * |reference|``.

    Raises:
      ValueError: the candidate lacks an output of the reference, or a shape differs.
    """
    diffs, mismatches, failures = {}, {}, []
    keys = sorted(k for k in trajectory if k.startswith(("greedy/", "sample/")))
    for key in keys:
        if key not in candidate:
            raise ValueError(f"candidate: no output {key!r} (has {sorted(candidate)})")
        ref, got = trajectory[key], candidate[key]
        if ref.shape != got.shape:
            raise ValueError(f"candidate: {key} has shape {got.shape}, expected {ref.shape}")
        diff = np.abs(ref.astype(np.float64) - got.astype(np.float64))
        diffs[key] = float(diff.max()) if diff.size else 0.0
        close = diff <= atol + rtol * np.abs(ref.astype(np.float64))  # NaN is not close
        if key.endswith("/action"):
            if np.issubdtype(ref.dtype, np.integer):
                bad = np.any((ref != got).reshape(len(ref), -1), axis=1)
            else:
                bad = np.any(~close.reshape(len(ref), -1), axis=1)
            mismatches[key.split("/")[0]] = int(bad.sum())
            if bad.any():
                failures.append(f"{key}: differs at {int(bad.sum())} of {len(ref)} steps")
        elif not close.all():
            failures.append(
                f"{key}: max abs diff {diffs[key]:.3g} > {atol:g} + {rtol:g} * |reference|"
            )
    return ParityReport(
        passed=not failures,
        steps=int(len(trajectory["first"])),
        episodes=int(trajectory.get("episodes", 0)),
        max_abs_diff=diffs,
        action_mismatches=mismatches,
        failures=failures,
    )


def check_parity(
    reference,
    candidate,
    env,
    *,
    steps: int = 300,
    seed: int = 0,
    atol: float = DEFAULT_ATOL,
    rtol: float = DEFAULT_RTOL,
    max_episode_steps: int | None = None,
    teacher_forcing: bool = False,
) -> ParityReport:
    """Records ``reference`` acting in ``env``, replays it through ``candidate``, compares.

    Args:
      reference: a SavedModel path or a :class:`SavedModelRunner` (the ground truth).
      candidate: an artefact path (``.tflite``, ``.onnx``, SavedModel directory) or a runner.
      env: one gymnasium environment with the policy's spaces.
      steps: the window; episodes are cut at ``max_episode_steps`` (default ``steps // 3``)
        so that it holds resets.
      seed: seeds the environment and the noise.
      atol, rtol: the tolerance of the float outputs and of continuous actions,
        ``atol + rtol * |reference|``.
      teacher_forcing: replay from the reference's states (:func:`replay`).
    """
    if not isinstance(reference, SavedModelRunner):
        reference = SavedModelRunner(reference)
    if isinstance(candidate, str | os.PathLike):
        candidate = open_runner(candidate)
    trajectory = record(reference, env, steps, seed, max_episode_steps)
    report = compare(trajectory, replay(candidate, trajectory, teacher_forcing), atol, rtol)
    return dataclasses.replace(report, teacher_forcing=teacher_forcing)
