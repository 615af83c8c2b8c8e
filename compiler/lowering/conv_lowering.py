"""How a conv2d is lowered to linalg: "direct", "im2col", "matmul" or "packed" (see
nn_to_linalg.py). "packed" is the direct generic marked for a target's blocked kernel (the cpu
target's tile-conv: output channels in vectors, the input broadcast, no im2col copy); a
target without one runs it as the direct loop.
The choice is per op, made by tensor-to-linalg for every target from the conv's shape, and
recorded on the conv's matmul (`aicc.conv_lowering`) for the targets' schedules to read."""

from __future__ import annotations

CONV_LOWERINGS = ("direct", "im2col", "matmul", "packed")
# On a conv2d: the lowering asked for. On the matmul generic of a conv: the lowering it came
# from, so that choose-schedule picks the conv's schedule (see choose_matmul_schedule).
CONV_LOWERING_ATTR = "aicc.conv_lowering"
# The output width from which an unstrided conv with few output channels per group (4 to 15)
# stays direct (see choose_conv_lowering).
DIRECT_MIN_WIDTH = 28
# On a conv2d: the register tile of its packed kernel, {owb, ocv, vw} (any of them), copied to
# its generic; tile-conv picks the fields not given from the target's vector width.
CONV_SCHEDULE_ATTR = "aicc.conv_schedule"
# The output channels from which a target with the packed kernel (`packed=True`) takes it for
# a KxK (K > 1) conv of one group (see choose_conv_lowering).
PACKED_MIN_OC = 16
# The output channels per group from which a grouped KxK conv takes the packed kernel, a
# group at a time (one vector of 8 channels on AVX2).
PACKED_MIN_OCG = 8


def choose_conv_lowering(batch: int, in_channels: int, out_channels: int, groups: int,
                         out_hw: tuple[int, int], kernel: tuple[int, int],
                         strides: tuple[int, int] = (1, 1), packed: bool = False) -> str:
    """How a conv2d is lowered to linalg (compiler/lowering/nn_to_linalg.py):

      "matmul"  a 1x1 stride-1 conv: the input viewed as (N, IC, H*W) is the matmul's B
      "im2col"  an im2col copy of the input into (N, IC*KH*KW, OH*OW), then a batched
                matmul with the weight (OC, IC*KH*KW) broadcast over the batch (per group)
      "direct"  one generic with loops (n, g, oc, oh, ow | ic, kh, kw)
      "packed"  that generic, marked for the target's kernel (`packed`: the target has one):
                KxK convs of one group with PACKED_MIN_OC output channels or more,
                grouped ones with PACKED_MIN_OCG per group or more, and depthwise KxK convs

    Per group the matmul is M = OC/G rows (one per output channel), N = OH*OW columns and
    K = IC/G*KH*KW; the im2col copy writes K*N elements for M*N*K multiply-adds, so it pays
    only for enough output channels per group. Measured at one thread (AVX-512, 56x56 and
    28x28 images, padded by aicc.pad in front): with M < 16 the direct loop (~55 GFLOP/s,
    vectorized along ow) beats copy + matmul (oc 1: 0.14 vs 0.73 ms, oc 8: 0.65 vs 0.93 ms,
    depthwise 0.08 vs 0.35 ms); from M = 16 on the matmul wins (oc 16: 1.18 vs 1.30 ms,
    oc 32: 1.4 vs 2.0 ms; 64 and more: 100-160 GFLOP/s against 55), whatever K is (even
    K = 1 or 2). Without the copy (1x1, stride 1) the matmul wins from M = 4 up; only
    depthwise-like groups (fewer than 4 channels per group) stay direct, where each of the
    many tiny matmuls is mostly overhead. Convs under 2^12 multiply-adds in all stay direct
    (one small loop nest beats packing and kernel calls).

    The direct loop wins only where it vectorizes: along output rows of DIRECT_MIN_WIDTH
    or more, unstrided. On short or strided rows (the late stages of a CNN) the copy and
    matmul win even for 4 to 15 channels per group (Zen 3, AVX2, one thread: regnet's
    8-channel groups 2.3x at 7x7, 1.14x at 14x14, 1.5-1.7x strided; 8 output channels of
    one group 7.5x at 14x14; 4-channel groups 1.4x at 7x7), while at 28x28 and 56x56
    unstrided direct stays ahead (1.08x, 1.85x)."""
    icg, ocg = in_channels // groups, out_channels // groups
    if packed and groups == 1 and kernel != (1, 1) and out_channels >= PACKED_MIN_OC:
        return "packed"
    if packed and is_depthwise(in_channels, out_channels, groups) and kernel != (1, 1):
        return "packed"  # tile-conv's depthwise kernel: output columns in vectors
    if packed and groups > 1 and kernel != (1, 1) and ocg >= PACKED_MIN_OCG:
        return "packed"  # the packed kernel per group (regnet's 8-channel groups)
    macs = batch * out_channels * out_hw[0] * out_hw[1] * icg * kernel[0] * kernel[1]
    if macs < 1 << 12:
        return "direct"
    if kernel == (1, 1) and strides == (1, 1):
        return "direct" if groups > 1 and min(icg, ocg) < 4 else "matmul"
    if ocg >= 16:
        return "im2col"
    long_rows = strides[1] == 1 and out_hw[1] >= DIRECT_MIN_WIDTH
    return "direct" if ocg < 4 or long_rows else "im2col"


def is_depthwise(in_channels: int, out_channels: int, groups: int) -> bool:
    """A depthwise conv: one input and one output channel per group, more than one group."""
    return groups > 1 and in_channels == out_channels == groups


def depthwise_generic_shapes(x: tuple, w: tuple, out: tuple) -> bool:
    """Are these the (N, G, IC/G, H, W), (G, OC/G, IC/G, KH, KW), (N, G, OC/G, OH, OW) shapes of
    a direct conv generic (nn_to_linalg.py) those of a depthwise conv?"""
    return (len(x) == len(w) == len(out) == 5 and x[1] == w[0] == out[1] and x[1] > 1
            and x[2] == w[1] == w[2] == out[2] == 1)


__all__ = ["CONV_LOWERINGS", "CONV_LOWERING_ATTR", "CONV_SCHEDULE_ATTR", "DIRECT_MIN_WIDTH",
           "PACKED_MIN_OC", "PACKED_MIN_OCG", "choose_conv_lowering", "depthwise_generic_shapes", "is_depthwise"]
