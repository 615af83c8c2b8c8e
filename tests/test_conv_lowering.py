"""conv2d's three lowerings (compiler/lowering/nn_to_linalg.py) against a float64 NumPy conv.

Every case runs with each lowering forced through the op's `aicc.conv_lowering` attribute, so
direct, im2col and matmul (1x1 stride 1; im2col elsewhere) are checked on the same odd shapes:
batch 1 and 3, 1/3/7 input channels, 1/5/33 output channels, 1x1 to 13x9 images, 1x1, 3x3 and
5x3 kernels, strides, dilation, groups, depthwise, padding through aicc.pad, and a
per-channel bias that starts the accumulator. Tolerance: sums over K = IC/G*KH*KW products,
rtol=1e-4, atol=1e-5*sqrt(K).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from xdsl.dialects.builtin import StringAttr

from compiler.dialects import aicc, aicc_nn
from compiler.errors import CompileError
from compiler.lowering.nn_to_linalg import CONV_LOWERING_ATTR
from compiler.lowering.conv_lowering import PACKED_1X1_RULES, choose_conv_lowering
from compiler.pipeline import CompileOptions, compile_module
from test_nn_ops import build, rand


def np_conv2d(x, w, strides, dilations, groups):
    """The definition, one kernel tap at a time, in float64."""
    n, c, h, wd = x.shape
    oc, icg, kh, kw = w.shape
    (sh, sw), (dh, dw) = strides, dilations
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (wd - dw * (kw - 1) - 1) // sw + 1
    ocg = oc // groups
    out = np.zeros((n, oc, oh, ow))
    for g in range(groups):
        xs = x[:, g * icg:(g + 1) * icg].astype(np.float64)
        ws = w[g * ocg:(g + 1) * ocg].astype(np.float64)
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
                out[:, g * ocg:(g + 1) * ocg] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    return out


CASES = [
    # x shape, w shape, strides, dilations, groups, pads (top, left, bottom, right), bias
    ((1, 1, 1, 1), (1, 1, 1, 1), (1, 1), (1, 1), 1, (0, 0, 0, 0), False),
    ((3, 3, 1, 1), (5, 3, 1, 1), (1, 1), (1, 1), 1, (0, 0, 0, 0), True),  # 1x1 image
    ((3, 3, 7, 7), (5, 3, 3, 3), (1, 1), (1, 1), 1, (0, 0, 0, 0), False),
    ((1, 7, 13, 9), (33, 7, 5, 3), (2, 2), (1, 1), 1, (0, 0, 0, 0), True),
    ((3, 7, 13, 9), (5, 7, 1, 1), (1, 1), (1, 1), 1, (0, 0, 0, 0), True),  # 1x1: the input is the matrix
    ((1, 3, 13, 9), (33, 3, 1, 1), (2, 2), (1, 1), 1, (0, 0, 0, 0), False),  # 1x1 strided
    ((1, 3, 7, 7), (5, 3, 3, 3), (1, 1), (2, 2), 1, (0, 0, 0, 0), False),  # dilation 2
    ((3, 7, 7, 7), (33, 7, 3, 3), (1, 1), (1, 1), 1, (1, 1, 1, 1), True),  # padded, bias
    ((1, 1, 13, 9), (33, 1, 5, 3), (1, 2), (1, 1), 1, (2, 1, 2, 1), True),  # one input channel
    ((3, 4, 13, 9), (6, 2, 3, 3), (1, 1), (1, 1), 2, (1, 1, 1, 1), True),  # groups 2
    ((1, 14, 13, 9), (10, 7, 3, 3), (2, 1), (2, 1), 2, (0, 1, 2, 0), False),  # groups, stride, dilation
    ((1, 7, 7, 7), (7, 1, 3, 3), (2, 2), (1, 1), 7, (1, 1, 1, 1), True),  # depthwise
    ((3, 3, 13, 9), (6, 1, 5, 3), (1, 1), (1, 1), 3, (2, 1, 2, 1), False),  # depthwise, multiplier 2
]
MODES = ["direct", "im2col", "matmul"]


def conv_module(x, w, b, strides, dilations, groups, pads, bias, mode):
    def body(bld, xv, wv, bv):
        if any(pads):
            xv = bld.insert(aicc_nn.PadOp(xv, (0, 0, *pads[:2]), (0, 0, *pads[2:]))).result
        conv = bld.insert(aicc_nn.Conv2dOp(xv, wv, strides, dilations, groups))
        if mode:
            conv.attributes[CONV_LOWERING_ATTR] = StringAttr(mode)
        out = conv.result
        return bld.insert(aicc.AddOp(out, bv)).result if bias else out

    return build([x, w, b], body)


def want_of(x, w, b, strides, dilations, groups, pads, bias):
    t, l_, bo, r = pads
    xp = np.pad(x, ((0, 0), (0, 0), (t, bo), (l_, r)))
    return (np_conv2d(xp, w, strides, dilations, groups) + (b if bias else 0)).astype(np.float32)


def inputs(xs, ws):
    return rand(*xs), rand(*ws, seed=1), rand(1, ws[0], 1, 1, seed=2)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("xs,ws,strides,dils,groups,pads,bias", CASES, ids=str)
def test_conv2d_lowerings(mode, xs, ws, strides, dils, groups, pads, bias):
    x, w, b = inputs(xs, ws)
    m = compile_module(conv_module(x, w, b, strides, dils, groups, pads, bias, mode), "main")
    got = m(x, w, b)
    k = ws[1] * ws[2] * ws[3]
    np.testing.assert_allclose(got, want_of(x, w, b, strides, dils, groups, pads, bias),
                               rtol=1e-4, atol=1e-5 * math.sqrt(k))
    linalg = m.ir("linalg")
    # direct: one 8-loop generic; the others: a batched matmul with a schedule
    assert ("aicc.schedule" in linalg) == (mode != "direct")
    if mode != "direct":
        im2col = mode == "im2col" or ws[2:] != (1, 1) or strides != (1, 1)
        n_generics = 1 + im2col + bias + bool(any(pads))
        assert linalg.count("linalg.generic") == n_generics, linalg
    # the bias add is the accumulator's start, not a pass of its own: one addf, the conv's
    assert linalg.count("arith.addf") == 1, linalg


def test_heuristic_choices():
    # resnet50's convs: the 7x7 stem, 3x3 and strided 1x1 by im2col, 1x1 stride-1 as a matmul
    assert choose_conv_lowering(1, 3, 64, 1, (112, 112), (7, 7), (2, 2)) == "im2col"
    assert choose_conv_lowering(1, 64, 64, 1, (56, 56), (3, 3)) == "im2col"
    assert choose_conv_lowering(1, 256, 512, 1, (28, 28), (1, 1), (2, 2)) == "im2col"
    assert choose_conv_lowering(1, 256, 64, 1, (56, 56), (1, 1)) == "matmul"
    # the copy does not pay for few output channels (per group); no copy, no such limit
    assert choose_conv_lowering(1, 64, 8, 1, (56, 56), (3, 3)) == "direct"
    assert choose_conv_lowering(1, 64, 16, 1, (56, 56), (3, 3)) == "im2col"
    assert choose_conv_lowering(1, 128, 128, 4, (28, 28), (3, 3)) == "im2col"
    assert choose_conv_lowering(1, 64, 4, 1, (56, 56), (1, 1)) == "matmul"
    assert choose_conv_lowering(1, 2, 64, 1, (112, 112), (1, 1)) == "matmul"
    # few channels per group, on short or strided output rows (where the direct loop
    # vectorizes poorly): the copy pays after all; depthwise-like groups stay direct
    assert choose_conv_lowering(1, 440, 440, 55, (7, 7), (3, 3)) == "im2col"
    assert choose_conv_lowering(1, 208, 208, 26, (14, 14), (3, 3)) == "im2col"
    assert choose_conv_lowering(1, 104, 104, 13, (28, 28), (3, 3)) == "direct"
    assert choose_conv_lowering(1, 104, 104, 13, (28, 28), (3, 3), (2, 2)) == "im2col"
    assert choose_conv_lowering(1, 64, 8, 1, (7, 9), (3, 3)) == "im2col"
    assert choose_conv_lowering(1, 128, 128, 32, (7, 7), (3, 3)) == "im2col"
    assert choose_conv_lowering(1, 48, 48, 16, (7, 7), (3, 3)) == "direct"
    # depthwise and tiny convs: direct
    assert choose_conv_lowering(1, 32, 32, 32, (7, 7), (3, 3), (2, 2)) == "direct"
    assert choose_conv_lowering(1, 32, 32, 32, (56, 56), (3, 3)) == "direct"
    assert choose_conv_lowering(1, 32, 64, 32, (56, 56), (1, 1)) == "direct"
    assert choose_conv_lowering(1, 3, 5, 1, (1, 1), (3, 3)) == "direct"


def test_one_dimensional_convs_over_128_input_channels_take_im2col():
    """A 1-D conv (one output row, kernel height 1) keeps the packed kernel up to
    PACKED_1D_MAX_IC input channels and takes im2col past it; a 2-D conv of as many channels,
    or a kernel taller than its one output row, keeps the packed kernel. End to end: the
    heuristic's choice on a 160-channel 1-D conv (no attribute) matches NumPy."""
    from compiler.lowering.conv_lowering import PACKED_1D_MAX_IC

    assert PACKED_1D_MAX_IC == 128
    for ic, hw, k, s, want in [(384, (1, 1500), (1, 3), (1, 2), "im2col"),  # whisper's second
                               (129, (1, 3000), (1, 3), (1, 1), "im2col"),
                               (128, (1, 3000), (1, 3), (1, 1), "packed"),
                               (80, (1, 3000), (1, 3), (1, 1), "packed"),  # whisper's first
                               (384, (3, 1500), (3, 3), (1, 1), "packed"),
                               (384, (1, 1500), (3, 3), (1, 1), "packed")]:
        assert choose_conv_lowering(1, ic, 384, 1, hw, k, s, packed=True) == want, (ic, hw, k)
    xs, ws = (1, 160, 1, 37), (24, 160, 1, 3)
    x, w, b = inputs(xs, ws)
    m = compile_module(conv_module(x, w, b, (1, 2), (1, 1), 1, (0, 1, 0, 1), True, None), "main")
    assert 'aicc.conv_lowering = "im2col"' in m.ir("linalg")
    np.testing.assert_allclose(m(x, w, b), want_of(x, w, b, (1, 2), (1, 1), 1, (0, 1, 0, 1), True),
                               rtol=1e-4, atol=1e-5 * math.sqrt(480))


