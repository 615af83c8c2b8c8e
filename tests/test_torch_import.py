"""The PyTorch frontend, op by op: each case wraps a few ATen ops in a module, compiles it with
`compiler.compile` (torch.export -> aicc -> LLVM) and compares with the module run eagerly by
torch in float32, on odd shapes (1, 7, 129, non-square, broadcast). Also the error messages.

Tolerances (|got - want| <= atol + rtol * |want|, want = torch's float32 result):

    elementwise, shape ops, selects               rtol=1e-5, atol=1e-6   (a few float32 ulps)
    transcendental (exp log tanh erf sigmoid      rtol=1e-5, atol=1e-6   (aicc's polynomial
      gelu softmax pow ...)                                               exp/tanh/erf)
    reductions, matmul, conv, pools, norms over   rtol=1e-4, atol=1e-5*sqrt(K)
      K elements                                   (float32 accumulation in another order)
    comparisons, bool and integer results          exact
"""

from __future__ import annotations

import math
import re

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


def ints(hi, *shape, seed=0):
    return torch.randint(0, hi, shape, generator=_gen(seed + sum(shape)))


def bools(*shape, seed=0):
    return torch.rand(shape, generator=_gen(seed + 1 + sum(shape))) > 0.5


def check(module, inputs, tol=ELEM, names=None):
    """Compile and run `module`; compare every output with eager torch (bool/int exactly).
    `names` label the outputs in failure messages."""
    module = module.eval()
    m = compiler.compile(module, inputs)
    got = m(*inputs)
    with torch.no_grad():
        want = module(*inputs)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple | list) else (want,)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        what = f"output {i}" + (f" ({names[i]})" if names else "")
        w = w.numpy()
        assert isinstance(g, np.ndarray), what
        assert g.shape == w.shape and g.dtype == w.dtype, (what, g.shape, g.dtype, w.shape, w.dtype)
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=what)
        else:
            np.testing.assert_allclose(g, w, **tol, err_msg=what)
    return m


# (id, function, inputs, tolerance)
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

def _assign(x, y):
    """In-place assignments, which export turns into slice_scatter / select_scatter."""
    z = x.clone()
    z[:, 2:5] = x[:, :3] * 2
    z[:, 6] = y
    z[1] = 0.5
    return z


# One module computes a group of unary ops (one compile each group; outputs named on failure).
def _group(ops, shape, make):
    names = [n for n, _ in ops]
    fns = [f for _, f in ops]
    return ("-".join(names) + f"-{shape}", lambda x: tuple(f(x) for f in fns), (make(*shape),), ELEM, names)


