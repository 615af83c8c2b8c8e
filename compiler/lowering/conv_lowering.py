"""How a conv2d is lowered to linalg: "direct", "im2col", "matmul", "packed", "winograd" or
"winograd4" (see nn_to_linalg.py and winograd.py). "packed" is the direct generic marked for a target's blocked kernel (the cpu
target's tile-conv: output channels in vectors, the input broadcast, no im2col copy); a
target without one runs it as the direct loop.
The choice is per op, made by tensor-to-linalg for every target from the conv's shape, and
recorded on the conv's matmul (`aicc.conv_lowering`) for the targets' schedules to read."""

from __future__ import annotations

CONV_LOWERINGS = ("direct", "im2col", "matmul", "packed", "winograd", "winograd4")
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
# A 1-D conv (one output row, a kernel of height 1: whisper's, wav2vec2's) of more input
# channels than this takes im2col and the matmul, not the packed kernel (see
# choose_conv_lowering).
PACKED_1D_MAX_IC = 128
# The output channels per group from which a grouped KxK conv takes the packed kernel, a
# group at a time (one vector of 8 channels on AVX2).
PACKED_MIN_OCG = 8
# A 1x1 stride-1 conv of one group takes the packed kernel (its image viewed as one row of
# H*W columns) up to this many pixels, and up to PACKED_1X1_MAX_PIXELS_NARROWING when it has
# more input than output channels; larger images stay a matmul (see choose_conv_lowering).
PACKED_1X1_MAX_PIXELS = 64
PACKED_1X1_MAX_PIXELS_NARROWING = 256
# ... and on any image when it narrows to at most this many output channels.
PACKED_1X1_MAX_OC_NARROWING = 128
# Which of those rules a target's machine keeps for unstrided 1x1 convs (choose_conv_lowering's
# `packed_1x1`): "all" of them, the "small" images' alone, or "none" (every one a matmul).
PACKED_1X1_RULES = ("all", "small", "none")
# The heuristic takes Winograd's F(2x2, 3x3) for a 3x3 stride-1 conv it applies to from this
# many input and output channels on (see winograd_wins).
WINOGRAD_MIN_CHANNELS = 24
# ... and F(4x4, 3x3) instead where an image has this many tiles of 4x4 (see winograd_tile).
WINOGRAD4_MIN_TILES = 32