def test_packed_1x1_rules():
    """The rules a machine keeps for unstrided 1x1 convs (choose_conv_lowering's packed_1x1):
    "all" packs small images, narrowing ones up to 256 pixels and narrowing ones to at most
    128 channels on any image; "small" the first alone; "none" none. Strided ones keep all."""
    cases = [  # (ic, oc, out_hw, strides), packed under all / small / none
        ((16, 32, (7, 7), (1, 1)), (True, True, False)),
        ((256, 64, (14, 14), (1, 1)), (True, False, False)),
        ((256, 64, (56, 56), (1, 1)), (True, False, False)),
        ((64, 256, (56, 56), (1, 1)), (False, False, False)),
        ((256, 512, (7, 7), (2, 2)), (True, True, True)),
    ]
    for (ic, oc, hw, s), want in cases:
        got = tuple(choose_conv_lowering(1, ic, oc, 1, hw, (1, 1), s, packed=True, packed_1x1=rule)
                    == "packed" for rule in PACKED_1X1_RULES)
        assert got == want, (ic, oc, hw, s, got)


@pytest.mark.parametrize("cpu,vendor,rule", [
    ("znver3", "amd", "all"), ("znver4", "amd", "all"), ("haswell", "intel", "none"),
    ("skylake-avx512", "intel", "none"), ("sapphirerapids", "intel", "none"),
    ("x86-64-v3", "", "all")])