CASES = [
    *[_group(UNARY[i:i + 8], (7, 129), r) for i in range(0, len(UNARY), 8)],
    *[_group(POSITIVE, s, pos) for s in [(1,), (3, 7, 5)]],
    ("relu-1", torch.relu, (r(1),), ELEM),
    ("tanh-rank0", torch.tanh, (r(),), ELEM),
    # binary, broadcasting, scalars
    ("add-bcast", lambda x, y: x + y, (r(7, 129), r(129)), ELEM),
    ("sub-alpha", lambda x, y: torch.sub(x, y, alpha=2.5), (r(7, 1), r(1, 129)), ELEM),
    ("mul-bcast", lambda x, y: x * y, (r(2, 1, 5), r(3, 1)), ELEM),
    ("div", lambda x, y: x / y, (r(7, 129), pos(129)), ELEM),
    ("scalars", lambda x: (2.5 - x) * 3 + x / 4 - 1, (r(7, 5),), ELEM),
    ("max-min", lambda x, y: torch.maximum(x, y) - torch.minimum(x, y), (r(7, 9), r(9)), ELEM),
    ("pow-tensor", lambda x, y: torch.pow(x, y), (pos(7, 9), r(9)), ELEM),
    ("where", lambda x, y: torch.where(x > y, x, y * 2), (r(7, 9), r(1, 9)), ELEM),
    ("where-scalar", lambda x: torch.where(x > 0, x, 0.0), (r(7, 9),), ELEM),
    ("masked_fill", lambda x, m: x.masked_fill(m, -1.5), (r(3, 7, 9), bools(7, 9)), ELEM),
    ("compare", lambda x, y: ((x > y) & (x <= 0.5)) | (x == y) | ~(x != 1.0), (r(7, 9), r(9)), ELEM),
    ("logical", lambda a, b: torch.logical_xor(a, b) | torch.logical_not(b), (bools(7, 3), bools(3)), ELEM),
    ("int-compare", lambda i: i >= 3, (ints(6, 7, 5),), ELEM),
    ("int-to-float", lambda i, x: i.float() * x, (ints(6, 7, 5), r(5)), ELEM),
    ("bool-to-float", lambda m, x: m.to(torch.float32) + x, (bools(7, 5), r(7, 5)), ELEM),
    ("float-to-int", lambda x: (x * 3).to(torch.int64), (r(7, 5),), ELEM),
    # reductions
    ("sum-last", lambda x: x.sum(-1), (r(7, 129),), red(129)),
    ("sum-keepdim", lambda x: x.sum(dim=(0, 2), keepdim=True), (r(3, 7, 5),), red(15)),
    ("sum-all", lambda x: x.sum(), (r(7, 129),), red(7 * 129)),
    ("mean", lambda x: x.mean(dim=1), (r(3, 129, 2),), red(129)),
    ("amax-amin", lambda x: x.amax(dim=0) - x.amin(dim=(0, 1), keepdim=True), (r(7, 3, 5),), ELEM),
    ("max-dim", lambda x: torch.max(x, dim=1).values + x.min(dim=0, keepdim=True)[0], (r(7, 7),), ELEM),
    ("var-std", lambda x: (x.var(dim=-1), x.std(dim=0, unbiased=False)), (r(7, 129),), red(129)),
    ("var_mean", lambda x: torch.var_mean(x, dim=1, keepdim=True), (r(7, 9),), red(9)),
    ("logsumexp", lambda x: torch.logsumexp(x, dim=1), (r(7, 129),), red(129)),
    ("norm", lambda x: torch.linalg.vector_norm(x, dim=-1) + x.norm(p=1, dim=0).sum(), (r(7, 9),), red(63)),
    ("any-all", lambda m: (m.any(dim=1), m.all()), (bools(7, 9),), ELEM),
    # softmax
    ("softmax-0", lambda x: torch.softmax(x, 0), (r(7, 129),), ELEM),
    ("softmax-mid", lambda x: F.softmax(x, dim=1), (r(2, 7, 5),), ELEM),
    ("log_softmax", lambda x: F.log_softmax(x, dim=-1), (r(7, 129),), red(129)),
    # matmul
    ("mm", lambda x, y: x @ y, (r(7, 129), r(129, 1)), red(129)),
    ("bmm", torch.bmm, (r(3, 7, 5), r(3, 5, 9)), red(5)),
    ("matmul-bcast", torch.matmul, (r(2, 3, 7, 5), r(5, 4)), red(5)),
    ("matmul-bcast-lhs", torch.matmul, (r(7, 5), r(2, 5, 3)), red(5)),
    ("matmul-vec", lambda x, v: (x @ v, v @ x.T), (r(7, 5), r(5)), red(7)),
    ("addmm", lambda b, x, y: torch.addmm(b, x, y, beta=0.5, alpha=2.0), (r(9), r(7, 5), r(5, 9)), red(5)),
    ("baddbmm", lambda b, x, y: torch.baddbmm(b, x, y, alpha=0.5), (r(7, 9), r(2, 7, 5), r(2, 5, 9)), red(5)),
    # shapes
    ("view-permute", lambda x: x.view(3, 35).t().reshape(5, 7, 3).permute(2, 0, 1), (r(3, 7, 5),), ELEM),
    ("transpose-contig", lambda x: x.transpose(0, 2).contiguous().flatten(1), (r(3, 7, 5),), ELEM),
    ("unsqueeze-squeeze-expand", lambda x: x.unsqueeze(1).expand(7, 4, 5).squeeze(), (r(7, 5),), ELEM),
    ("expand-leading", lambda x: x.expand(2, 7, 5) * 1.0, (r(7, 1),), ELEM),
    ("cat-stack", lambda x, y: (torch.cat([x, y, x], dim=1), torch.stack([x, x], -1)), (r(7, 5), r(7, 3)), ELEM),
    ("slice-step", lambda x: x[1:, ::2, -3:], (r(4, 7, 9),), ELEM),
    ("select-narrow", lambda x: x[:, 3] + x.narrow(1, 2, 1).squeeze(1), (r(7, 9),), ELEM),
    ("split-chunk", lambda x: tuple(x.split(3, dim=1)) + tuple(x.chunk(2, dim=0)), (r(7, 8),), ELEM),
    ("unbind", lambda x: x.unbind(1)[2] - x.unbind(1)[0], (r(7, 3),), ELEM),
    # a leading slice feeding a concat at an offset: fuse-elementwise must keep the loop ranges
    ("rotate-half", lambda x: torch.cat([-x[..., 4:], x[..., :4]], dim=-1) * 0.5 + x, (r(2, 7, 8),), ELEM),
    ("slice-assign", lambda x, y: _assign(x, y), (r(4, 7, 9), r(4, 9)), ELEM),
    ("count-mask", lambda m: (m.sum(-1), m.sum()), (bools(7, 129),), ELEM),
    ("flip-roll", lambda x: x.flip(0, 1) + x.roll(2, 1) + x.roll(-1), (r(7, 9),), ELEM),
    ("repeat", lambda x: x.repeat(2, 1, 3), (r(7, 5),), ELEM),
    ("tril-triu", lambda x: x.tril() + x.triu(2), (r(2, 7, 9),), ELEM),
    ("pad", lambda x: F.pad(x, (1, 2, 0, 3), value=0.5), (r(2, 7, 5),), ELEM),
    ("pad-negative", lambda x: F.pad(x, (-1, 2)), (r(7, 5),), ELEM),
    ("embedding", lambda i, w: F.embedding(i, w), (ints(9, 2, 7), r(9, 5)), ELEM),
    ("index_select", lambda x, i: x.index_select(1, i), (r(7, 9), ints(9, 4)), ELEM),
    ("index-tensor", lambda x, i: x[:, i], (r(7, 9), ints(9, 2, 3)), ELEM),
    ("dropout-eval", lambda x: F.dropout(x, 0.3, training=False) * 2, (r(7, 9),), ELEM),
    # convolution, pooling, normalization
    ("conv2d", lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2),
     (r(1, 4, 9, 11), r(6, 2, 3, 3), r(6)), red(18)),
    ("conv2d-same", lambda x, w: F.conv2d(x, w, padding="same"), (r(2, 3, 7, 8), r(5, 3, 4, 3)), red(36)),
    ("conv2d-depthwise", lambda x, w: F.conv2d(x, w, padding=1, groups=4), (r(1, 4, 7, 7), r(4, 1, 3, 3)), red(9)),
    ("conv1d", lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1), (r(2, 3, 129), r(4, 3, 5), r(4)), red(15)),
    ("max_pool2d", lambda x: F.max_pool2d(x, 3, 2, 1), (r(2, 3, 9, 11),), ELEM),
    ("max_pool2d-ceil", lambda x: F.max_pool2d(x, (2, 3), (2, 2), ceil_mode=True), (r(1, 2, 7, 8),), ELEM),
    ("max_pool1d", lambda x: F.max_pool1d(x, 3, 2), (r(2, 3, 10),), ELEM),
    ("avg_pool2d", lambda x: F.avg_pool2d(x, 3, 2, 1), (r(2, 3, 9, 11),), red(9)),
    ("avg_pool2d-nopad-ceil", lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
     (r(1, 2, 8, 7),), red(9)),
    ("avg_pool2d-divisor", lambda x: F.avg_pool2d(x, 2, divisor_override=3), (r(1, 2, 8, 7),), red(4)),
    ("adaptive_avg-1x1", lambda x: F.adaptive_avg_pool2d(x, 1), (r(2, 3, 7, 9),), red(63)),
    ("adaptive_avg-divisible", lambda x: F.adaptive_avg_pool2d(x, (2, 3)), (r(2, 3, 8, 9),), red(12)),
    ("adaptive_avg-general", lambda x: F.adaptive_avg_pool2d(x, (3, 5)), (r(1, 2, 7, 11),), red(12)),
    ("adaptive_max", lambda x: F.adaptive_max_pool2d(x, (2, 1)), (r(1, 2, 8, 5),), ELEM),
    ("batch_norm", lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, eps=1e-3),
     (r(2, 3, 5, 7), r(3), pos(3), r(3), r(3)), ELEM | dict(atol=1e-5)),
    ("layer_norm", lambda x, w, b: F.layer_norm(x, (7, 129), w, b), (r(2, 7, 129), r(7, 129), r(7, 129)), red(903)),
    ("layer_norm-plain", lambda x: F.layer_norm(x, (5,)), (r(7, 5),), red(5)),
    ("group_norm", lambda x, w, b: F.group_norm(x, 2, w, b), (r(2, 4, 3, 5), r(4), r(4)), red(30)),
    ("instance_norm", lambda x: F.instance_norm(x), (r(2, 3, 5, 7),), red(35)),
    ("rms_norm", lambda x, w: F.rms_norm(x, (9,), w), (r(7, 9), r(9)), red(9)),
    # attention
    ("sdpa", F.scaled_dot_product_attention, (r(2, 3, 7, 8), r(2, 3, 5, 8), r(2, 3, 5, 4)), red(8)),
    ("sdpa-causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3),
     (r(1, 2, 7, 8), r(1, 2, 7, 8), r(1, 2, 7, 8)), red(8)),
    ("sdpa-bool-mask", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
     (r(2, 7, 8), r(2, 5, 8), r(2, 5, 3), bools(7, 5)), red(8)),
    ("sdpa-float-mask", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
     (r(2, 7, 8), r(2, 5, 8), r(2, 5, 3), r(2, 7, 5)), red(8)),
    ("sdpa-gqa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
     (r(1, 4, 7, 8), r(1, 2, 5, 8), r(1, 2, 5, 8)), red(8)),
]


