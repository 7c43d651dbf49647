"""benchmarks/learner_cost.py: a variant's tokens become the subprocess's settings, ISA caps
and thread counts; oneDNN's verbose lines are read; a bad flag is one line and exit code 2."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench_modules import load_benchmark

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "learner_cost.py"
bench = load_benchmark("learner_cost", "learner_cost_bench")


def test_a_variants_tokens_are_flags_environment_isa_and_threads():
    v = bench.parse_variant(
        "x", "isa=avx2 --cnn_compute_dtype=float32 --jit_compile TF_ENABLE_ONEDNN_OPTS=0 "
        "intra=1 inter=2 XLA_FLAGS=--xla_cpu_use_onednn=true"
    )  # fmt: skip
    assert v == {
        "name": "x",
        "flags": ["--cnn_compute_dtype=float32", "--jit_compile"],
        "env": {"TF_ENABLE_ONEDNN_OPTS": "0", "XLA_FLAGS": "--xla_cpu_use_onednn=true"},
        "intra": 1,
        "inter": 2,
        "isa": "avx2",
    }
    env = bench.variant_environment(v, base={"XLA_FLAGS": "--xla_dump_to=/tmp/d"})
    # the cap of both oneDNN and XLA's code, the variant's XLA flags appended, not replacing
    assert env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert env["XLA_FLAGS"].split() == [
        "--xla_dump_to=/tmp/d", "--xla_cpu_max_isa=AVX2", "--xla_cpu_use_onednn=true"
    ]  # fmt: skip
    assert env["TF_ENABLE_ONEDNN_OPTS"] == "0"
    native = bench.variant_environment(bench.parse_variant("n", "--cnn_compute_dtype=bfloat16"), {})
    assert "ONEDNN_MAX_CPU_ISA" not in native and "XLA_FLAGS" not in native


def test_a_tree_token_puts_that_checkout_first_on_the_subprocess_path(tmp_path):
    (tmp_path / "tfagents_vtrace").mkdir()
    (tmp_path / "tfagents_vtrace" / "__init__.py").write_text("")
    v = bench.parse_variant("old", f"tree={tmp_path} --cnn_compute_dtype=float32")
    assert v["tree"] == str(tmp_path) and v["flags"] == ["--cnn_compute_dtype=float32"]
    env = bench.variant_environment(v, base={"PYTHONPATH": "/elsewhere"})
    assert env["PYTHONPATH"].split(":") == [str(tmp_path), "/elsewhere"]
    here = bench.variant_environment(bench.parse_variant("new", ""), base={})
    assert here["PYTHONPATH"] == str(ROOT) and "tree" not in bench.parse_variant("new", "")
    with pytest.raises(ValueError, match="tree: expected a checkout holding tfagents_vtrace"):
        bench.parse_variant("v", f"tree={tmp_path / 'missing'}")


@pytest.mark.parametrize(
    "text, message",
    [("isa=avx3", "isa: expected one of"), ("intra=two", "intra: expected an int"),
     ("lowercase=1", "cannot read token 'lowercase=1'"), ("plain", "cannot read token")],
)  # fmt: skip
def test_a_token_it_cannot_read_is_named(text, message):
    with pytest.raises(ValueError, match=message):
        bench.parse_variant("v", text)


def test_onednn_verbose_lines_give_the_isa_and_the_time_per_primitive():
    out = "\n".join([
        "onednn_verbose,v1,info,oneDNN v3.7.3 (commit N/A)",
        "onednn_verbose,v1,info,cpu,isa:Intel AVX2",
        "onednn_verbose,v1,primitive,exec,cpu,convolution,jit:avx2,backward_weights,src:f32,"
        "alg:convolution_direct,mb256_ic4oc16,1.5",
        "onednn_verbose,v1,primitive,exec,cpu,convolution,jit:avx2,backward_weights,src:f32,"
        "alg:convolution_direct,mb256_ic4oc16,0.5",
        "onednn_verbose,v1,primitive,exec,cpu,inner_product,brgemm:avx2,forward_training,"
        "src:f32,,mb256ic2592oc256,1.0",
        "something else,1.0",
    ])  # fmt: skip
    assert bench.onednn_isa(out) == "Intel AVX2"
    assert bench.onednn_isa("no onednn here") == ""
    profile = bench.onednn_exec_profile(out, steps=4)
    assert profile == {
        "convolution jit:avx2 backward_weights": 0.5,
        "inner_product brgemm:avx2 forward_training": 0.25,
    }
    assert list(profile) == ["convolution jit:avx2 backward_weights",
                             "inner_product brgemm:avx2 forward_training"]  # fmt: skip


def test_a_profile_counts_each_events_self_time_under_its_op_type():
    totals, ps = {}, 10**12
    stack = [
        {"end": 10 * ps, "dur": 10 * ps, "name": "__inference_update:Run", "child": 0},
        {"end": 9 * ps, "dur": 6 * ps, "name": "ThunkExecutor::Execute", "child": 0},
        {"end": 8 * ps, "dur": 4 * ps, "name": "Conv2DBackpropFilter.12", "child": 0},
    ]
    while stack:
        bench._pop(stack, totals)
    assert totals == {"Conv2DBackpropFilter.12": 4 * ps, "ThunkExecutor::Execute": 2 * ps,
                      "Run": 4 * ps}  # fmt: skip
    stack = [{"end": 3 * ps, "dur": 3 * ps, "name": "model/conv/Conv2D:_MklNativeFusedConv2D",
              "child": 0}]  # fmt: skip
    bench._pop(stack, totals)
    assert totals["_MklNativeFusedConv2D"] == 3 * ps
    assert {"Run", "ThunkExecutor::Execute"} <= set(bench.WAITS)


def test_the_updates_flops_count_no_input_gradient_for_the_first_layer():
    # Pong's small CNN: conv 16x8x8/4 on 84x84x4 (20x20 out), conv 32x4x4/2 (9x9 out),
    # dense 2592 -> 256; 4 epochs: 1 + 4 forward passes, 4 backward passes of 2 forwards'
    # work less the first convolution's input gradient.
    macs = {"conv": 20 * 20 * 16 * 8 * 8 * 4, "conv_1": 9 * 9 * 32 * 4 * 4 * 16,
            "dense": 2592 * 256}  # fmt: skip
    forward = 1_638_400 + 663_552 + 663_552
    assert bench.update_flops(macs, 4) == 2 * (5 * forward + 4 * (2 * forward - 1_638_400))
    assert bench.update_flops(macs, 4) == 63_995_904


@pytest.mark.parametrize(
    "flag, message",
    [("--variants=nope", "error: --variants: unknown 'nope'"),
     ("--reference=nope", "error: --reference: 'nope' is not among the variants"),
     ("--variant=novariant", "error: --variant: expected 'NAME: TOKEN ...'"),
     ("--variant=v: isa=avx9", "error: variant 'v': isa: expected one of"),
     ("--rounds=0", "error: --rounds: expected >= 1, received 0")],
)  # fmt: skip
def test_a_bad_flag_is_one_line_and_exit_code_2(flag, message):
    out = subprocess.run([sys.executable, str(SCRIPT), flag], capture_output=True, text=True)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == [out.stderr.strip()] and out.stderr.startswith(message)