def test_packed_1x1_rule_of_named_cpus(cpu, vendor, rule):
    """The cpu target's rule by the code's machine (a named CPU: nothing read off the host)."""
    from compiler.targets.cpu.machine import cpu_machine
    from compiler.targets.cpu.schedule import packed_1x1_rule

    m = cpu_machine(cpu)
    assert m.vendor == vendor and packed_1x1_rule(m) == rule


@pytest.mark.parametrize("cpu,pf", [("skylake-avx512", 16), ("sapphirerapids", 16),
                                    ("haswell", 0), ("znver4", 0), ("znver3", 0),
                                    ("x86-64-v4", 0)])
def test_conv_prefetch_rule_of_named_cpus(cpu, pf):
    """The packed conv kernels prefetch their weights on Intel cores with AVX-512 alone."""
    from compiler.targets.cpu.machine import cpu_machine
    from compiler.targets.cpu.schedule import CONV_PREFETCH, choose_conv_schedule, conv_prefetch_rule

    rule = conv_prefetch_rule(cpu_machine(cpu))
    assert rule == pf and pf in (0, CONV_PREFETCH)
    assert choose_conv_schedule(512, 28, 64, pf=rule).get("pf", 0) == pf
    assert "pf" not in choose_conv_schedule(512, 28, 64, fixed={"pf": 0}, pf=16)
    assert "pf" not in choose_conv_schedule(512, 28, 8, pf=16)  # vw = 8: a grouped conv's 8