@pytest.mark.parametrize("fn,inputs,tol,names", [(*c[1:4], c[4] if len(c) > 4 else None) for c in CASES],
                         ids=[c[0] for c in CASES])
def test_op(fn, inputs, tol, names):
    check(Fn(fn), inputs, tol, names)


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
    assert set(program.locations.values()) == {f"{__file__}:{line}"}


# -- errors --------------------------------------------------------------------------------------


def test_data_dependent_shape_is_refused():
    with pytest.raises(compiler.UnsupportedOpError, match="shape that depends on the data"):
        compiler.compile(Fn(lambda x: x[x > 0]), (r(3, 4),))


def test_unsupported_ops_listed_in_one_message():
    def fn(x):
        y = torch.sin(x) + torch.sin(x * 2)
        return torch.cos(y) + torch.atan(y)

    with pytest.raises(compiler.UnsupportedOpError) as info:
        compiler.compile(Fn(fn), (r(3, 4),))
    msg = str(info.value)
    assert "\n" not in msg
    assert "3 unsupported PyTorch operator types" in msg, msg
    assert "aten.sin.default (2 nodes, first 'sin')" in msg, msg
    assert "aten.cos.default (1 node, first 'cos')" in msg, msg
    assert "aten.atan.default (1 node, first 'atan')" in msg, msg
    assert info.value.ops == {"aten.sin.default": 2, "aten.cos.default": 1, "aten.atan.default": 1}


def test_unsupported_ops_on_constants_are_folded_not_refused():
    table = torch.linspace(0, 1, 9)

    def fn(x):
        return x * torch.sin(table) + torch.cumsum(table, 0)

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
    def fn(x, i):
        return torch.gather(x, 1, i)

    with pytest.raises(compiler.UnsupportedOpError, match=r"test_torch_import\.py:\d+: node 'gather' "
                       r"\(aten\.gather\.default\): torch\.gather with computed indices is not supported"):
        compiler.compile(Fn(fn), (r(3, 4), ints(4, 3, 2)))


def test_gather_with_constant_indices():
    idx = torch.tensor([[0, 3], [2, 2], [1, 0]])
    check(Fn(lambda x: torch.gather(x, 1, idx)), (r(3, 4),))


def test_using_argmax_indices_is_refused():
    with pytest.raises(compiler.UnsupportedOpError, match=r"node 'getitem\w*' \(getitem\): result 1 of node 'max\w*' \(aten\.max\.dim\) is not supported"):
        compiler.compile(Fn(lambda x: torch.max(x, dim=1)[1].float()), (r(3, 4),))


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
