"""cnn_compute_dtype="auto": bfloat16 only where the hardware computes it natively."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tfagents_vtrace.export.actor_critic import exported_network
from tfagents_vtrace.networks import NetInputs, NetworkConfig, make_network, precision
from tfagents_vtrace.networks.precision import (
    bf16_native,
    compute_dtype_choice,
    cpu_flags,
    resolve_compute_dtype,
)
from tfagents_vtrace.runtime.driver import print_compute_dtype

# An AMD EPYC with AVX2 only (issue #35), and the additions of the BF16 machines.
AVX2 = frozenset("fpu sse sse2 ssse3 sse4_1 sse4_2 avx fma avx2 bmi2".split())
AVX512_BF16 = AVX2 | {"avx512f", "avx512bw", "avx512_bf16"}
AMX = AVX512_BF16 | {"amx_tile", "amx_int8", "amx_bf16"}
NO_GPU = list


def flags_of(flags):
    return lambda: flags


@pytest.mark.parametrize(
    "flags,dtype,reason",
    [
        (AVX2, "float32", "auto: CPU has neither avx512_bf16 nor amx_bf16"),
        (AVX2 | {"avx512f"}, "float32", "auto: CPU has neither avx512_bf16 nor amx_bf16"),
        (AVX512_BF16, "bfloat16", "auto: CPU has avx512_bf16"),
        (AVX2 | {"amx_bf16"}, "bfloat16", "auto: CPU has amx_bf16"),
        (AMX, "bfloat16", "auto: CPU has amx_bf16"),
        (None, "float32", "auto: CPU flags unknown (no readable /proc/cpuinfo)"),
    ],
)
def test_auto_resolves_from_the_cpu_flags(flags, dtype, reason):
    assert resolve_compute_dtype("auto", flags_of(flags), NO_GPU) == dtype
    assert compute_dtype_choice("auto", flags_of(flags), NO_GPU) == (dtype, reason)


def test_auto_on_a_gpu_needs_compute_capability_8():
    """Ampere (8.0) and later compute bfloat16 natively; a Turing GPU (7.5) does not, and
    the CPU decides then."""
    assert bf16_native(flags_of(AVX2), lambda: [(8, 0)]) == (
        True,
        "GPU of compute capability 8.0",
    )
    assert resolve_compute_dtype("auto", flags_of(AVX2), lambda: [(7, 5), (9, 0)]) == "bfloat16"
    native, why = bf16_native(flags_of(AVX2), lambda: [(7, 5)])
    assert not native and why.startswith("GPU of compute capability 7.5 (< 8.0), CPU has")
    assert resolve_compute_dtype("auto", flags_of(AMX), lambda: [(7, 5)]) == "bfloat16"


@pytest.mark.parametrize("flags", [AVX2, AMX, None])
@pytest.mark.parametrize("value", ["float32", "bfloat16"])
def test_explicit_values_pass_through(value, flags):
    assert compute_dtype_choice(value, flags_of(flags), NO_GPU) == (value, "set explicitly")


@pytest.mark.parametrize("value", ["float16", "bf16", "", None, "AUTO"])
def test_a_bad_value_names_cnn_compute_dtype(value):
    with pytest.raises(ValueError, match="cnn_compute_dtype"):
        resolve_compute_dtype(value, flags_of(AMX), NO_GPU)
    with pytest.raises(ValueError, match="cnn_compute_dtype"):
        NetworkConfig(torso="small_atari_cnn", cnn_compute_dtype=value)


def test_cpu_flags_reads_the_flags_line(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: X\nflags\t\t: fpu avx2 amx_bf16\n\n")
    assert cpu_flags(str(info)) == {"fpu", "avx2", "amx_bf16"}
    assert cpu_flags(str(tmp_path / "missing")) is None  # macOS, Windows
    (tmp_path / "empty").write_text("")
    assert cpu_flags(str(tmp_path / "empty")) is None


def test_auto_is_the_default_and_an_mlp_accepts_auto_and_float32():
    """A config.json written before "auto" holds "float32" for MLP networks too."""
    assert NetworkConfig().cnn_compute_dtype == "auto"
    assert NetworkConfig(torso="mlp", cnn_compute_dtype="float32").cnn_compute_dtype == "float32"
    with pytest.raises(ValueError, match="cnn_compute_dtype.*torso='mlp'"):
        NetworkConfig(torso="mlp", cnn_compute_dtype="bfloat16")


def _logits(net, obs):
    n = len(obs)
    inputs = NetInputs(obs, np.ones(n, bool), np.zeros(n, np.int32), np.zeros(n, np.float32))
    return net(inputs).policy["logits"].numpy()


@pytest.mark.parametrize("flags,dtype", [(AVX2, "float32"), (AMX, "bfloat16"), (None, "float32")])
def test_auto_is_resolved_where_the_network_is_built(monkeypatch, capsys, flags, dtype):
    """The network keeps "auto" in its config (config.json: a moved run resolves again),
    computes in what the machine resolves it to, and the run's start line says which; the
    export of an "auto" network computes in float32 whatever the machine (same weights)."""
    monkeypatch.setattr(precision, "gpu_compute_capabilities", NO_GPU)
    monkeypatch.setattr(precision, "cpu_flags", flags_of(flags))
    tf.keras.utils.set_random_seed(0)
    cfg = NetworkConfig(torso="small_atari_cnn", policy_init_scale=1.0)
    net = make_network(cfg, gym.spaces.Box(0, 255, (84, 84, 4), np.uint8), gym.spaces.Discrete(4))
    assert net.config.cnn_compute_dtype == "auto"
    assert net.cnn_compute_dtype == dtype
    assert net.torso.dense.compute_dtype == dtype
    print_compute_dtype(cfg)
    why = compute_dtype_choice("auto")[1]
    assert capsys.readouterr().err == f"cnn compute dtype: {dtype} ({why})\n"
    print_compute_dtype(NetworkConfig())  # no line without a conv torso
    assert capsys.readouterr().err == ""
    exported = exported_network(net)
    assert exported.cnn_compute_dtype == "float32"
    assert exported.torso.dense.compute_dtype == "float32"
    assert (exported is net) == (dtype == "float32")
    assert exported_network(net) is exported  # one copy per network
    f32 = make_network(
        NetworkConfig(torso="small_atari_cnn", policy_init_scale=1.0, cnn_compute_dtype="float32"),
        net.observation_space,
        net.action_space,
    )
    f32.set_weights(net.get_weights())
    obs = np.random.default_rng(0).integers(0, 256, (3, 84, 84, 4)).astype(np.uint8)
    np.testing.assert_array_equal(_logits(exported, obs), _logits(f32, obs))


def test_an_explicit_bfloat16_is_exported_as_it_is():
    tf.keras.utils.set_random_seed(0)
    cfg = NetworkConfig(torso="small_atari_cnn", cnn_compute_dtype="bfloat16")
    net = make_network(cfg, gym.spaces.Box(0, 255, (84, 84, 4), np.uint8), gym.spaces.Discrete(4))
    assert exported_network(net) is net


def test_this_machine_resolves_auto_to_bfloat16():
    """The development machine has AMX and AVX-512 BF16 (grep /proc/cpuinfo); skipped on
    machines without them."""
    flags = cpu_flags()
    if not flags or not {"avx512_bf16", "amx_bf16"} & flags:
        pytest.skip("this CPU has neither avx512_bf16 nor amx_bf16")
    assert resolve_compute_dtype("auto") == "bfloat16"
    assert compute_dtype_choice("auto")[1] in (
        "auto: CPU has amx_bf16",
        "auto: CPU has avx512_bf16",
    )


@pytest.mark.parametrize(
    "flags, value, jit, environ, expected",
    [
        # the defaults: nothing to say, on any CPU
        (AVX2, "auto", False, {}, []),
        (AMX, "auto", False, {"TF_ENABLE_ONEDNN_OPTS": "1"}, []),
        (AVX2, "float32", False, {}, []),
        # XLA (20x measured), whatever the ISA
        (AVX2, "auto", True, {}, ["jit_compile"]),
        (AMX, "auto", True, {}, ["jit_compile"]),
        # oneDNN off (2.2x), in the spellings TensorFlow reads as false
        (AVX2, "auto", False, {"TF_ENABLE_ONEDNN_OPTS": "0"}, ["TF_ENABLE_ONEDNN_OPTS=0"]),
        (AMX, "auto", False, {"TF_ENABLE_ONEDNN_OPTS": "False"}, ["TF_ENABLE_ONEDNN_OPTS=0"]),
        # bfloat16 forced: slow without the instructions only
        (AVX2, "bfloat16", False, {}, ["cnn_compute_dtype=bfloat16"]),
        (AVX2 | {"avx512f"}, "bfloat16", False, {}, ["cnn_compute_dtype=bfloat16"]),
        (None, "bfloat16", False, {}, ["cnn_compute_dtype=bfloat16"]),
        (AVX512_BF16, "bfloat16", False, {}, []),
        (AMX, "bfloat16", False, {}, []),
        # all three at once, in this order
        (AVX2, "bfloat16", True, {"TF_ENABLE_ONEDNN_OPTS": "0"},
         ["jit_compile", "TF_ENABLE_ONEDNN_OPTS=0", "cnn_compute_dtype=bfloat16"]),
    ],
)  # fmt: skip
def test_the_slow_learner_settings_on_a_cpu_are_named(flags, value, jit, environ, expected):
    lines = precision.cpu_learner_warnings(value, jit, flags_of(flags), NO_GPU, environ)
    assert [line.split(": ")[1].split()[0] for line in lines] == expected
    assert all(line.startswith("warning: ") and "docs/results/pong.md" in line for line in lines)


def test_no_cpu_warning_where_a_gpu_learns():
    gpus = lambda: [(7, 0)]  # noqa: E731 - even one without bfloat16: not measured
    environ = {"TF_ENABLE_ONEDNN_OPTS": "0"}
    assert precision.cpu_learner_warnings("bfloat16", True, flags_of(AVX2), gpus, environ) == []


def test_the_start_lines_name_the_slow_settings(monkeypatch, capsys):
    from tfagents_vtrace.agents.impala.config import ImpalaConfig

    monkeypatch.setattr(precision, "gpu_compute_capabilities", NO_GPU)
    monkeypatch.setattr(precision, "cpu_flags", flags_of(AVX2))
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")
    cfg = NetworkConfig(torso="small_atari_cnn", cnn_compute_dtype="bfloat16")
    print_compute_dtype(cfg, ImpalaConfig(jit_compile=True))
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "cnn compute dtype: bfloat16 (set explicitly)"
    assert [line.split(":")[1].strip().split()[0] for line in err[1:]] == [
        "jit_compile", "TF_ENABLE_ONEDNN_OPTS=0", "cnn_compute_dtype=bfloat16"
    ]  # fmt: skip
    assert "20x slower" in err[1] and "2.2x slower" in err[2] and "7.3x (AVX2)" in err[3]
    print_compute_dtype(NetworkConfig(), ImpalaConfig(jit_compile=True))  # no conv torso
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS")
    print_compute_dtype(NetworkConfig(torso="small_atari_cnn"), ImpalaConfig())  # defaults
    assert (
        capsys.readouterr().err
        == "cnn compute dtype: float32 (auto: CPU has neither avx512_bf16 nor amx_bf16)\n"
    )