@pytest.mark.parametrize("cpu,l2pf", [("sapphirerapids", True), ("x86-64-v4", True),
                                      ("znver4", True), ("znver3", True), ("haswell", False),
                                      ("x86-64-v3", False)])
def test_conv_l2_prefetch_rule_of_named_cpus(cpu, l2pf):
    """The packed conv kernels fetch the next block of weights into L2 with 512-bit vectors
    and on AMD's cores; not with AVX2 code for an Intel core or a generic name; the
    schedule records the rule's answer, and a fixed l2pf wins."""
    from compiler.targets.cpu.machine import cpu_machine
    from compiler.targets.cpu.schedule import choose_conv_schedule, conv_l2_prefetch_rule

    m = cpu_machine(cpu)
    assert conv_l2_prefetch_rule(m) == l2pf
    s = choose_conv_schedule(m.vector_bits, 28, 64, l2pf=conv_l2_prefetch_rule(m))
    assert s.get("l2pf", 0) == int(l2pf)
    assert "l2pf" not in choose_conv_schedule(m.vector_bits, 28, 64, fixed={"l2pf": 0}, l2pf=True)


@pytest.mark.parametrize("cpu, flops", [("sapphirerapids", 1000), ("haswell", 1000),
                                        ("znver4", 1000), ("x86-64-v3", 1000)])
def test_nhwc_kxk_rule_of_named_cpus(cpu, flops):
    """KxK convs read an NHWC copy of their input from 1000 FLOPs per input element on every
    core (measured on Intel's and on a Zen 5, both vector widths), generic names included."""
    from compiler.targets.cpu.machine import cpu_machine
    from compiler.targets.cpu.schedule import choose_conv_schedule, nhwc_kxk_rule

    rule = nhwc_kxk_rule(cpu_machine(cpu))
    assert rule == flops
    # resnet50's 3x3/2 convs: 537 FLOPs per input element at 56x56, 1003 at 28x28
    for per_input, wants in ((537, False), (1003, bool(flops))):
        s = choose_conv_schedule(512, 14, 256, k=2304, input_flops=per_input, nhwc_min_flops=rule)
        assert bool(s.get("nhwc")) == wants, (cpu, per_input)
    assert "nhwc" not in choose_conv_schedule(512, 14, 256, fixed={"nhwc": 0}, input_flops=5000,
                                              nhwc_min_flops=1000)


