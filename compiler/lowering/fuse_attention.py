"""fuse-attention: matmul -> scale -> mask -> softmax -> matmul becomes one aicc_fused.attention.

A tensor-level pattern, run after the graph passes and CSE, rooted at the second matmul:

    s  = aicc.matmul q, k {transpose_rhs}     (or q @ kt, kt any value: k is kt with its last two
                                               dims swapped; a q or k scaled by a constant folds in (the
                                               exporter scales each by sqrt(scale));
                                               a bias is an additive mask when nothing scales s)
    sc = s * c | c * s | s / c                (c a scalar constant: scale = c or 1/c; optional)
    t  = sc + m | m + sc                      (additive mask, broadcast to the scores)
       | select(m, sc, f) | select(m, f, sc)  (boolean mask: keep / drop; f a scalar constant)
    p  = aicc.softmax t {axis = last}         (or written out: e = exp(t - max(t)); e / sum(e))
       [p = select(p != p, 0, p)]             (optional NaN guard, as torch.onnx.export writes
                                               it: fused only when no row can be all masked,
                                               i.e. no mask or a constant one keeping a key in
                                               every row; the fused op gives NaN there)
    o  = aicc.matmul p, v

becomes

    %init = tensor.empty()
    %o = aicc_fused.attention ins(q, k, v[, m]) outs(%init) {scale, mask, fill, causal, *_perm}

Every intermediate (s, sc, t, the softmax's pieces, p) must have no other use: each is dropped.
Transposes feeding q, k or v, and one transpose consuming o, fold into the op's permutations
(a head split `(x @ W).reshape(L, H, E).transpose(1, 0, 2)` reads straight out of x @ W). A
constant mask that is exactly the causal one (a boolean tril kept, a boolean triu dropped, or
0 / -inf), with -inf as the masked value, becomes `causal` and no operand: lower-attention then
skips the key blocks above the diagonal.

Scaling by 1/c instead of dividing by c rounds differently, within an ulp of each score.

Both targets run the pass: lower-attention lowers the op on the CPU, map-to-gpu on CUDA. The
CUDA pipeline sets `max_head_dim` (what its kernel keeps in registers, 128) and `f32_only`: an
attention outside those stays the unfused ops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from xdsl.context import Context
from xdsl.dialects import tensor
from xdsl.dialects.builtin import Float32Type, ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import VerifyException
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from compiler.dialects import aicc
from compiler.dialects.aicc_fused import AttentionOp


def _owner(v: SSAValue, cls):
    return v.owner if isinstance(v.owner, cls) else None


def _only_use(v: SSAValue, user: Operation) -> bool:
    return all(u.operation is user for u in v.uses)


def _scalar(v: SSAValue) -> float | None:
    """The value of a constant whose elements are all one number."""
    c = _owner(v, aicc.ConstantOp)
    if c is None:
        return None
    a = aicc.numpy_from_dense(c.value)
    if a.size == 0 or not np.issubdtype(a.dtype, np.floating):
        return None
    first = a.reshape(-1)[0]
    return float(first) if np.all(a == first) or np.all(np.isnan(a)) and np.isnan(first) else None


def _constant(v: SSAValue) -> np.ndarray | None:
    c = _owner(v, aicc.ConstantOp)
    return aicc.numpy_from_dense(c.value) if c is not None else None


def _last_axis(op: aicc.ReduceOp, rank: int) -> bool:
    return list(op.axes.get_values()) == [rank - 1] and op.keepdims.value.data


@dataclass
class Match:
    p: SSAValue
    scores: SSAValue  # the softmax input
    dead: list[Operation] = field(default_factory=list)  # ops the attention replaces
    q: SSAValue | None = None
    k: SSAValue | None = None
    k_swapped: bool = False  # k is given as (..., E, S)
    scale: float = 1.0
    mask: SSAValue | None = None
    mask_kind: str | None = None
    fill: float = -math.inf


def match_softmax(p: SSAValue) -> tuple[SSAValue, list[Operation]] | None:
    """(t, ops) when p = softmax(t) along the last axis, as one op or written out."""
    rank = len(p.type.get_shape())
    sm = _owner(p, aicc.SoftmaxOp)
    if sm is not None:
        return (sm.input, [sm]) if sm.axis.value.data == rank - 1 else None
    div = _owner(p, aicc.DivOp)
    if div is None:
        return None
    e, z = div.lhs, div.rhs
    total = _owner(z, aicc.ReduceSumOp)
    exp = _owner(e, aicc.ExpOp)
    if total is None or exp is None or total.input != e or not _last_axis(total, rank):
        return None
    sub = _owner(exp.input, aicc.SubOp)
    if sub is None:
        return None
    mx = _owner(sub.rhs, aicc.ReduceMaxOp)
    t = sub.lhs
    if mx is None or mx.input != t or not _last_axis(mx, rank):
        return None
    if not (_only_use(z, div) and _only_use(exp.input, exp) and _only_use(sub.rhs, sub)):
        return None
    if {u.operation for u in e.uses} != {div, total}:
        return None
    if {u.operation for u in t.uses} != {sub, mx}:
        return None
    return t, [div, total, exp, sub, mx]


def _user(v: SSAValue) -> set[Operation]:
    return {u.operation for u in v.uses}


def _nan_guard(p: SSAValue) -> tuple[SSAValue, list[Operation]] | None:
    """(x, ops) when p = select(x != x, 0, x): NaN replaced by 0 (ONNX exports of torch's
    scaled_dot_product_attention guard the softmax with Where(IsNaN(p), 0, p))."""
    sel = _owner(p, aicc.SelectOp)
    if sel is None or _scalar(sel.lhs) != 0.0:
        return None
    x = sel.rhs
    cmp = _owner(sel.cond, aicc.CompareOp)
    if cmp is None or cmp.predicate.data != "ne" or cmp.lhs != x or cmp.rhs != x:
        return None
    if x.type != p.type or not _only_use(sel.cond, sel) or _user(x) != {sel, cmp}:
        return None
    return x, [sel, cmp]


def _no_empty_rows(m: Match) -> bool:
    """Does every row of the scores keep a key whatever q and k hold? (no mask, or a constant
    mask that leaves each row a finite entry): then softmax yields NaN only from NaN or
    infinite scores."""
    if m.mask is None:
        return True
    c = _constant(m.mask)
    if c is None:
        return False
    if c.ndim == 0:
        c = c.reshape(1)
    if m.mask_kind == "add":
        return not np.any(np.all(np.isneginf(c), axis=-1))
    if m.fill != -math.inf:
        return True
    keep = c.astype(bool) if m.mask_kind == "keep" else ~c.astype(bool)
    return bool(np.all(np.any(keep, axis=-1)))


def match(root: aicc.MatmulOp) -> Match | None:
    if root.bias is not None or root.trans_lhs or root.trans_rhs:
        return None
    p = root.lhs
    if not _only_use(p, root):
        return None
    guard = _nan_guard(p)
    guard_ops: list[Operation] = []
    if guard is not None:
        p, guard_ops = guard
    sm = match_softmax(p)
    if sm is None:
        return None
    t, softmax_ops = sm
    m = Match(p, t, dead=[*guard_ops, *softmax_ops])
    consumers = {o for o in softmax_ops if t in o.operands}  # the softmax's ops that read t

    # mask
    sc = t
    add = _owner(t, aicc.AddOp)
    sel = _owner(t, aicc.SelectOp)
    if add is not None:
        for scores, mask in ((add.lhs, add.rhs), (add.rhs, add.lhs)):
            if _scores_chain(scores) and scores.type.get_shape() == t.type.get_shape():
                sc, m.mask, m.mask_kind = scores, mask, "add"
                break
        else:
            return None
    elif sel is not None:
        fill_rhs, fill_lhs = _scalar(sel.rhs), _scalar(sel.lhs)
        if fill_rhs is not None and sel.lhs.type.get_shape() == t.type.get_shape():
            sc, m.mask, m.mask_kind, m.fill = sel.lhs, sel.cond, "keep", fill_rhs
        elif fill_lhs is not None and sel.rhs.type.get_shape() == t.type.get_shape():
            sc, m.mask, m.mask_kind, m.fill = sel.rhs, sel.cond, "drop", fill_lhs
        else:
            return None
    if sc is not t:
        if not all(u in consumers for u in _user(t)) or not _only_use(sc, t.owner):
            return None
        m.dead.append(t.owner)
        consumers = {t.owner}

    # scale
    s = sc
    mul, div = _owner(sc, aicc.MulOp), _owner(sc, aicc.DivOp)
    if mul is not None:
        for a, b in ((mul.lhs, mul.rhs), (mul.rhs, mul.lhs)):
            c = _scalar(b)
            if c is not None and _owner(a, aicc.MatmulOp) is not None and a.type == sc.type:
                s, m.scale = a, c
                break
    elif div is not None:
        c = _scalar(div.rhs)
        if c is not None and c != 0 and _owner(div.lhs, aicc.MatmulOp) is not None and div.lhs.type == sc.type:
            s, m.scale = div.lhs, 1.0 / c
    if s is not sc:
        if not all(u in consumers for u in _user(sc)) or not _only_use(s, sc.owner):
            return None
        m.dead.append(sc.owner)
        consumers = {sc.owner}
    elif not all(u in consumers for u in _user(sc)):
        return None

    # q @ k^T
    mm = _owner(s, aicc.MatmulOp)
    if mm is None or mm.trans_lhs or not all(u in consumers for u in _user(s)):
        return None
    if mm.bias is not None:  # fuse-linear-bias took an additive mask that nothing scales
        if m.mask is not None or s is not sc:
            return None
        m.mask, m.mask_kind = mm.bias, "add"
    m.dead.append(mm)
    m.q, m.k, m.k_swapped = mm.lhs, mm.rhs, not mm.trans_rhs
    for side in ("q", "k"):  # q and k scaled by constants (each by sqrt(scale), say)
        v = getattr(m, side)
        mul = _owner(v, aicc.MulOp)
        if mul is None or not _only_use(v, mm):
            continue
        for a, b in ((mul.lhs, mul.rhs), (mul.rhs, mul.lhs)):
            c = _scalar(b)
            if c is not None and a.type == v.type:
                setattr(m, side, a)
                m.scale *= c
                if mul not in m.dead:  # q and k one value: one op, scaling both
                    m.dead.append(mul)
                break
    if guard_ops and not _no_empty_rows(m):
        return None  # an all-masked row: the guard's 0 where the fused op gives NaN
    return m


def _scores_chain(v: SSAValue) -> bool:
    """Could v be scale * (q @ k^T)? (which side of an add is the scores)"""
    if _owner(v, aicc.MatmulOp) is not None:
        return True
    op = _owner(v, aicc.MulOp) or _owner(v, aicc.DivOp)
    return op is not None and any(_owner(x, aicc.MatmulOp) is not None for x in op.operands)


def _through_transpose(v: SSAValue, perm: list[int]) -> tuple[SSAValue, list[int]]:
    """(stored value, perm) with logical = transpose(stored, perm), absorbing a transpose op
    that produces v."""
    tr = _owner(v, aicc.TransposeOp)
    if tr is None:
        return v, perm
    inner = list(tr.perm)
    return tr.input, [inner[p] for p in perm]


def _swap_last(rank: int) -> list[int]:
    return [*range(rank - 2), rank - 1, rank - 2]


def _causal(m: Match, L: int, S: int) -> bool:
    """Is the constant mask exactly top-left causal, with masked scores at -inf?"""
    c = _constant(m.mask) if m.mask is not None else None
    if c is None or c.ndim > 2 and any(d != 1 for d in c.shape[:-2]):
        return False
    try:  # a mask the same for every batch entry, possibly a splat (L = S = 1)
        c = np.broadcast_to(c.reshape(c.shape[-2:] if c.ndim >= 2 else c.shape), (L, S))
    except ValueError:
        return False
    tril = np.tril(np.ones((L, S), bool))
    if m.mask_kind in ("keep", "drop"):
        keep = c.astype(bool) if m.mask_kind == "keep" else ~c.astype(bool)
        return m.fill == -math.inf and np.array_equal(keep, tril)
    return bool(np.all(c[tril] == 0) and np.all(c[~tril] == -np.inf))


@dataclass
class FuseAttentionPattern(RewritePattern):
    max_head_dim: int = 0  # 0: any
    f32_only: bool = False

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc.MatmulOp, rewriter: PatternRewriter) -> None:
        m = match(op)
        if m is None or m.q is None or m.k is None:
            return
        if self.max_head_dim and max(m.q.type.get_shape()[-1], op.rhs.type.get_shape()[-1]) \
                > self.max_head_dim:
            return  # a head dim the target's attention kernel does not take: stays unfused
        if self.f32_only and not all(isinstance(x.type.element_type, Float32Type)
                                     for x in (m.q, m.k, op.rhs, op.result)):
            return
        rank_k = len(m.k.type.get_shape())
        k_perm = _swap_last(rank_k) if m.k_swapped else list(range(rank_k))
        q, q_perm = _through_transpose(m.q, list(range(len(m.q.type.get_shape()))))
        k, k_perm = _through_transpose(m.k, k_perm)
        v, v_perm = _through_transpose(op.rhs, list(range(len(op.rhs.type.get_shape()))))
        L, S = m.scores.type.get_shape()[-2:]
        causal = _causal(m, L, S)
        inputs = [q, k, v]
        if m.mask is not None and not causal:
            inputs.append(m.mask)

        result, out_perm = op.result, list(range(len(op.result.type.get_shape())))
        users = _user(op.result)
        replaced: Operation = op
        if len(users) == 1:
            (tr,) = users
            if isinstance(tr, aicc.TransposeOp):  # write the result in the transposed layout
                replaced, result = tr, tr.result
                out_perm = [list(tr.perm).index(i) for i in range(len(tr.perm))]
        attrs = AttentionOp.make_attributes(
            m.scale, causal, None if causal else m.mask_kind, m.fill,
            {"q": q_perm, "k": k_perm, "v": v_perm, "out": out_perm})
        rtype = result.type
        assert isinstance(rtype, TensorType)
        empty = tensor.EmptyOp([], rtype)
        att = AttentionOp(inputs, [empty.tensor], [rtype], attrs)
        try:
            att.verify()
        except VerifyException:  # a layout the op cannot express: leave the graph alone
            att.erase(safe_erase=False)
            empty.erase(safe_erase=False)
            return
        rewriter.insert([empty, att], InsertPoint.before(replaced))
        rewriter.replace(replaced, [], [att.res[0]])
        if replaced is not op:
            rewriter.erase(op)
        for dead in m.dead:  # outermost consumer first
            rewriter.erase(dead)


@dataclass(frozen=True)
class FuseAttention(ModulePass):
    """Scaled, masked softmax attention becomes one aicc_fused.attention op."""

    name = "fuse-attention"

    # The largest head dim (q's and k's E, v's F) to fuse; 0: any. The CUDA pipeline sets it to
    # what its attention kernel keeps in registers.
    max_head_dim: int = 0
    f32_only: bool = False  # the CUDA kernel's q, k, v and result are f32

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(FuseAttentionPattern(self.max_head_dim, self.f32_only),
                             apply_recursively=False).rewrite_module(op)


__all__ = ["FuseAttention", "match", "match_softmax"]