def choose_conv_lowering(batch: int, in_channels: int, out_channels: int, groups: int,
                         out_hw: tuple[int, int], kernel: tuple[int, int],
                         strides: tuple[int, int] = (1, 1), packed: bool = False,
                         winograd_bits: int = 0, packed_1x1: str = "all",
                         winograd4_min_tiles: int = WINOGRAD4_MIN_TILES) -> str:
    """How a conv2d is lowered to linalg (compiler/lowering/nn_to_linalg.py):

      "matmul"  a 1x1 stride-1 conv: the input viewed as (N, IC, H*W) is the matmul's B
      "im2col"  an im2col copy of the input into (N, IC*KH*KW, OH*OW), then a batched
                matmul with the weight (OC, IC*KH*KW) broadcast over the batch (per group)
      "direct"  one generic with loops (n, g, oc, oh, ow | ic, kh, kw)
      "packed"  that generic, marked for the target's kernel (`packed`: the target has one):
                KxK convs of one group with PACKED_MIN_OC output channels or more, 1x1 convs
                of one group on small images (below),
                grouped ones with PACKED_MIN_OCG per group or more, and depthwise KxK convs

    "winograd" (F(2x2, 3x3), winograd.py) or "winograd4" (F(4x4, 3x3), as `winograd_tile`
    says) when `winograd_bits` (the target's vector width, given only for a conv Winograd
    applies to) and `winograd_wins` say so, before all else.

    A 1x1 conv of one group is "packed" too on small images: up to
    PACKED_1X1_MAX_PIXELS output pixels, or PACKED_1X1_MAX_PIXELS_NARROWING with more input
    than output channels. The matmul puts the pixels in its vectors, and 49 or 196 of them
    fill 77% or 88% of its 32-column tiles; the packed kernel puts the output channels in its
    vectors (multiples of 16 in these networks) and spans the pixels with its columns. It
    pays a transpose of each tile on the store, over IC steps, so it loses where the matmul's
    tiles are full and the input channels few. Measured at one thread on a Zen 4, both
    compiled in one process and timed alternately (1x1 conv + ReLU, matmul time / packed
    time), with AVX-512 code / AVX2 code (x86-64-v3):
      7x7:   192->1152 1.03/1.03, 1152->192 1.27/1.09, 96->576 1.12/1.23, 2048->512
             1.23/1.04, 512->2048 1.19/1.04
      14x14: 1024->256 1.11/1.10, 672->112 1.05/1.13, 480->80 1.04/1.07; but 256->1024
             0.94/1.03, 112->672 0.90/1.12, 80->480 0.91/1.15, 32->64 0.85/1.21
      28x28: 128->512 0.86/1.06, 40->240 0.71/1.23
    The rule keeps the cases that win with both vector widths. On larger images a 1x1 conv
    that narrows to few output channels is packed too (PACKED_1X1_MAX_OC_NARROWING): the
    matmul has few rows (M = OC) against many columns, and streams its B (the image) from
    IC rows for each of them. Measured on a Zen 3 (AVX2) the same way, each timed call after
    an untimed one (warm caches):
      112x112: 32->16 1.24; 56x56: 96->24 1.28, 144->24 1.05, 128->64 1.28, 256->64 1.41;
      28x28: 240->40 1.22, 512->128 1.07;
    without the untimed call (the matmul timed first on cold caches) the ratios read 1.2-2.1.
    Kept as matmuls: 1024->512 at 28x28 (0.92, many rows) and widening or equal ones (warm:
    16->96 at 112x112 0.82, 24->144 at 56x56 0.90, 64->256 at 56x56 0.88, 40->240 1.03;
    cold: 64->64 at 56x56 0.99).
    Those measurements are AMD's cores; the machine may keep fewer of the rules for unstrided
    1x1 convs (`packed_1x1`, one of PACKED_1X1_RULES, chosen by the target: on an Intel core
    the matmul wins on more images, see the cpu target's `packed_1x1_rule`).
    A strided 1x1 conv (resnet's downsampling shortcut) follows the rules in full: the packed kernel
    reads the input at its stride, where the matmul needs an im2col copy first (im2col time /
    packed time, 7x7 output: 1024->2048 1.41/1.22, 256->512 1.28/1.04; 14x14: 512->1024
    1.07/0.86, kept im2col).

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

    A 1-D conv (one output row, kernel height 1) with more than PACKED_1D_MAX_IC input
    channels takes im2col: on one output row the packed kernel loses to the copy and the
    matmul from about 192 input channels on. Measured at one thread on a Sapphire
    Rapids-class Xeon, both compiled in one process and timed alternately (conv1d k=3 +
    GELU, packed time / im2col time, AVX-512 code; AVX2 code in brackets): 384->384 over
    3000 1.52, stride 2 1.54 [1.73]; 192->384 1.26 [1.29]; 256->256 1.18; 512->512 stride 2
    over 1000 1.28; but 128->128 stride 2 0.95 [0.97], 80->384 0.92 [1.09], stride 2 0.96.

    The direct loop wins only where it vectorizes: along output rows of DIRECT_MIN_WIDTH
    or more, unstrided. On short or strided rows (the late stages of a CNN) the copy and
    matmul win even for 4 to 15 channels per group (Zen 3, AVX2, one thread: regnet's
    8-channel groups 2.3x at 7x7, 1.14x at 14x14, 1.5-1.7x strided; 8 output channels of
    one group 7.5x at 14x14; 4-channel groups 1.4x at 7x7), while at 28x28 and 56x56
    unstrided direct stays ahead (1.08x, 1.85x)."""
    icg, ocg = in_channels // groups, out_channels // groups
    pixels = out_hw[0] * out_hw[1]
    if winograd_bits and winograd_wins(winograd_bits, in_channels, out_channels, pixels):
        return winograd_tile(out_hw, winograd4_min_tiles)
    rule = packed_1x1 if strides == (1, 1) else "all"
    if (packed and groups == 1 and kernel == (1, 1) and out_channels >= PACKED_MIN_OC
            and rule != "none"
            and (pixels <= PACKED_1X1_MAX_PIXELS
                 or (rule == "all" and in_channels > out_channels
                     and (pixels <= PACKED_1X1_MAX_PIXELS_NARROWING
                          or out_channels <= PACKED_1X1_MAX_OC_NARROWING)))):
        return "packed"  # small images, narrowing ones: the output channels in vectors (above)
    if (packed and groups == 1 and kernel != (1, 1) and out_channels >= PACKED_MIN_OC
            and not (out_hw[0] == 1 and kernel[0] == 1 and in_channels > PACKED_1D_MAX_IC)):
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


