"""The PyTorch frontend's indexing, scatter, sort and scan ops that real models need (the
zoo, benchmarks/zoo.py): advanced indexing with several index tensors, index_put, scatter /
scatter_add / scatter_reduce, cumprod, sort / argsort / topk, and the ops torch.export
decomposes into them (repeat_interleave, einsum, instance norm, ...). Each against eager torch
on odd shapes; tolerances as in tests/test_torch_import.py (exact for integer results).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import compiler  # noqa: E402
from tests.test_torch_import import Fn, check, ints, r, red, signed_ints  # noqa: E402


# -- advanced indexing ---------------------------------------------------------------------------

@pytest.mark.parametrize("fn, shapes", [
    pytest.param(lambda x, i, j: x[i, j], ((7, 5, 3), (2, 3), (2, 3)), id="leading-pair"),
    pytest.param(lambda x, i, j: x[:, i, j], ((2, 7, 5, 3), (4,), (4,)), id="adjacent-middle"),
    pytest.param(lambda x, i, j: x[i, :, j], ((7, 3, 5), (2, 1), (1, 4)), id="split-broadcast"),
    pytest.param(lambda x, i, j: x[:, i, :, j], ((2, 7, 3, 5, 1), (3,), (3,)), id="split-middle"),
    pytest.param(lambda x, i, j: x[i, j, i], ((7, 5, 7), (6,), (6,)), id="three"),
])
def test_index_several_tensors(fn, shapes):
    xs, i, j = shapes[0], shapes[1], shapes[2]
    idx_i = signed_ints(3, *i)  # negative indices count from the end
    idx_j = ints(5, *j)  # every second index tensor reads a dim of size >= 5
    check(Fn(fn), (r(*xs), idx_i, idx_j))


def test_index_several_tensors_int_data():
    check(Fn(lambda x, i, j: x[i, j] * 2), (ints(100, 6, 5), ints(6, 3, 2), ints(5, 2)))


def test_index_constant_out_of_range_is_refused():
    def fn(x):
        return x[torch.tensor([0, 5]), torch.tensor([1, 1])]

    with pytest.raises(compiler.UnsupportedOpError, match="out-of-range indices"):
        compiler.compile(Fn(fn), (r(3, 4),))


# -- writes by index -----------------------------------------------------------------------------

def _set(x, key, v):
    x = x.clone()
    x[key] = v
    return x


def _put(x, idx, v, accumulate=False):
    x = x.clone()
    x.index_put_(idx, v, accumulate=accumulate)
    return x


@pytest.mark.parametrize("fn, inputs", [
    pytest.param(lambda x, i, v: _put(x, (i,), v), (r(7, 5), torch.tensor([3, -1, 0]), r(3, 5, seed=1)), id="rows"),
    pytest.param(lambda x, i, v: _put(x, (i,), v, True), (r(7, 5), torch.tensor([3, 3, 0, 6]), r(4, 5, seed=1)),
                 id="rows-accumulate-duplicates"),
    pytest.param(lambda x, i, v: _set(x, (slice(None), i), v), (r(3, 9, 2), torch.tensor([8, 1]), r(3, 2, 2, seed=1)),
                 id="middle-dim"),
    pytest.param(lambda x, i, v: _put(x, (i, i.flip(0)), v[0, :, 0]), (r(6, 6, 3), torch.tensor([1, 4, 5]), r(1, 3, 3, seed=1)),
                 id="two-indices"),
    pytest.param(lambda x, i, v: _set(x, (i, slice(None), i.flip(0)), v[:, :, 0]), (r(5, 2, 5), torch.tensor([0, 2, 3]), r(3, 2, 1, seed=1)),
                 id="split"),
    pytest.param(lambda x, i, v: _put(x, (i,), torch.tensor(2.5)), (r(7, 5), torch.tensor([3, 1]), r(1)), id="scalar"),
])
def test_index_put(fn, inputs):
    check(Fn(fn), inputs, red(8))


def test_setitem_forms():
    def fn(x, i, m):
        y = x.clone()
        y[i] = 0.5                      # index_put with an index tensor
        y[:, 1:3] += 1.0                # slice_scatter
        y[m] = -1.0                     # boolean mask, one value
        y[m[:, 0], 2] = 10.0            # a mask and an int
        return y

    x = r(9, 4)
    check(Fn(fn), (x, torch.tensor([2, 7]), x > 0.8))


def test_index_put_int_and_bool():
    def fn(a, b, i):
        a = a.clone()
        b = b.clone()
        a[i] += a[i.flip(0)] * 3
        a.index_put_((i,), a[:2].clone(), accumulate=True)
        b[i] = torch.tensor(True)
        return a, b

    check(Fn(fn), (ints(50, 6, 3), ints(2, 6, 3).bool(), torch.tensor([4, 0])))


def test_index_add_copy():
    def fn(x, s, i):
        return x.index_add(1, i, s, alpha=2.0), x.index_copy(1, torch.tensor([4, 0, 2]), s)

    check(Fn(fn), (r(3, 5, 2), r(3, 3, 2, seed=1), torch.tensor([4, 4, 1])), red(4))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    def fn(x, i, s):
        return x.scatter_reduce(1, i, s, reduce, include_self=include_self)

    check(Fn(fn), (r(4, 7), ints(7, 4, 9), r(4, 9, seed=1)), red(9))


def test_scatter_forms():
    def fn(x, i, s, a):
        return (x.scatter(0, i, s), x.scatter(1, i[:, :3] % 3, 1.5), x.scatter_add(0, i, s),
                a.scatter_add(1, i % 5, a), torch.zeros(5, 5).scatter_(0, i[:1, :5] % 5, 1.0, reduce="add"),
                F.one_hot(i[0] % 6, 6))

    x = r(5, 6)
    check(Fn(fn), (x, ints(5, 5, 6), r(5, 6, seed=1), ints(9, 5, 6)), red(5))


# -- ordering and scans --------------------------------------------------------------------------

def test_sort_argsort_topk():
    def fn(x, a):
        v, i = torch.sort(x, dim=1)
        vd, id_ = torch.sort(x, dim=0, descending=True, stable=True)
        tv, ti = torch.topk(x, 3, dim=-1)
        sv, si = torch.topk(x, 2, dim=0, largest=False)
        return v, i, vd, id_, tv, ti, sv, si, torch.argsort(a, dim=1, stable=True), torch.sort(a, 1)[0], x.msort()

    check(Fn(fn), (r(5, 9), ints(4, 5, 9)))


def test_sort_ties_are_stable():
    """A stable sort keeps tied elements in index order, both ways (torch leaves the order of
    topk's ties unspecified: aicc's are in index order, its values are the same)."""
    x = torch.tensor([[1.0, 3.0, 3.0, 0.5, 3.0, -1.0, 0.5]])
    check(Fn(lambda x: (*torch.sort(x, stable=True), *torch.sort(x, descending=True, stable=True),
                        torch.topk(x, 4)[0])), (x,))


def test_cumprod():
    def fn(x, a):
        return torch.cumprod(x, 1), torch.cumprod(x, 0), torch.cumprod(a, -1), x.cumprod(dim=1, dtype=torch.float32)

    check(Fn(fn), (r(4, 11) * 0.5 + 1.0, ints(3, 4, 11) - 1), red(11))


def test_scans_and_search():
    def fn(x, a, b):
        cm, ci = torch.cummax(x, 1)
        nm, ni = torch.cummin(a, 0)
        return (cm, ci, nm, ni, torch.logcumsumexp(x * 20, 1), torch.bucketize(x, b),
                torch.bucketize(x, b, right=True, out_int32=True), torch.searchsorted(b, x),
                torch.searchsorted(b, x, side="right"), torch.searchsorted(x.sort(1)[0], x[:, :3]))

    x = r(5, 9)
    check(Fn(fn), (torch.cat([x, x[:, :2]], 1), ints(3, 6, 4), torch.tensor([-1.0, -0.25, 0.0, 0.5, 1.5])), red(11))


# -- elementwise, indexing and distances -----------------------------------------------------------

def test_atan2_and_float_classes():
    def fn(y, x):
        z = torch.log(x)  # NaN below 0, -inf at 0
        return (torch.atan2(y, x), torch.atan2(y, torch.zeros_like(x)), torch.isnan(z), torch.isinf(z / x),
                torch.isfinite(z), torch.nan_to_num(z), torch.nan_to_num(z, nan=1.0, neginf=-7.0))

    x = r(6, 7, seed=1)
    x[0, :3] = 0.0
    y = r(6, 7)
    y[1, 1] = 0.0
    check(Fn(fn), (y, x))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag(mode):
    w = r(11, 5, seed=3)

    def fn(i, o, psw):
        two_d = F.embedding_bag(i.view(3, 4), w, mode=mode)
        offs = F.embedding_bag(i, w, o, mode=mode, padding_idx=2)
        extra = (F.embedding_bag(i, w, o, mode="sum", per_sample_weights=psw),) if mode == "sum" else ()
        return (two_d, offs, *extra)

    check(Fn(fn), (ints(11, 12), torch.tensor([0, 3, 3, 10]), r(12, seed=1)), red(12))


def test_diagonal_and_cdist():
    def fn(x, a, b):
        return (torch.diagonal(x), torch.diagonal(x, 2), torch.diagonal(x, -1, 1, 2), x[0].trace(),
                torch.diagonal(a, 0, 0, 1),
                torch.cdist(a, b), torch.cdist(a, b, p=1.0), torch.cdist(a, b, p=3.0), torch.cdist(a, b, p=float("inf")))

    check(Fn(fn), (r(4, 5, 6), r(7, 3), r(4, 3, seed=1)), red(8))


# -- ops that torch.export decomposes into handled ones ------------------------------------------

def test_decomposed_ops_real_models_use():
    """einsum, instance norm, repeat_interleave, broadcasting where / masked_fill, chunk /
    unbind, one_hot, pixel_shuffle, unfold, normalize: decomposed by torch.export into ops
    the frontend handles; int64 index arithmetic and bool logic on the way."""
    def fn(x, v, i):
        return (torch.einsum("bij,jk->bik", x[0].transpose(1, 2), v.t()), torch.einsum("bchw->bhc", x).contiguous(),
                F.instance_norm(x), v.repeat_interleave(3, dim=0), v.repeat_interleave(2),
                torch.where(v > 0, v, torch.zeros(5)), v.masked_fill(v[0] > 0, -1.0),
                v.chunk(3, 0)[1], v.unbind(1)[2], F.one_hot(i % 6, 6), F.pixel_shuffle(x[:, :4], 2),
                F.unfold(x, 2), F.normalize(v, dim=1), (i * 7 + 3) // 2 % 5 - i.abs().max(),
                ((v > 0) ^ (v < 1)) & ~(v == 0) | (i.sum() > 3))

    check(Fn(fn), (r(2, 6, 5, 7), r(6, 5, seed=1), signed_ints(9, 4)), red(8))


@pytest.mark.parametrize("kw", [
    dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=2, stride=1, dilation=2),
    dict(kernel_size=3, stride=2, ceil_mode=True),
], ids=["2x2", "3x3-s2-p1", "dilated", "ceil"])
def test_max_pool_indices_and_unpool(kw):
    def fn(x):
        y, i = F.max_pool2d(x, return_indices=True, **kw)
        if kw.get("dilation", 1) == 1 and kw.get("stride", kw["kernel_size"]) == kw["kernel_size"]:
            return y, i, F.max_unpool2d(y, i, kw["kernel_size"], output_size=x.shape[-2:])
        return y, i

    x = r(2, 3, 7, 9)
    x[0, 0, :2, :2] = 1.0  # a tie: the first maximum of the window is the one torch returns
    check(Fn(fn), (x,))
    check(Fn(lambda x: F.max_pool1d(x, 3, return_indices=True)[1]), (r(2, 10),))