def test_lowering_by_env_and_pass_option(monkeypatch):
    """AICC_CONV_LOWERING and tensor-to-linalg{conv-lowering} force every conv without the
    attribute; the attribute wins over both."""
    from compiler.lowering.tensor_to_linalg import TensorToLinalg
    from compiler.pipeline import make_context

    x, w, b = inputs((1, 3, 7, 7), (5, 3, 3, 3))

    def lowered(option="", attr=None):
        module = conv_module(x, w, b, (1, 1), (1, 1), 1, (0, 0, 0, 0), False, attr)
        TensorToLinalg(conv_lowering=option).apply(make_context(), module)
        return "matmul" if str(module).count("linalg.generic") == 2 else "direct"

    monkeypatch.setenv("AICC_CONV_LOWERING", "direct")
    assert lowered() == "direct"
    assert lowered(option="im2col") == "matmul"
    assert lowered(attr="im2col") == "matmul"
    monkeypatch.setenv("AICC_CONV_LOWERING", "im2col")
    assert lowered() == "matmul"
    assert lowered(option="direct", attr="direct") == "direct"
    monkeypatch.setenv("AICC_CONV_LOWERING", "bogus")
    with pytest.raises(CompileError, match="conv lowering 'bogus'"):
        lowered()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", [CASES[7], CASES[4], CASES[10]], ids=str)
def test_conv2d_lowerings_cuda_emulated(mode, case):
    """The CUDA target takes the same lowerings (the matmul mapped by map-to-gpu), checked with
    the emulation harness of test_cuda_emulation.py."""
    pytest.importorskip("cuda.bindings.nvrtc")
    import shutil

    if shutil.which("g++") is None:
        pytest.skip("the CUDA emulation harness needs g++")
    from compiler.targets.cuda_emu.emu import run_emulated

    from compiler.pipeline import CompileOptions

    xs, ws, strides, dils, groups, pads, bias = case
    x, w, b = inputs(xs, ws)
    module = conv_module(x, w, b, strides, dils, groups, pads, bias, mode)
    m = compile_module(module, "main", options=CompileOptions(target="cuda"))
    assert ('"matmul"' in m.ir("gpu")) == (mode != "direct")
    np.testing.assert_allclose(run_emulated(m, x, w, b), want_of(x, w, b, strides, dils, groups, pads, bias),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bias_shape,bias_first", [((5, 1, 1), True), ((1,), False), ((), True),
                                                   ((3, 5, 7, 7), False)], ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_bias_shapes(mode, bias_shape, bias_first):
    """Per-channel biases of every broadcast shape, on either side of the add, start the
    accumulator; a full tensor stays an add of its own."""
    x, w = rand(3, 3, 9, 9), rand(5, 3, 3, 3, seed=1)
    b = rand(*bias_shape, seed=2) if bias_shape else np.array(0.5, np.float32)

    def body(bld, xv, wv, bv):
        conv = bld.insert(aicc_nn.Conv2dOp(xv, wv))
        conv.attributes[CONV_LOWERING_ATTR] = StringAttr(mode)
        pair = (bv, conv.result) if bias_first else (conv.result, bv)
        return bld.insert(aicc.AddOp(*pair)).result

    m = compile_module(build([x, w, b], body), "main")
    want = np_conv2d(x, w, (1, 1), (1, 1), 1) + b
    np.testing.assert_allclose(m(x, w, b), want.astype(np.float32), rtol=1e-4, atol=1e-4)
    per_channel = len(bias_shape) < 4
    assert m.ir("linalg").count("arith.addf") == (1 if per_channel else 2)


