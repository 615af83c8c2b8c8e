"""bufferize: linalg on tensors -> linalg on memrefs, with results as out-parameters.

xDSL has no general bufferization; ours covers what the tensor-to-linalg lowering produces,
where every function body is one straight-line block:

  * function arguments become memrefs; each result becomes a trailing out-parameter memref,
    so the caller (the runtime) allocates outputs and the function returns nothing;
  * each op writing into a `tensor.empty` gets a fresh `memref.alloc`; tensor constants become `memref.global` constants
    read with `memref.get_global` (identical constants share one global);
  * a destination-passing linalg op writes into the buffer of its `outs` operand; when that
    tensor is read again later, the op writes into a fresh copy instead (no clobbering);
  * `tensor.collapse_shape` / `tensor.expand_shape` become memref views of the same buffer;
  * a returned value whose buffer is a fresh allocation, or a reshape of one (static shapes),
    is computed straight into the out-parameter, or the same reshape of it (the allocation
    disappears); anything else is copied into it;
  * every remaining allocation is freed right after its last use (or that of a view of it).

Any other op on tensors is an error, not silently kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func, memref, tensor
from xdsl.dialects.linalg import abstract_ops, ops as linalg
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FunctionType,
    MemRefType,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from compiler.dialects.shapes import is_dynamic, shape_of
from compiler.errors import UnsupportedOpError
from compiler.lowering.dims import DimMaterializer, record_arg_dims
from compiler.lowering.utils import is_before, reshaped_view, view_root

VIEW_OPS = (memref.CollapseShapeOp, memref.ExpandShapeOp)


def memref_type(t: Attribute) -> Attribute:
    """The memref of a tensor type; a dynamic dim stays `?` (its expression is the tensor's
    encoding, which `_fresh` materializes)."""
    if isinstance(t, TensorType):
        return MemRefType(t.element_type, t.get_shape())
    return t


class _FunctionBufferizer:
    def __init__(self, fn: func.FuncOp, globals_: _Globals):
        self.fn = fn
        self.globals = globals_
        self.buffers: dict[SSAValue, SSAValue] = {}
        self.replaced: list[Operation] = []  # tensor ops, erased once nothing reads them
        self._dims: DimMaterializer | None = None  # made on the first dynamic allocation

    def run(self) -> None:
        fn = self.fn
        block = fn.body.block
        record_arg_dims(fn)
        original_args = list(block.args)
        in_types = [memref_type(t) for t in fn.function_type.inputs]
        out_types = [memref_type(t) for t in fn.function_type.outputs]
        for arg in block.args:
            if isinstance(arg.type, TensorType):
                new = block.insert_arg(memref_type(arg.type), arg.index)
                new.name_hint = arg.name_hint
                self.buffers[arg] = new
        # The original tensor args now follow the new memref args; drop them once unused.
        out_params = [block.insert_arg(t, len(block.args)) for t in out_types]
        self._sig_args = [self.buffers.get(a, a) for a in original_args] + out_params

        # the function's ops in their order, for _read_after: the ops made while bufferizing
        # go in before the op being bufferized, so the original ops keep their order
        self.order = {op: i for i, op in enumerate(block.ops)}
        for op in list(block.ops):
            self._bufferize_op(op, out_params)
        for op in reversed(self.replaced):
            Rewriter.erase_op(op)

        for arg in list(block.args):
            if isinstance(arg.type, TensorType):
                block.erase_arg(arg)
        fn.function_type = FunctionType.from_lists(in_types + out_types, [])
        _insert_deallocs(block)


    # -- one op ----------------------------------------------------------------------------

    def _buf(self, v: SSAValue) -> SSAValue:
        return self.buffers.get(v, v)

    def _bufferize_op(self, op: Operation, out_params: list[SSAValue]) -> None:
        if isinstance(op, func.ReturnOp):
            self._bufferize_return(op, out_params)
            return
        if not any(isinstance(t, TensorType) for t in (*op.operand_types, *op.result_types)):
            return
        if isinstance(op, arith.ConstantOp) and isinstance(op.value, DenseIntOrFPElementsAttr):
            name = self.globals.get(op.value)
            new = memref.GetGlobalOp(name, memref_type(op.result.type))
            self._replace(op, new)
            self.buffers[op.result] = new.memref
        elif isinstance(op, tensor.EmptyOp):
            # No contents to keep: every op writing into it gets a fresh buffer (see _init_buffer),
            # also when CSE has merged several identical tensor.empty ops into one.
            self.replaced.append(op)
        elif isinstance(op, abstract_ops.LinalgStructuredOperation):
            self._bufferize_linalg(op)
        elif isinstance(op, tensor.CollapseShapeOp | tensor.ExpandShapeOp):
            cls = memref.CollapseShapeOp if isinstance(op, tensor.CollapseShapeOp) else memref.ExpandShapeOp
            props = dict(op.properties)
            operands = [self._buf(op.operands[0])]
            if cls is memref.ExpandShapeOp and is_dynamic(op.results[0].type):
                # the expanded dynamic sizes, from the result's symbolic dims
                operands += self._sizes(op.results[0].type, op)
            new = cls.create(
                operands=operands,
                result_types=[memref_type(op.results[0].type)],
                properties=props,
            )
            self._replace(op, new)
            self.buffers[op.results[0]] = new.results[0]
        else:
            raise UnsupportedOpError(op.name, f"bufferize: no bufferization of '{op.name}' on tensors")

    def _replace(self, old: Operation, new: Operation) -> None:
        Rewriter.insert_op(new, InsertPoint.before(old))
        self.replaced.append(old)

    def _sizes(self, t: TensorType, before: Operation) -> list[SSAValue]:
        """The dynamic sizes of a value of type `t`, computed before `before`."""
        if not is_dynamic(t):
            return []
        if self._dims is None:
            self._dims = DimMaterializer(self.fn, self._sig_args)
        return self._dims.sizes(Builder(InsertPoint.before(before)), shape_of(t))

    def _fresh(self, t: TensorType, before: Operation) -> SSAValue:
        sizes = self._sizes(t, before)
        alloc = memref.AllocOp.get(t.element_type, 64, t.get_shape(), dynamic_sizes=sizes)
        Rewriter.insert_op(alloc, InsertPoint.before(before))
        return alloc.memref

    def _buf_or_fresh(self, v: SSAValue, user: Operation) -> SSAValue:
        """An empty tensor read as a value (not a destination) still needs some buffer."""
        if isinstance(v.owner, tensor.EmptyOp):
            return self._fresh(v.type, user)
        return self._buf(v)

    def _bufferize_linalg(self, op: abstract_ops.LinalgStructuredOperation) -> None:
        inputs = [self._buf_or_fresh(v, op) for v in op.inputs]
        outputs = []
        for init in op.outputs:
            if isinstance(init.owner, tensor.EmptyOp):
                outputs.append(self._fresh(init.type, op))
                continue
            buf = self._buf(init)
            if _read_after(init, op, self.order):
                copy_into = self._fresh(init.type, op)
                Rewriter.insert_op(memref.CopyOp(buf, copy_into), InsertPoint.before(op))
                buf = copy_into
            outputs.append(buf)
        if isinstance(op, linalg.GenericOp):
            new = linalg.GenericOp(
                inputs, outputs, op.body.clone(), op.indexing_maps, op.iterator_types, (), op.doc
            )
        else:
            new = type(op)(inputs, outputs, [])
        new.attributes |= op.attributes
        for res, buf in zip(op.results, outputs):
            self.buffers[res] = buf
        self._replace(op, new)

    def _bufferize_return(self, op: func.ReturnOp, out_params: list[SSAValue]) -> None:
        written_to: dict[SSAValue, SSAValue] = {}  # allocation -> what replaces it (out, a view of it)
        views = []  # returned views of a redirected allocation: dead once the return goes
        for value, out in zip(op.arguments, out_params):
            buf = self._buf_or_fresh(value, op)
            buf = written_to.get(buf, buf)
            root = view_root(buf)
            owner = root.owner
            if isinstance(owner, memref.AllocOp) and (root is buf or not owner.dynamic_sizes):
                # Compute straight into the caller's buffer; a value returned through reshapes
                # of its allocation (a conv's (N, C, H*W) result returned as (N, C, H, W)) is
                # computed into the same view of the caller's buffer, made at the top of the
                # function (not between the ops that the target's passes fuse).
                new = out if root is buf else reshaped_view(
                    Builder(InsertPoint.at_start(self.fn.body.block)), out, root.type)
                written_to[root] = new
                root.replace_all_uses_with(new)
                Rewriter.erase_op(owner)
                if root is not buf:
                    views.append(buf)
            else:
                Rewriter.insert_op(memref.CopyOp(buf, out), InsertPoint.before(op))
        Rewriter.replace_op(op, func.ReturnOp())
        for view in views:
            while isinstance(view.owner, VIEW_OPS) and not view.uses:
                source = view.owner.operands[0]
                Rewriter.erase_op(view.owner)
                view = source


def _read_after(value: SSAValue, op: Operation, order: dict[Operation, int]) -> bool:
    """Is the tensor `value` used by an op after `op` (so writing its buffer in place clobbers it)?
    `order`: the block's original ops by position (Block.get_operation_index walks the block,
    which made bufferize quadratic: 59 of densenet121's 220 s of compile time); an op made
    since is placed by a walk out from it (is_before)."""
    block = op.parent_block()
    assert block is not None
    for use in value.uses:
        user = block.find_ancestor_op_in_block(use.operation)
        if user is not None and user is not op and _after(block, user, op, order):
            return True
        if isinstance(user, func.ReturnOp):
            return True
    return False


def _after(block: Block, a: Operation, b: Operation, order: dict[Operation, int]) -> bool:
    """Does `a` come after `b` in `block`?"""
    if a in order and b in order:
        return order[a] > order[b]
    return is_before(b, a)


def _insert_deallocs(block: Block) -> None:
    """Free each allocation after the last top-level op that uses it or a view of it."""
    order = {op: i for i, op in enumerate(block.ops)}
    for op in list(block.ops):
        if not isinstance(op, memref.AllocOp):
            continue
        last = op
        pending = [op.memref]
        while pending:
            value = pending.pop()
            for use in value.uses:
                user = block.find_ancestor_op_in_block(use.operation)
                if user is None:
                    continue
                if isinstance(user, VIEW_OPS):
                    pending.append(user.results[0])
                if order[user] > order[last]:
                    last = user
        if isinstance(last, func.ReturnOp):
            continue
        Rewriter.insert_op(memref.DeallocOp.get(op.memref), InsertPoint.after(last))


class _Globals:
    """Module-level constant buffers, one per distinct value."""

    def __init__(self, module: ModuleOp):
        self.module = module
        self.by_value: dict[tuple, str] = {}

    def get(self, value: DenseIntOrFPElementsAttr) -> str:
        key = (value.type, value.data.data)
        if key not in self.by_value:
            name = f"__constant_{len(self.by_value)}"
            t = memref_type(value.type)
            glob = memref.GlobalOp.get(
                StringAttr(name), t, value, sym_visibility=StringAttr("private"), constant=UnitAttr()
            )
            self.module.body.block.insert_op_before(glob, self.module.body.block.first_op)
            self.by_value[key] = name
        return self.by_value[key]


@dataclass(frozen=True)
class Bufferize(ModulePass):
    """Tensors to memrefs; results become out-parameters; temporaries are freed."""

    name = "bufferize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        globals_ = _Globals(op)
        for fn in list(op.ops):
            if isinstance(fn, func.FuncOp) and not fn.is_declaration:
                _FunctionBufferizer(fn, globals_).run()