def winograd_wins(vector_bits: int, in_channels: int, out_channels: int, pixels: int) -> bool:
    """Does F(2x2, 3x3) beat the packed direct kernel on a 3x3 stride-1 conv it applies to
    (winograd.py) with this many channels, on a target with vectors of `vector_bits`?
    Measured on a Zen 4 at one thread, both compiled in one process and timed alternately,
    one conv (packed time / winograd time), AVX-512 code / AVX2 code (x86-64-v3):
      24ch 56x56 1.51/1.07, 32ch 56x56 1.30/1.34, 32->64 28x28 1.42/1.31, 64ch 56x56
      1.53/1.47, 256ch 14x14 1.46/1.72, 256ch 28x28 1.69/1.82, 512ch 8x8 1.13/1.24;
      but 16ch 112x112 0.96/0.74.
    (Before LLVM was told not to use gathers (machine.NO_GATHER), the input transform's
    stride-2 reads were gathers with AVX-512 code, and Winograd lost below 64 channels
    there.) So: from WINOGRAD_MIN_CHANNELS input and output channels, on 4 pixels or more."""
    channels = min(in_channels, out_channels)
    if vector_bits < 256:
        return False
    return channels >= WINOGRAD_MIN_CHANNELS and pixels >= 4


def winograd_tile(out_hw: tuple[int, int], min_tiles: int = WINOGRAD4_MIN_TILES) -> str:
    """Which Winograd lowering the heuristic takes for a conv with this output: "winograd4"
    (F(4x4, 3x3)) where an image has `min_tiles` tiles of 4x4 or more (an output that
    is not a multiple of 4 padded to whole tiles), else "winograd" (F(2x2, 3x3)). F(4x4, 3x3)
    does 1.8x fewer multiplies, but its weight is 2.25x larger: on small images its 36
    matmuls of few columns stream 36 (OC, IC) matrices for little work each. Measured on a
    Zen 4 at one thread, both compiled in one process and timed alternately, one conv + ReLU
    (F(2x2) time / F(4x4) time), AVX-512 code / AVX2 code:
      64ch 16x16 -/1.42, 32->64 32x32 1.59/1.51, 64ch 56x56 1.42/1.32, 128ch 28x28
      1.16/1.09, 256ch 14x14 (padded to 16x16) 1.13/1.15, 512ch 14x14 1.02/0.98;
      but 512ch 8x8 (4 tiles) 0.44/0.48.
    Those are one conv timed over and over, its weight in cache. In a model every weight
    comes from memory once per run (resnet50's are 100 MB), and F(4x4)'s is 4x the conv's
    own (36 / 9), 2.25x F(2x2)'s, for its tiles' few FLOPs per weight element (2 per
    tile). Whole models on a Sapphire Rapids-class Xeon at one thread (ONNX, alternated in
    one process, ms, F(4x4) from 16 tiles / from 17 / from 50): resnet50 54.9 / 52.5 /
    54.9, resnet18 22.7 / 20.9 / 21.9; the 256ch 14x14 convs (16 tiles) went to F(2x2),
    the 128ch 28x28 ones (49 tiles) lost with it. So WINOGRAD4_MIN_TILES between the two, the
    default; on AMD's cores 16 (schedule.winograd4_rule: measured in a model on a Zen 5)."""
    oh, ow = out_hw
    return "winograd4" if -(-oh // 4) * -(-ow // 4) >= min_tiles else "winograd"


def is_depthwise(in_channels: int, out_channels: int, groups: int) -> bool:
    """A depthwise conv: one input and one output channel per group, more than one group."""
    return groups > 1 and in_channels == out_channels == groups


def depthwise_generic_shapes(x: tuple, w: tuple, out: tuple) -> bool:
    """Are these the (N, G, IC/G, H, W), (G, OC/G, IC/G, KH, KW), (N, G, OC/G, OH, OW) shapes of
    a direct conv generic (nn_to_linalg.py) those of a depthwise conv?"""
    return (len(x) == len(w) == len(out) == 5 and x[1] == w[0] == out[1] and x[1] > 1
            and x[2] == w[1] == w[2] == out[2] == 1)


__all__ = ["CONV_LOWERINGS", "CONV_LOWERING_ATTR", "CONV_SCHEDULE_ATTR", "DIRECT_MIN_WIDTH",
           "PACKED_1X1_MAX_PIXELS", "PACKED_1X1_MAX_PIXELS_NARROWING", "PACKED_MIN_OC",
           "PACKED_MIN_OCG", "WINOGRAD4_MIN_TILES", "WINOGRAD_MIN_CHANNELS",
           "choose_conv_lowering", "depthwise_generic_shapes", "is_depthwise", "winograd_tile",
           "winograd_wins"]