def test_conv_used_twice_keeps_its_add():
    x, w, b = inputs((1, 3, 9, 9), (33, 3, 3, 3))

    def body(bld, xv, wv, bv):
        conv = bld.insert(aicc_nn.Conv2dOp(xv, wv)).result
        return [bld.insert(aicc.AddOp(conv, bv)).result, conv]

    m = compile_module(build([x, w, b], body), "main", output_is_tuple=True)
    y, c = m(x, w, b)
    want = np_conv2d(x, w, (1, 1), (1, 1), 1)
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(y, want + b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", MODES)
def test_float64(mode):
    x, w = rand(2, 7, 13, 9, dtype=np.float64), rand(33, 7, 3, 3, seed=1, dtype=np.float64)

    def body(bld, xv, wv):
        conv = bld.insert(aicc_nn.Conv2dOp(xv, wv, (2, 1)))
        conv.attributes[CONV_LOWERING_ATTR] = StringAttr(mode)
        return conv

    got = compile_module(build([x, w], body), "main")(x, w)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np_conv2d(x, w, (2, 1), (1, 1), 1), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ im2col per batch, in cache

PER_BATCH = [
    # x shape, w shape, strides, pads (top, left, bottom, right)
    ((2, 3, 7, 9), (5, 3, 3, 3), (1, 1), (1, 1, 1, 1)),
    ((5, 3, 7, 9), (33, 3, 3, 3), (1, 1), (0, 0, 0, 0)),
    ((3, 4, 1, 1), (6, 4, 5, 5), (1, 1), (2, 2, 2, 2)),   # every window mostly padding
    ((4, 3, 6, 5), (7, 3, 3, 2), (1, 1), (0, 2, 3, 1)),   # uneven pads, non-square kernel
    ((2, 3, 2, 2), (5, 3, 3, 3), (1, 1), (3, 3, 3, 3)),   # rows entirely in the padding
    ((4, 3, 9, 9), (5, 3, 3, 3), (2, 2), (1, 1, 1, 1)),   # strided: the padded copy stays
    ((2, 3, 32, 32), (5, 3, 3, 3), (1, 1), (1, 1, 1, 1)),  # N = 1024: B's rows padded to 1040
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("xs,ws,strides,pads", PER_BATCH, ids=str)
def test_im2col_written_per_batch(xs, ws, strides, pads, threads):
    """A conv's matmul that runs each image's tiles on one thread (parallel = "b", chosen
    for a batch that splits evenly over the threads) writes that image's im2col matrix
    into the thread's own buffer right before them; a zero pad before it is read through
    (the copy writes zeros where a window falls outside the image), except with a stride in
    W. The same convs with the batch split over tiles (parallel = "bmn") agree."""
    x, w, b = inputs(xs, ws)
    want = want_of(x, w, b, strides, (1, 1), 1, pads, True)
    k = ws[1] * ws[2] * ws[3]
    for schedule in (None, "parallel=bmn"):
        m = compile_module(conv_module(x, w, b, strides, (1, 1), 1, pads, True, "im2col"), "main",
                           options=CompileOptions(threads=threads, schedule=schedule))
        np.testing.assert_allclose(m(x, w, b), want, rtol=1e-4, atol=1e-5 * math.sqrt(k))
        per_batch = schedule is None and (xs[0] % threads == 0 or xs[0] >= 4 * threads)
        assert ('parallel = "b"' in m.ir("linalg")) == per_batch
        memref_ir = m.ir("memref")
        padded = any(pads) and not (per_batch and strides == (1, 1))
        assert ("linalg.fill" in memref_ir) == padded, memref_ir
        # left as generics (the bias broadcast is the kernels' starting value): the pad's
        # copy, the im2col copy of the whole batch
        generics = padded + (not per_batch)
        assert memref_ir.count("linalg.generic") == generics, memref_ir


def test_im2col_per_batch_after_an_elementwise_pad_source():
    """relu -> pad -> conv: the relu fused into the pad's copy is applied as the per-batch
    im2col reads the source; the padding stays 0 (not relu(0) by accident of order)."""
    x, w, b = inputs((4, 3, 6, 6), (5, 3, 3, 3))

    def body(bld, xv, wv, bv):
        r = bld.insert(aicc.ReluOp(xv)).result
        r = bld.insert(aicc_nn.PadOp(r, (0, 0, 1, 1), (0, 0, 1, 1))).result
        conv = bld.insert(aicc_nn.Conv2dOp(r, wv, (1, 1), (1, 1), 1))
        conv.attributes[CONV_LOWERING_ATTR] = StringAttr("im2col")
        return conv.result

    m = compile_module(build([x, w, b], body), "main", options=CompileOptions(threads=2))
    want = want_of(np.maximum(x, 0), w, b, (1, 1), (1, 1), 1, (1, 1, 1, 1), False)
    np.testing.assert_allclose(m(x, w, b), want, rtol=1e-4, atol=1e-5 * math.sqrt(27))
    assert "linalg.fill" not in m.ir("memref") and "arith.maximumf" in m.ir("loops")


WIDE = [
    # x shape, w shape, strides, pads: from CONV_PACK_B_ROWS output channels up, B is packed
    ((1, 5, 7, 9), (257, 5, 3, 3), (1, 1), (1, 1, 1, 1)),  # 7 x 9 image, a 1-row sliver left
    ((1, 7, 1, 129), (256, 7, 1, 1), (1, 1), (0, 0, 0, 0)),  # 1x1: B is the input, N = 129
    ((1, 3, 13, 9), (300, 3, 3, 3), (2, 2), (0, 1, 2, 0)),  # strided, uneven pads, N = 35
    ((3, 2, 7, 7), (256, 2, 3, 3), (1, 1), (1, 1, 1, 1)),  # a batch split per image: in place
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("xs,ws,strides,pads", WIDE, ids=str)
def test_wide_convs_pack_b(xs, ws, strides, pads, threads):
    """A conv with many output channels (M >= CONV_PACK_B_ROWS) packs B, its im2col matrix
    or its input, into panels (zero past N) rather than reading it in place, unless its
    batch runs an image per thread; the outputs match either way."""
    from compiler.targets.cpu.schedule import CONV_PACK_B_ROWS

    x, w, b = inputs(xs, ws)
    assert ws[0] >= CONV_PACK_B_ROWS
    mode = "matmul" if ws[2:] == (1, 1) and strides == (1, 1) else "im2col"
    m = compile_module(conv_module(x, w, b, strides, (1, 1), 1, pads, True, mode), "main",
                       options=CompileOptions(threads=threads))
    k = ws[1] * ws[2] * ws[3]
    np.testing.assert_allclose(m(x, w, b), want_of(x, w, b, strides, (1, 1), 1, pads, True),
                               rtol=1e-4, atol=1e-5 * math.sqrt(k))
    per_image = xs[0] >= 2 and (xs[0] % threads == 0 or xs[0] >= 4 * threads)
    assert ("pack_b = true" in m.ir("linalg")) == (not per_image)


@pytest.mark.parametrize("cin,cout,kernel,stride,hw", [
    (5, 257, (3, 3), 1, (7, 9)),  # packed B, a narrow last panel (N = 63)
    (3, 33, (5, 3), 2, (13, 9)),  # B in place
    (7, 64, (1, 1), 1, (1, 129)),  # 1x1: B is the input
])
def test_constant_weights_prepacked(monkeypatch, cin, cout, kernel, stride, hw):
    """A conv's constant weight, reshaped into its matmul's A, is packed into slivers at
    compile time, and the unpacked global goes. (The cpu target would take the packed kernel
    for the KxK convs here, which packs its weight in a layout of its own:
    test_conv_packed.py.)"""
    import torch

    import compiler

    monkeypatch.setenv("AICC_CONV_PACKED", "0")
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(cin, cout, kernel, stride, padding=(kernel[0] // 2, kernel[1] // 2))
    x = torch.randn(1, cin, *hw)
    m = compiler.compile(conv.eval(), (x,), threads=1)
    with torch.no_grad():
        want = conv(x).numpy()
    k = cin * kernel[0] * kernel[1]
    np.testing.assert_allclose(m(x.numpy()), want, rtol=1e-4, atol=1e-5 * math.sqrt(k))
    memref_ir = m.ir("memref")
    assert "_slivers" in memref_ir and f"memref<{cout}x{cin}x" not in memref_ir
