"""The PyTorch frontend, op by op: each case wraps a few ATen ops in a module, compiles it with
`compiler.compile` (torch.export -> aicc -> LLVM) and compares with the module run eagerly by
torch in float32, on odd shapes (1, 7, 129, non-square, broadcast). Also the error messages.

Tolerances (|got - want| <= atol + rtol * |want|, want = torch's float32 result):

    elementwise, shape ops, selects               rtol=1e-5, atol=1e-6   (a few float32 ulps)
    transcendental (exp log tanh erf sigmoid      rtol=1e-5, atol=1e-6   (aicc's polynomial
      gelu softmax pow ...)                                               exp/tanh/erf)
    trigonometric and hyperbolic functions        rtol=1e-5, atol=1e-6   (inputs where their
                                                                          values stay O(10))
    reductions, matmul, conv, pools, norms over   rtol=1e-4, atol=1e-5*sqrt(K)
      K elements (also conv_transpose, cumsum,     (float32 accumulation in another order)
      prod, and interpolation with K taps)
    comparisons, bool and integer results          exact (also argmax indices and the
                                                  quotients of floor division)
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import compiler  # noqa: E402
from frontends.torch_import import import_torch  # noqa: E402

ELEM = dict(rtol=1e-5, atol=1e-6)


def red(k: int) -> dict:
    return dict(rtol=1e-4, atol=1e-5 * math.sqrt(max(k, 1)))


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _gen(seed: int):
    return torch.Generator().manual_seed(seed)


def r(*shape, seed=0):
    """Standard normal float32."""
    return torch.randn(shape, generator=_gen(seed + sum(shape)))


def pos(*shape, seed=0):
    """Uniform in [0.5, 2): inputs of log, sqrt, pow."""
    return torch.rand(shape, generator=_gen(seed + sum(shape))) * 1.5 + 0.5


def uni(lo, hi, *shape, seed=0):
    """Uniform float32 in [lo, hi)."""
    return torch.rand(shape, generator=_gen(seed + 2 + sum(shape))) * (hi - lo) + lo


def ints(hi, *shape, seed=0):
    return torch.randint(0, hi, shape, generator=_gen(seed + sum(shape)))


def signed_ints(hi, *shape, seed=0):
    """Integers in [-hi, hi)."""
    return ints(2 * hi, *shape, seed=seed) - hi


def divisors(hi, *shape, seed=0):
    """Nonzero integers in [-hi, hi] (torch raises on an integer division by zero)."""
    g = _gen(seed + 3 + sum(shape))
    return torch.randint(1, hi + 1, shape, generator=g) * (torch.randint(0, 2, shape, generator=g) * 2 - 1)


def halves(n):
    """-n/2, ..., n/2 in steps of 0.5: the ties of rounding, and 1.0 for floor division."""
    return torch.arange(-n, n + 1, dtype=torch.float32) * 0.5


def bools(*shape, seed=0):
    return torch.rand(shape, generator=_gen(seed + 1 + sum(shape))) > 0.5


def check(module, inputs, tol=ELEM, names=None):
    """Compile and run `module`; compare every output with eager torch (bool/int exactly).
    `tol` is one tolerance or one per output; `names` label the outputs in failure messages."""
    module = module.eval()
    m = compiler.compile(module, inputs)
    got = m(*inputs)
    with torch.no_grad():
        want = module(*inputs)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple | list) else (want,)
    assert len(got) == len(want)
    tols = tol if isinstance(tol, list) else [tol] * len(want)
    for i, (g, w, t) in enumerate(zip(got, want, tols)):
        what = f"output {i}" + (f" ({names[i]})" if names else "")
        w = w.numpy()
        assert isinstance(g, np.ndarray), what
        assert g.shape == w.shape and g.dtype == w.dtype, (what, g.shape, g.dtype, w.shape, w.dtype)
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=what)
        else:
            np.testing.assert_allclose(g, w, **t, err_msg=what)
    return m


def case(case_id, inputs, *ops, tol=ELEM):
    """One module computing every op of `ops` ((name, fn) or (name, fn, tol)) on `inputs`,
    so that one compile checks them all; an op returning a tuple gives one output per item."""
    fns = [op[1] for op in ops]

    def fn(*xs):
        outs = []
        for f in fns:
            y = f(*xs)
            outs += list(y) if isinstance(y, tuple | list) else [y]
        return tuple(outs)

    with torch.no_grad(), warnings.catch_warnings():  # the names and tolerances of each output
        warnings.simplefilter("ignore")  # torch's own notes (even 'same' kernels copy the input)
        names, tols = [], []
        for op in ops:
            y = op[1](*inputs)
            n = len(y) if isinstance(y, tuple | list) else 1
            names += [op[0]] * n if n == 1 else [f"{op[0]}[{k}]" for k in range(n)]
            tols += [op[2] if len(op) > 2 else tol] * n
    return pytest.param(fn, inputs, tols, names, id=case_id)


_g = torch.Generator().manual_seed(42)
W4, B4, W5 = torch.randn(4, generator=_g), torch.randn(4, generator=_g), torch.randn(5, generator=_g)

UNARY = [
    ("relu", torch.relu), ("sigmoid", torch.sigmoid), ("tanh", torch.tanh), ("exp", torch.exp),
    ("neg", torch.neg), ("abs", torch.abs), ("erf", torch.erf),
    ("gelu", F.gelu), ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh")), ("silu", F.silu),
    ("hardswish", F.hardswish), ("hardsigmoid", F.hardsigmoid),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.1)), ("elu", lambda x: F.elu(x, 0.5)),
    ("selu", F.selu), ("celu", lambda x: F.celu(x, 0.7)),
    ("softplus", lambda x: F.softplus(x, beta=2.0, threshold=3.0)), ("mish", F.mish),
    ("relu6", F.relu6), ("hardtanh", lambda x: F.hardtanh(x, -0.5, 0.25)),
    ("clamp", lambda x: torch.clamp(x, -0.5, 0.7)), ("clamp_min", lambda x: x.clamp(min=0.1)),
    ("square", torch.square), ("logsigmoid", F.logsigmoid), ("sign", torch.sign),
    ("pow2", lambda x: x ** 2), ("pow3", lambda x: torch.pow(x, 3)),
    ("floor_trunc_ceil", lambda x: torch.floor(x * 3) + torch.trunc(x * 5) - torch.ceil(x * 2)),
    ("div_floor", lambda x: torch.div(x * 4, 0.7, rounding_mode="floor")),
]
POSITIVE = [
    ("log", torch.log), ("sqrt", torch.sqrt), ("rsqrt", torch.rsqrt), ("reciprocal", torch.reciprocal),
    ("pow_frac", lambda x: x ** 1.7), ("pow_half", lambda x: x ** 0.5), ("log2", torch.log2),
    ("log1p", torch.log1p),
]


TRIG = [
    ("sin", lambda x: torch.sin(x * 4)), ("cos", lambda x: torch.cos(x * 4)),
    ("tan", lambda x: torch.tan(x * 1.4)), ("asin", torch.asin), ("acos", torch.acos),
    ("atan", lambda x: torch.atan(x * 10)), ("sinh", lambda x: torch.sinh(x * 5)),
    ("cosh", lambda x: torch.cosh(x * 5)),
]
# x: normal, y: normal divisors, h: halves(12) (exact ties and 1.0)
ROUNDING = [
    ("floor_ceil_round", lambda x, y, h: (torch.floor(x * 3), torch.ceil(x * 3), torch.round(x * 3))),
    ("round_ties_to_even", lambda x, y, h: (torch.round(h), torch.round(h * 0.1, decimals=1))),
    ("round_decimals", lambda x, y, h: (torch.round(x * 10, decimals=2), torch.round(x * 100, decimals=-1))),
    ("trunc_frac_fix", lambda x, y, h: (torch.trunc(x * 3), torch.frac(x * 3), torch.fix(h))),
    ("remainder", lambda x, y, h: (torch.remainder(x * 3, 0.7), x * 3 % -0.7, torch.remainder(x * 3, y),
                                   torch.remainder(2.5, y))),
    ("fmod", lambda x, y, h: (torch.fmod(x * 3, 0.7), torch.fmod(x * 3, -0.7), torch.fmod(x * 3, y))),
    ("floor_divide", lambda x, y, h: (torch.floor_divide(x * 3, 0.7), x * 3 // y,
                                      torch.div(x * 3, -0.7, rounding_mode="floor"))),
    ("div_trunc", lambda x, y, h: (torch.div(x * 3, y, rounding_mode="trunc"),
                                   torch.div(x * 3, 0.7, rounding_mode="trunc"))),
    # Python's 1 // 0.1 is 9 (the remainder is 0.0999..), though floor(1 / 0.1) is 10
    ("floor_divide_exact", lambda x, y, h: (h // 0.1, torch.div(h, -0.3, rounding_mode="floor"))),
]
# a: integers in [-10, 10), b: nonzero integers in [-5, 5], m, n: bools
INTEGER = [
    ("add_sub_mul", lambda a, b, m, n: (a + b, a - b, torch.sub(a, b, alpha=3), a * b, 7 - a, a * -2)),
    ("floor_div_mod", lambda a, b, m, n: (a // b, a % b, torch.remainder(a, -3), 17 // b, a // 4)),
    ("trunc_div_fmod", lambda a, b, m, n: (torch.div(a, b, rounding_mode="trunc"), torch.fmod(a, b),
                                           torch.fmod(a, -3))),
    ("true_div", lambda a, b, m, n: (a / b, a / 4)),
    ("max_min_abs_neg", lambda a, b, m, n: (torch.maximum(a, b), torch.minimum(a, b), a.abs(), -a,
                                            a.clamp(-3, 4), torch.sign(a), torch.relu(a))),
    ("powers", lambda a, b, m, n: (a ** 2, torch.pow(a, 3), a ** 0, torch.square(b), a ** 2.0 * 0.5)),
    ("sum_prod", lambda a, b, m, n: (a.sum(1), a.sum(), b.prod(0), b.prod(1, keepdim=True),
                                     torch.prod(b[:2]))),
    ("int32", lambda a, b, m, n: ((a.int() * b.int() + 1) // 2, a.int().sum(0), a.int() % 3)),
    ("max_min_reductions", lambda a, b, m, n: (a.amax(0), a.amin(1), torch.max(a), torch.min(b, 1).values)),
    ("bools", lambda a, b, m, n: (m + n, m * n, torch.maximum(m, n), torch.minimum(m, n), m.amax(1),
                                  m + a, m * 2.5)),
]


def _assign(x, y):
    """In-place assignments, which export turns into slice_scatter / select_scatter."""
    z = x.clone()
    z[:, 2:5] = x[:, :3] * 2
    z[:, 6] = y
    z[1] = 0.5
    return z


def sdpa(*args, **kw):
    return F.scaled_dot_product_attention(*args, **kw)


CASES = [
    *[case(f"unary{i // 8}", (r(7, 129),), *UNARY[i:i + 8]) for i in range(0, len(UNARY), 8)],
    *[case(f"positive-{s}", (pos(*s),), *POSITIVE) for s in [(1,), (3, 7, 5)]],
    case("trig", (uni(-0.999, 0.999, 7, 129),), *TRIG),
    case("trig-1", (uni(-0.999, 0.999, 1),), *TRIG),
    case("rounding", (r(7, 129), r(129), halves(12)), *ROUNDING),
    case("integer-arithmetic", (signed_ints(10, 7, 9), divisors(5, 7, 9), bools(7, 9), bools(7, 9, seed=1)),
         *INTEGER),
    case("integer-arithmetic-bcast", (signed_ints(10, 1), divisors(5, 7, 1), bools(1), bools(7, 1, seed=1)),
         *INTEGER[:3]),
    case("relu-1", (r(1),), ("relu", torch.relu)),
    case("tanh-rank0", (r(),), ("tanh", torch.tanh)),
    case("binary-bcast-row", (r(7, 129), r(129)),
         ("add", lambda x, y: x + y), ("sub_alpha", lambda x, y: torch.sub(x, y, alpha=2.5)),
         ("mul", lambda x, y: x * y), ("div", lambda x, y: x / (y.abs() + 0.5)),
         ("max_min", lambda x, y: torch.maximum(x, y) - torch.minimum(x, y)),
         ("pow_tensor", lambda x, y: torch.pow(x.abs() + 0.5, y)),
         ("where", lambda x, y: torch.where(x > y, x, y * 2)),
         ("where_scalar", lambda x, y: torch.where(x > 0, x, 0.0)),
         ("compare", lambda x, y: ((x > y) & (x <= 0.5)) | (x == y) | ~(x != 1.0)),
         ("scalars", lambda x, y: (2.5 - x) * 3 + x / 4 - 1),
         ("float_to_int", lambda x, y: (x * 3).to(torch.int64))),
    case("binary-bcast-both", (r(2, 1, 5), r(3, 1)),
         ("add", lambda x, y: x + y), ("sub_alpha", lambda x, y: torch.sub(y, x, alpha=0.5)),
         ("mul", lambda x, y: x * y), ("where", lambda x, y: torch.where(x > y, x, y))),
    case("masks", (r(3, 7, 9), bools(7, 9)),
         ("masked_fill", lambda x, m: x.masked_fill(m, -1.5)),
         ("where_mask", lambda x, m: torch.where(m, x, -x)),
         ("bool_to_float", lambda x, m: m.to(torch.float32) + x),
         ("logical", lambda x, m: torch.logical_xor(m, x[0] > 0) | torch.logical_not(m) & (x[1] < 0)),
         ("any_all", lambda x, m: (m.any(dim=1), m.all())),
         ("count", lambda x, m: (m.sum(-1), m.sum()))),
    case("integers", (ints(6, 7, 5), r(5)),
         ("int_compare", lambda i, x: i >= 3), ("int_to_float", lambda i, x: i.float() * x)),
    case("reduce-2d", (r(7, 129),),
         ("sum_last", lambda x: x.sum(-1), red(129)), ("sum_all", lambda x: x.sum(), red(7 * 129)),
         ("var_std", lambda x: (x.var(dim=-1), x.std(dim=0, unbiased=False)), red(129)),
         ("logsumexp", lambda x: torch.logsumexp(x, dim=1), red(129)),
         ("norm", lambda x: torch.linalg.vector_norm(x, dim=-1) + x.norm(p=1, dim=0).sum(), red(7 * 129)),
         ("softmax0", lambda x: torch.softmax(x, 0)), ("log_softmax", lambda x: F.log_softmax(x, -1), red(129))),
    case("reduce-3d", (r(3, 7, 5),),
         ("sum_keepdim", lambda x: x.sum(dim=(0, 2), keepdim=True), red(15)),
         ("mean", lambda x: x.mean(dim=1), red(7)),
         ("amax_amin", lambda x: x.amax(dim=0) - x.amin(dim=(0, 1), keepdim=True)),
         ("max_dim", lambda x: (torch.max(x, dim=1).values, x.min(dim=0, keepdim=True)[0])),
         ("var_mean", lambda x: torch.var_mean(x, dim=1, keepdim=True), red(7)),
         ("softmax_mid", lambda x: F.softmax(x, dim=1))),
    case("mm", (r(7, 129), r(129, 1)), ("mm", lambda x, y: x @ y), tol=red(129)),
    case("bmm", (r(3, 7, 5), r(3, 5, 9)), ("bmm", torch.bmm), tol=red(5)),
    case("matmul-bcast", (r(2, 3, 7, 5), r(5, 4)), ("matmul", torch.matmul), tol=red(5)),
    case("matmul-bcast-lhs", (r(7, 5), r(2, 5, 3)), ("matmul", torch.matmul), tol=red(5)),
    case("matmul-vec", (r(7, 5), r(5)), ("mv", lambda x, v: x @ v), ("vm", lambda x, v: v @ x.T), tol=red(7)),
    case("addmm", (r(9), r(7, 5), r(5, 9)),
         ("addmm", lambda b, x, y: torch.addmm(b, x, y, beta=0.5, alpha=2.0)), tol=red(5)),
    case("baddbmm", (r(7, 9), r(2, 7, 5), r(2, 5, 9)),
         ("baddbmm", lambda b, x, y: torch.baddbmm(b, x, y, alpha=0.5)), tol=red(5)),
    case("shapes", (r(4, 7, 9),),
         ("view_permute", lambda x: x.reshape(4, 63).t().reshape(9, 7, 4).permute(2, 0, 1)),
         ("transpose_contig", lambda x: x.transpose(0, 2).contiguous().flatten(1)),
         ("unsqueeze_expand", lambda x: x[0].unsqueeze(1).expand(7, 4, 9).squeeze()),
         ("expand_leading", lambda x: x[:, :, :1].expand(2, 4, 7, 5) * 1.0),
         ("cat_stack", lambda x: (torch.cat([x, x[:, :3], x], dim=1), torch.stack([x, x], -1))),
         ("slice_step", lambda x: x[1:, ::2, -3:]),
         ("select_narrow", lambda x: x[:, 3] + x.narrow(1, 2, 1).squeeze(1)),
         ("split_chunk", lambda x: tuple(x.split(3, dim=1)) + tuple(x.chunk(2, dim=0))),
         ("unbind", lambda x: x.unbind(2)[2] - x.unbind(2)[0]),
         # a leading slice feeding a concat at an offset: fuse-elementwise must keep the loop ranges
         ("rotate_half", lambda x: torch.cat([-x[..., 4:], x[..., :4]], dim=-1) * 0.5 + x),
         ("slice_assign", lambda x: _assign(x, x[:, 0] * 3)),
         ("flip_roll", lambda x: x.flip(0, 1) + x.roll(2, 1) + x.roll(-1)),
         ("repeat", lambda x: x[0].repeat(2, 1, 3)),
         ("tril_triu", lambda x: x.tril() + x.triu(2)),
         ("pad", lambda x: F.pad(x, (1, 2, 0, 3), value=0.5)),
         ("pad_negative", lambda x: F.pad(x, (-1, 2))),
         ("dropout_eval", lambda x: F.dropout(x, 0.3, training=False) * 2)),
    case("indexing", (r(7, 9), ints(9, 2, 3)),
         ("embedding", lambda x, i: F.embedding(i, x.t())),
         ("index_select", lambda x, i: x.index_select(1, i.flatten())),
         ("index_tensor", lambda x, i: x[:, i])),
    case("cumsum-argmax-gather", (r(7, 129), ints(3, 7, 129), bools(7, 129)),
         ("cumsum", lambda x, a, m: (x.cumsum(1), torch.cumsum(x, 0), torch.cumsum(x, -1, dtype=torch.float32)), red(129)),
         ("cumsum_int", lambda x, a, m: (a.cumsum(1), m.cumsum(0), a.int().cumsum(0), a.cumsum(1, dtype=torch.float32))),
         ("argmax", lambda x, a, m: (x.argmax(), x.argmax(1), x.argmin(0, keepdim=True), x.argmin(),
                                     x.argmax(keepdim=True))),
         ("argmax_ties", lambda x, a, m: (a.argmax(1), a.argmin(0), a.argmax(), m.int().argmax(1))),
         ("max_min_dim", lambda x, a, m: (*torch.max(x, 1), *torch.min(x, 0, keepdim=True), *torch.max(a, 1),
                                          x.max(dim=-1).indices)),
         ("gather", lambda x, a, m: (torch.gather(x, 1, a * 40 + 3), torch.gather(x, 0, (x * 100).long().abs() % 7),
                                     torch.gather(x, 1, a[:, :9]), torch.gather(a, 1, a))),
         ("take_along_dim", lambda x, a, m: torch.take_along_dim(x, x.argmax(1, keepdim=True), 1)),
         ("prod", lambda x, a, m: (x[:, :7].abs().add(0.5).prod(1), (x[:2] * 0.5 + 1).prod(0)), red(7))),
    case("argmax-rank0-1", (r(), r(1)),
         ("argmax", lambda s, v: (s.argmax(), v.argmax(0), *torch.max(v, 0), v.cumsum(0)))),
    case("conv_transpose", (r(2, 4, 7, 9), r(4, 3, 3, 3), r(12)),
         ("stride2_pad1_outpad1", lambda x, w, b: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1)),
         ("groups_dilation", lambda x, w, b: F.conv_transpose2d(x, torch.cat([w, w], 1), b, stride=(2, 3),
                                                                  padding=(0, 2), dilation=2, groups=2)),
         ("depthwise_asym", lambda x, w, b: F.conv_transpose2d(x, w[:, :1], b[:4], stride=(1, 2), padding=(2, 0),
                                                                 output_padding=(0, 1), groups=4)),
         ("1d", lambda x, w, b: F.conv_transpose1d(x[:, :, 0], w[:, :, 0], b[:3], stride=3, padding=1, output_padding=2)),
         ("1d_batched", lambda x, w, b: F.conv_transpose1d(x[:, :, 1], w[:, :, 1], stride=2)),
         tol=red(36)),
    case("conv_transpose-1", (r(1, 1, 1, 1), r(1, 1, 1, 1)),
         ("1x1", lambda x, w: F.conv_transpose2d(x, w)), ("stride", lambda x, w: F.conv_transpose2d(x, w, stride=3))),
    case("pad-modes", (r(2, 3, 7, 9), ints(5, 2, 7, 129)),
         ("reflect", lambda x, i: (F.pad(x, (1, 2, 3, 1), mode="reflect"), F.pad(x, (8, 8, 6, 0), mode="reflect"))),
         ("replicate", lambda x, i: (F.pad(x, (1, 2, 3, 1), mode="replicate"), F.pad(x, (12, 0, 0, 9), mode="replicate"))),
         ("circular", lambda x, i: (F.pad(x, (1, 9, 7, 1), mode="circular"), F.pad(x, (-1, 2, 1, -3), mode="circular"))),
         ("1d", lambda x, i: (F.pad(x[0], (3, 1), mode="reflect"), F.pad(x[0], (0, 4), mode="replicate"),
                              F.pad(x[0], (2, 2), mode="circular"))),
         ("3d", lambda x, i: (F.pad(x[None], (1, 1, 2, 0, 1, 2), mode="replicate"),
                              F.pad(x[None], (1, 0, 0, 2, 2, 1), mode="reflect"))),
         ("modules", lambda x, i: (torch.nn.ReflectionPad2d(2)(x), torch.nn.ReplicationPad1d((1, 3))(x[0]),
                                   torch.nn.CircularPad2d((0, 1, 2, 0))(x))),
         ("aten_ops", lambda x, i: (torch.ops.aten.reflection_pad2d(x, [1, 2, 3, 1]),
                                    torch.ops.aten.replication_pad1d(x[0], [4, 2]),
                                    torch.ops.aten.reflection_pad1d(x[0], [0, 5]),
                                    torch.ops.aten.replication_pad2d(x, [0, 0, 1, 1]),
                                    torch.ops.aten._pad_circular(x, [2, 1, 0, 3]))),
         ("integers", lambda x, i: (F.pad(i, (1, 128), mode="reflect"), F.pad(i, (2, 0, 1, 1), mode="replicate"),
                                    F.pad(i, (3, 1), value=7)))),
    case("interpolate-nearest", (r(2, 3, 7, 9), r(1, 2, 6, 3)),
         ("scale2", lambda x, y: F.interpolate(x, scale_factor=2)),
         ("size", lambda x, y: F.interpolate(x, size=(10, 13))),
         ("scale_frac", lambda x, y: F.interpolate(x, scale_factor=(1.5, 0.7))),
         ("down", lambda x, y: F.interpolate(x, size=(3, 1))),
         # float32 index arithmetic: output 37 reads pixel 2 (float64 would say 3)
         ("6_to_74", lambda x, y: F.interpolate(y, size=(74, 3))),
         ("recompute", lambda x, y: F.interpolate(x, scale_factor=1.3, recompute_scale_factor=True)),
         ("exact", lambda x, y: (F.interpolate(x, scale_factor=1.5, mode="nearest-exact"),
                                 F.interpolate(x, size=(5, 4), mode="nearest-exact"))),
         ("1d_3d", lambda x, y: (F.interpolate(x[0], size=20), F.interpolate(x[0], scale_factor=0.5, mode="nearest-exact"),
                                 F.interpolate(x[None], scale_factor=(2, 1.5, 1)))),
         ("module", lambda x, y: torch.nn.Upsample(scale_factor=3)(x)),
         ("aten_default", lambda x, y: torch.ops.aten.upsample_nearest2d.default(x, [10, 13], 1.5, None))),
    case("interpolate-linear", (r(2, 3, 7, 9),),
         ("bilinear", lambda x: (F.interpolate(x, scale_factor=1.5, mode="bilinear"),
                                 F.interpolate(x, size=(10, 13), mode="bilinear"),
                                 F.interpolate(x, scale_factor=0.5, mode="bilinear"))),
         ("align_corners", lambda x: (F.interpolate(x, scale_factor=2.5, mode="bilinear", align_corners=True),
                                      F.interpolate(x, size=(10, 1), mode="bilinear", align_corners=True))),
         ("to_1", lambda x: F.interpolate(x, size=(1, 4), mode="bilinear")),
         ("bicubic", lambda x: (F.interpolate(x, scale_factor=1.7, mode="bicubic"),
                                F.interpolate(x, size=(5, 12), mode="bicubic", align_corners=True)), red(16)),
         ("linear_1d", lambda x: (F.interpolate(x[0], scale_factor=2.5, mode="linear"),
                                  F.interpolate(x[0], size=4, mode="linear", align_corners=True))),
         ("trilinear", lambda x: F.interpolate(x[None], scale_factor=(1.5, 2, 0.5), mode="trilinear"), red(8)),
         ("module", lambda x: torch.nn.UpsamplingBilinear2d(size=(129, 1))(x)),
         ("aten_default", lambda x: torch.ops.aten.upsample_bilinear2d.default(x, [11, 4], False, 1.6, None)),
         tol=red(4)),
    case("conv2d", (r(1, 4, 9, 11), r(6, 2, 3, 3), r(6)),
         ("conv2d", lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)),
         tol=red(18)),
    case("conv2d-same-depthwise", (r(2, 4, 7, 8), r(5, 4, 4, 3), r(4, 1, 3, 3)),
         ("same", lambda x, w, d: F.conv2d(x, w, padding="same"), red(48)),
         ("depthwise", lambda x, w, d: F.conv2d(x, d, padding=1, groups=4), red(9))),
    case("conv1d", (r(2, 3, 129), r(4, 3, 5), r(4)),
         ("conv1d", lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1)), tol=red(15)),
    case("pools", (r(2, 3, 9, 11),),
         ("max_pool2d", lambda x: F.max_pool2d(x, 3, 2, 1)), ("avg_pool2d", lambda x: F.avg_pool2d(x, 3, 2, 1), red(9)),
         ("max_pool2d_ceil", lambda x: F.max_pool2d(x, (2, 3), (2, 2), ceil_mode=True)),
         ("avg_pool2d_nopad_ceil",
          lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), red(9)),
         ("avg_pool2d_divisor", lambda x: F.avg_pool2d(x, 2, divisor_override=3), red(4))),
    case("adaptive-pools", (r(2, 3, 8, 9),),
         ("avg_1x1", lambda x: F.adaptive_avg_pool2d(x, 1), red(72)),
         ("avg_divisible", lambda x: F.adaptive_avg_pool2d(x, (2, 3)), red(12)),
         ("avg_general", lambda x: F.adaptive_avg_pool2d(x, (3, 5)), red(12)),
         ("max", lambda x: F.adaptive_max_pool2d(x, (2, 1)))),
    case("max_pool1d", (r(2, 3, 10),), ("max_pool1d", lambda x: F.max_pool1d(x, 3, 2))),
    case("pool3d", (r(2, 3, 5, 7, 9),),
         ("max", lambda x: (F.max_pool3d(x, 3, 2, 1), F.max_pool3d(x[0], (1, 2, 3), dilation=(1, 2, 1), ceil_mode=True),
                            F.max_pool3d(x, 2, return_indices=True)[0])),
         ("avg", lambda x: (F.avg_pool3d(x, (2, 3, 3), (1, 2, 2), (1, 1, 0), ceil_mode=True, count_include_pad=False),
                            F.avg_pool3d(x, 2, divisor_override=3), F.avg_pool3d(x[0], 3, 1, 1))), tol=red(27)),
    # local_response_norm: squares summed over channels by avg_pool3d (4-D input) or avg_pool2d (3-D)
    case("local_response_norm", (r(2, 7, 5, 6),),
         ("lrn", lambda x: (F.local_response_norm(x, 3), torch.nn.LocalResponseNorm(4, alpha=0.1, beta=0.6, k=2.0)(x),
                            F.local_response_norm(x[0], 5))), tol=red(5)),
    case("batch_norm", (r(2, 3, 5, 7), r(3), pos(3), r(3), r(3)),
         ("batch_norm", lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, eps=1e-3)), tol=ELEM | dict(atol=1e-5)),
    case("layer_norm", (r(2, 7, 129), r(7, 129), r(7, 129)),
         ("layer_norm", lambda x, w, b: F.layer_norm(x, (7, 129), w, b)), tol=red(903)),
    case("norms", (r(2, 4, 3, 5),),
         ("layer_norm", lambda x: F.layer_norm(x, (5,))), ("group_norm", lambda x: F.group_norm(x, 2, W4, B4)),
         ("instance_norm", F.instance_norm), ("rms_norm", lambda x: F.rms_norm(x, (5,), W5)), tol=red(30)),
    # overloads torch.export keeps whole (CompositeImplicitAutograd), and other rarer forms
    case("overloads", (r(7, 9), r(3), r(9), bools(7, 9), ints(5, 7, 9)),
         ("type_as", lambda x, y, v, m, i: i.type_as(y)), ("expand_as", lambda x, y, v, m, i: v.expand_as(x)),
         ("view_as", lambda x, y, v, m, i: x.reshape(63).view_as(x) * 1),
         ("reshape_as", lambda x, y, v, m, i: x.t().reshape_as(x)), ("T", lambda x, y, v, m, i: x.T),
         ("broadcast_to", lambda x, y, v, m, i: torch.broadcast_to(v, (2, 7, 9))),
         ("to_other", lambda x, y, v, m, i: i.to(x) + x),
         ("tensor_split", lambda x, y, v, m, i: torch.tensor_split(x, 3, dim=1)),
         ("floor_divide", lambda x, y, v, m, i: torch.floor_divide(x, 0.7)),
         ("dropouts", lambda x, y, v, m, i: F.dropout2d(x[None, None], 0.5, False)[0] + F.alpha_dropout(x, 0.5, False)),
         ("masked_fill_tensor", lambda x, y, v, m, i: x.masked_fill(m, v[0])),
         ("where_scalar_self", lambda x, y, v, m, i: torch.where(m, 1.0, x)),
         ("int_where", lambda x, y, v, m, i: torch.where(m, i, 3)),
         ("bitwise", lambda x, y, v, m, i: (m & ~m) | (m ^ (x > 0))),
         ("like", lambda x, y, v, m, i: torch.zeros_like(x) + torch.full_like(x, 2.0) + x.new_ones(7, 9)),
         ("clamp_tensor", lambda x, y, v, m, i: torch.clamp(x, min=v * 0 - 0.5, max=v)),
         ("exp2_expm1_log10", lambda x, y, v, m, i: (torch.exp2(x), torch.expm1(x), torch.log10(x.abs() + 1)))),
    case("overloads-reducing", (r(7, 9), r(9)),
         ("dot_mv_addmv", lambda x, v: (torch.dot(v, v), torch.mv(x, v), torch.addmv(x[:, 0], x, v))),
         ("std_mean", lambda x, v: torch.std_mean(x, dim=0)),
         ("pool1d", lambda x, v: (F.adaptive_avg_pool1d(x[None], 4), F.adaptive_max_pool1d(x[None], 3),
                                  F.avg_pool1d(x[None], 3, 2), F.max_pool1d(x[None], 2, return_indices=True)[0])),
         ("conv1d_same", lambda x, v: F.conv1d(x[None], torch.ones(2, 7, 4), padding="same")),
         ("batch_stats_norms", lambda x, v: (F.batch_norm(x[None, :, :, None], None, None, training=True),
                                             torch.nn.GroupNorm(1, 7)(x[None]))), tol=red(63)),
    case("sdpa", (r(2, 3, 7, 8), r(2, 3, 5, 8), r(2, 3, 5, 4)), ("sdpa", sdpa), tol=red(8)),
    case("sdpa-causal", (r(1, 2, 7, 8), r(1, 2, 7, 8), r(1, 2, 7, 8)),
         ("causal", lambda q, k, v: sdpa(q, k, v, is_causal=True, scale=0.3)), tol=red(8)),
    case("sdpa-masks", (r(2, 7, 8), r(2, 5, 8), r(2, 5, 3), bools(7, 5), r(2, 7, 5)),
         ("bool_mask", lambda q, k, v, m, f: sdpa(q, k, v, attn_mask=m)),
         ("float_mask", lambda q, k, v, m, f: sdpa(q, k, v, attn_mask=f)), tol=red(8)),
    case("sdpa-gqa", (r(1, 4, 7, 8), r(1, 2, 5, 8), r(1, 2, 5, 8)),
         ("gqa", lambda q, k, v: sdpa(q, k, v, enable_gqa=True)), tol=red(8)),
]


@pytest.mark.parametrize("fn,inputs,tol,names", CASES)
def test_op(fn, inputs, tol, names):
    check(Fn(fn), inputs, tol, names)


_RESIZES = [dict(size=n) for n in (1, 2, 3, 5, 7, 10, 13, 20, 29, 74)] + \
    [dict(scale_factor=f) for f in (0.3, 1 / 3, 0.5, 0.7, 1.0, 1.3, 1.5, 2.0, 2.5, 3.0, 7 / 6, 4.2)]


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "linear", "bicubic"])
def test_interpolation_tap_tables_are_torchs(mode):
    """upsample_taps against torch itself, as the matrix that maps the n_in inputs of one dim
    to its n_out outputs (torch's interpolation of the identity), over many sizes and scales."""
    from frontends.torch_import import upsample_taps

    kind = {"nearest-exact": "nearest_exact", "bicubic": "cubic"}.get(mode, mode)
    corners = [None] if "nearest" in mode else [False, True]
    for n_in in (1, 2, 3, 6, 7, 14, 17):
        eye = torch.eye(n_in)[None]  # channel c holds the unit vector e_c
        for resize in _RESIZES:
            if int(n_in * resize.get("scale_factor", 1.0)) == 0:
                continue  # an empty output: torch refuses it
            for ac in corners:
                if mode == "bicubic":  # 2-D only: the identity along H, W of size 1
                    resize2 = {k: (v, 1.0) if k == "scale_factor" else (v, 1) for k, v in resize.items()}
                    want = F.interpolate(eye[..., None], **resize2, mode=mode, align_corners=ac)[0, :, :, 0]
                else:
                    want = F.interpolate(eye, **resize, mode=mode, align_corners=ac)[0]
                want = want.numpy().T  # (n_out, n_in)
                n_out = want.shape[0]
                idx, w = upsample_taps(kind, n_in, n_out, bool(ac), resize.get("scale_factor"))
                got = np.zeros((n_out, n_in))
                rows = np.arange(n_out)[:, None]
                np.add.at(got, (rows, idx.reshape(n_out, -1)), 1.0 if w is None else w.reshape(n_out, -1))
                what = f"{mode} {n_in} -> {resize} align_corners={ac}"
                if w is None:
                    np.testing.assert_array_equal(got, want, err_msg=what)
                else:
                    np.testing.assert_allclose(got, want, rtol=0, atol=3e-6, err_msg=what)  # float32 ulps


def test_fully_masked_attention_rows_are_zero():
    """torch's attention gives 0 for a query that may attend to nothing; so must aicc."""
    mask = torch.ones(7, 5, dtype=torch.bool)
    mask[2] = False

    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    q, k, v = r(2, 7, 8), r(2, 5, 8), r(2, 5, 3)
    m = check(Fn(fn), (q, k, v), red(8))
    assert np.all(m(q, k, v)[:, 2] == 0)


class WithState(torch.nn.Module):
    """Parameters, a buffer, a non-persistent buffer, a lifted tensor constant and a mask built
    in forward: all constants, folded by torch where they combine."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(r(5, 5, seed=3))
        self.register_buffer("shift", r(5, seed=4))
        self.register_buffer("pe", r(16, 5, seed=5), persistent=False)
        self.c = torch.tensor([1.0, -2.0, 3.0, 0.5, 0.25])
        self.alpha = 0.75

    def forward(self, x):
        n = x.shape[0]
        mask = torch.triu(torch.ones(n, n), 1).bool()
        scores = (x @ self.w.t() + self.shift + self.pe[:n]) @ x.t()
        scores = scores.masked_fill(mask, float("-inf"))
        return torch.softmax(scores * self.alpha, -1) @ (x * self.c) + torch.arange(5)


def test_parameters_buffers_constants_become_constants():
    m = check(WithState(), (r(7, 5),), red(5))
    text = m.ir("tensor")
    assert text.count("aicc.constant") >= 3
    func_args = re.search(r"func\.func @forward\(([^)]*)\)", text).group(1)
    assert func_args.count("tensor<") == 1, func_args  # only x is an argument


def test_numpy_example_inputs_and_torch_or_numpy_calls():
    model = Fn(lambda x, y: torch.relu(x) + y)
    x, y = np.random.default_rng(0).standard_normal((2, 7, 9)).astype(np.float32)
    m = compiler.compile(model, (x, y))
    want = np.maximum(x, 0) + y
    for args in [(x, y), (torch.from_numpy(x), torch.from_numpy(y)),
                 (torch.from_numpy(x).requires_grad_(), y)]:
        got = m(*args)
        assert isinstance(got, np.ndarray)
        np.testing.assert_allclose(got, want, **ELEM)
    single = compiler.compile(Fn(torch.tanh), torch.from_numpy(x))  # one tensor, not a tuple
    np.testing.assert_allclose(single(x), np.tanh(x), **ELEM)


def test_tuple_output_and_identity_output():
    m = check(Fn(lambda x: (x, x * 2)), (r(7, 9),))
    assert isinstance(m(r(7, 9)), tuple)


def test_eval_mode_and_training_flag_restored():
    model = torch.nn.Sequential(torch.nn.Linear(9, 9), torch.nn.Dropout(0.5), torch.nn.BatchNorm1d(9))
    model[2].running_mean.uniform_(-1, 1)
    model.train()
    x = r(7, 9)
    m = compiler.compile(model, (x,))
    assert model.training and model[1].training  # compile did not switch the caller's module
    with torch.no_grad():
        want = model.eval()(x).numpy()
    np.testing.assert_allclose(m(x), want, **red(9))


class TwoLines(torch.nn.Module):
    def forward(self, x):
        y = torch.exp(x) * 2
        return torch.softmax(y, -1)


def test_locations_point_at_the_users_source():
    """Every op carries the line of forward() it came from (torch records the forward frame)."""
    program = import_torch(TwoLines(), (r(3, 4),))
    first = TwoLines.forward.__code__.co_firstlineno
    locs = {}
    for op, loc in program.locations.items():
        locs.setdefault(loc, []).append(op.name)
    assert set(locs) == {f"{__file__}:{first + 1}", f"{__file__}:{first + 2}"}, locs
    assert "aicc.exp" in locs[f"{__file__}:{first + 1}"]
    assert "aicc.softmax" in locs[f"{__file__}:{first + 2}"]


class Nested(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.ReLU())

    def forward(self, x):
        return self.seq(x)


def test_locations_inside_torch_modules_name_the_users_line():
    program = import_torch(Nested(), (r(1, 2, 5, 5),))
    line = Nested.forward.__code__.co_firstlineno + 1
    # the user's line, then the submodule that ran the op (for the numerics check's table)
    assert {v.split(" ")[0] for v in program.locations.values()} == {f"{__file__}:{line}"}
    assert all(v.count(" ") == 1 and ":" in v.split(" ")[1] for v in program.locations.values())


# -- errors --------------------------------------------------------------------------------------


def test_data_dependent_shape_is_refused():
    with pytest.raises(compiler.UnsupportedOpError, match="shape that depends on the data"):
        compiler.compile(Fn(lambda x: x[x > 0]), (r(3, 4),))


def test_unsupported_ops_listed_in_one_message():
    def fn(x):
        y = torch.asinh(x) + torch.asinh(x * 2)
        return torch.atanh(y * 0.1) + torch.acosh(y.abs() + 1)

    with pytest.raises(compiler.UnsupportedOpError) as info:
        compiler.compile(Fn(fn), (r(3, 4),))
    msg = str(info.value)
    assert "\n" not in msg
    assert "3 unsupported PyTorch operator types" in msg, msg
    assert "aten.asinh.default (2 nodes, first 'asinh')" in msg, msg
    assert "aten.atanh.default (1 node, first 'atanh')" in msg, msg
    assert "aten.acosh.default (1 node, first 'acosh')" in msg, msg
    assert info.value.ops == {"aten.asinh.default": 2, "aten.atanh.default": 1, "aten.acosh.default": 1}


def test_unsupported_ops_on_constants_are_folded_not_refused():
    table = torch.linspace(0, 1, 9)

    def fn(x):
        return x * torch.cumprod(table + 0.5, 0) + torch.sort(-table).values

    check(Fn(fn), (r(7, 9),))


class DataDependent(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x


def test_export_failure_is_one_compile_error_naming_the_module(capsys):
    with pytest.raises(compiler.CompileError) as info:
        compiler.compile(DataDependent(), (r(3, 4),))
    msg = str(info.value)
    assert "\n" not in msg
    assert "torch.export could not export DataDependent" in msg, msg
    assert "data-dependent" in msg, msg
    assert "test_torch_import.py:" in msg, msg  # the line of the `if`
    captured = capsys.readouterr()
    assert "def forward" not in captured.err  # torch's partial graph is not printed


def test_unsupported_argument_names_node_and_line():
    def fn(x):
        return x[:, torch.tensor([0, 5])]

    with pytest.raises(compiler.UnsupportedOpError, match=r"test_torch_import\.py:\d+: node 'index' "
                       r"\(aten\.index\.Tensor\): out-of-range indices is not supported"):
        compiler.compile(Fn(fn), (r(3, 4),))


def test_gather_with_constant_indices():
    idx = torch.tensor([[0, 3], [2, 2], [1, 0]])
    check(Fn(lambda x: torch.gather(x, 1, idx)), (r(3, 4),))


def test_max_pool_indices_are_computed_when_used():
    """The indices of max pooling are imported only when read (tests/test_torch_ops_extra.py
    checks them and max_unpool against torch)."""
    x = r(1, 3, 4, 4)
    check(Fn(lambda x: F.max_pool2d(x, 2, return_indices=True)[1] * 2), (x,))
    with pytest.raises(compiler.UnsupportedOpError, match=r"adaptive_max_pool2d.*the indices of adaptive and 3-D max pooling"):
        compiler.compile(Fn(lambda x: F.adaptive_max_pool2d(x, 2, return_indices=True)[1] * 2), (x,))


def test_integer_power_with_negative_exponent_is_refused():
    with pytest.raises(compiler.UnsupportedOpError, match=r"node 'pow\w*'.*an integer tensor to the power -2 "
                       "is not supported"):
        compiler.compile(Fn(lambda a: torch.ops.aten.pow.Tensor_Scalar(a * 2, -2)), (ints(5, 3),))


def test_float_only_ops_refuse_integer_tensors():
    with pytest.raises(compiler.UnsupportedOpError, match=r"node 'matmul' \(aten\.matmul\.default\): a computed "
                       r"int64 tensor as input \(aicc computes this op in floating point only\) is not supported"):
        compiler.compile(Fn(lambda a: a @ a), (ints(5, 3, 3),))


def test_rounding_and_floor_division_use_the_dialect_ops():
    """floor / ceil / round / trunc are aicc ops now, not a round trip through an i64 cast."""
    def fn(x, y):
        return torch.floor(x) + torch.ceil(x) + torch.round(x) + torch.trunc(x) + x // y

    m = check(Fn(fn), (r(7, 9), r(9)))
    text = m.ir("tensor")
    for op in ("aicc.floor", "aicc.ceil", "aicc.round", "aicc.fmod"):
        assert op in text, op
    assert "i64" not in text


def test_attention_dropout_is_refused():
    def fn(q):
        return F.scaled_dot_product_attention(q, q, q, dropout_p=0.1)

    with pytest.raises(compiler.UnsupportedOpError, match="attention dropout"):
        compiler.compile(Fn(fn), (r(1, 3, 4),))


def test_float64_and_non_tensor_inputs_are_refused():
    with pytest.raises(compiler.CompileError, match="example input 0 has dtype float64.*float32"):
        compiler.compile(Fn(torch.relu), (torch.randn(3, dtype=torch.float64),))
    with pytest.raises(compiler.CompileError, match="example input 1 is a float"):
        compiler.compile(Fn(lambda x, s: x * s), (r(3), 2.0))
    with pytest.raises(compiler.CompileError, match="needs example_inputs"):
        compiler.compile(Fn(torch.relu))


def test_float64_parameters_are_refused():
    lin = torch.nn.Linear(3, 3).double()
    model = Fn(lambda x: lin(x.double()))
    with pytest.raises(compiler.UnsupportedOpError, match="float64 tensors.*float32"):
        compiler.compile(model, (r(2, 3),))


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls.add_(1)
        return x + self.calls


def test_buffer_mutation_is_refused():
    with pytest.raises(compiler.UnsupportedOpError, match="writes to its buffers \\(calls\\)"):
        compiler.compile(Counter(), (r(3),))


def test_wrong_call_inputs_are_compile_errors():
    m = compiler.compile(Fn(torch.relu), (r(3, 4),))
    with pytest.raises(compiler.CompileError, match="compiled as"):
        m(r(4, 3))
