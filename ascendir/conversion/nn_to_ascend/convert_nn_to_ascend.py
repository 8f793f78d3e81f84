"""`convert-nn-to-ascend{target=ascend910b2}`: lower the nn module to ascend kernels.

Input: `func.func @main` over tensors (`arg_attrs`/`res_attrs` with `onnx.name`), nn ops,
`nn.weight @name`, `nn.fused` regions. `nn.constant` is normally moved into the WeightStore
first (`ascendir.conversion.nn_to_ascend.constants_to_weights`, as the driver does); one left in the module
becomes an `ascend.weight` carrying its value (attribute `value`), so `ascendir-opt` lowers
imported modules too.

Output: the module gets `ascend.arch` and `ascend.target` attributes, one `ascend.kernel` per nn
op (or per `nn.fused`) of a distinct signature (structurally identical ops, e.g. the same op in
every layer, launch one shared kernel: kernel_reuse.py), and a new `func.func @main` over GM memrefs (same arg/res attrs) whose
body is `ascend.weight` for each nn.weight, GM `ascend.alloc` for intermediates, `ascend.view`
for reshapes (free), `ascend.launch @kernel(...)` in program order, and `func.return`.

Every op and every `nn.fused` region goes through one `Template` (template.py,
registry.template_of): `plan` reads the op or region, `emit` launches its kernels from that plan
alone. The op families (kinds/ops/: elementwise, matmul, reduction, data movement, conv2d,
pool2d, topk) and the fused kinds (kinds/: matmul_epilogue, ffn, flash_attention, norm_matmul,
elementwise, conv_activation, add_rms_norm) wrap the kernel emitters of templates/. A region of
a kind without a template, or whose template declines it (`Declined(reason)`, listed in the
session), is lowered op by op from its body (its meaning).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from ascendir.dialects import ascend, nn
from ascendir.errors import AscendirError
from ascendir.session import DeclinedRegion, Session, session_of
from ascendir.hardware.config import DEFAULT_TARGET, HardwareConfig, load_target
from ascendir.conversion.nn_to_ascend import kernel_reuse
from ascendir.conversion.nn_to_ascend.decompose_attention import DecomposeAttention
from ascendir.conversion.nn_to_ascend.registry import template_of
from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext, gm_type


def describe(op: Operation, index: int) -> str:
    """How errors name an op: `nn.matmul #3` plus its ONNX node name when the importer kept one;
    a region `nn.fused #5 (ffn, from '<first ONNX node of its body>')`, since the fusion passes
    give the region itself no node name."""
    text = f"{op.name} #{index}"
    for key in ("onnx.node", "onnx.name"):
        attr = op.attributes.get(key)
        if isinstance(attr, StringAttr):
            return f"{text} ('{attr.data}')"
    if isinstance(op, nn.FusedOp):
        node = next((a.data for o in op.body.walk() if isinstance(a := o.attributes.get("onnx.node"), StringAttr)), None)
        return f"{text} ({op.kind.data}, from '{node}')" if node else f"{text} ({op.kind.data})"
    return text


def op_numbers(module: ModuleOp) -> dict[Operation, int]:
    """Each op's position among the module's ops of its name, in walk order: the `#n` of
    `describe`, the same in every pass (choose-tiling, this lowering) and for ops nested in
    regions."""
    numbers: dict[Operation, int] = {}
    count: dict[str, int] = {}
    for o in module.walk():
        numbers[o] = count.get(o.name, 0)
        count[o.name] = numbers[o] + 1
    return numbers


def onnx_nodes(op: Operation) -> str | None:
    """The ONNX node(s) an nn op computes, comma-separated: its own `onnx.node`, or for a fused
    region the distinct nodes of its body in program order; None when the importer kept none."""
    own = op.attributes.get("onnx.node") or op.attributes.get("onnx.name")
    if isinstance(own, StringAttr):
        return own.data
    if isinstance(op, nn.FusedOp):
        names = dict.fromkeys(a.data for o in op.body.walk() if isinstance(a := o.attributes.get("onnx.node"), StringAttr))
        return ", ".join(names) or None
    return None


def lower_block(ctx: LoweringContext, ops: list[Operation]) -> None:
    """Lower nn ops in program order; operand buffers come from `ctx.values`.

    Raises:
        AscendirError: an op without template, or a template's own error.
    """
    for op in ops:
        ctx.current = describe(op, ctx.numbers[op])
        ctx.onnx_nodes = onnx_nodes(op)
        if isinstance(op, (func.ReturnOp, nn.YieldOp)):
            continue
        if isinstance(op, nn.WeightOp):
            ctx.values[op.result] = ctx.emit(ascend.WeightOp(op.weight_name, gm_type(op.result.type))).results[0]
            continue
        if isinstance(op, nn.ConstantOp):
            # Only when run as a pass (ascendir-opt): the driver moves constants into the
            # WeightStore first. Here there is no store, so the IR keeps the value.
            weight = ascend.WeightOp(ctx.name("inline_const"), gm_type(op.result.type), op.value)
            ctx.values[op.result] = ctx.emit(weight).results[0]
            continue
        operands = [ctx.gm(v) for v in op.operands]
        if op.results and all(0 in r.type.get_shape() for r in op.results):
            # An empty result holds nothing to compute: a GM buffer and no kernel (the templates
            # tile by every dim, and a tile of 0 elements divides by zero).
            for r in op.results:
                ctx.values[r] = ctx.buffer(r.type.get_shape(), r.type.element_type)
            continue
        key = kernel_reuse.signature(op, operands)
        if key is not None and any(ctx.permuted_rows(v) is not None for v in operands):  # read through a dest
            key = (key, tuple(ctx.permuted_rows(v) is not None for v in operands))
        fragment = ctx.fragments.get(key) if key is not None else None
        if fragment is not None:
            results = fragment.replay(ctx, operands)
        else:
            last = ctx.host.last_op
            results = lower_op(ctx, op, operands)
            if key is not None and key not in ctx.fragments:
                first = last.next_op if last is not None else ctx.host.first_op
                ctx.fragments[key] = kernel_reuse.Fragment.record(first, operands, results, ctx.row_order)
        for r, buf in zip(op.results, results, strict=True):
            ctx.values[r] = buf


def lower_op(ctx: LoweringContext, op: Operation, operands: list[SSAValue]) -> list[SSAValue]:
    """Lower one nn op or nn.fused region through its template (registry.template_of): its
    `plan`, then its `emit`; returns the result buffers. A region whose kind has no template, or
    whose template declines it (the region and the reason go to `ctx.declined`; `emit` may
    decline too, before emitting anything, for what the target lacks), is lowered op by op from
    its body.

    Raises:
        AscendirError: an op without a template, or one its template declines; a template's own
            error."""
    template = template_of(op)
    plan = template.plan(op) if template is not None else None
    if plan is not None and not isinstance(plan, Declined):
        results = template.emit(ctx, plan, operands)
        if not isinstance(results, Declined):
            return results
        plan = results  # a refusal that depends on the target (emitted nothing)
    if not isinstance(op, nn.FusedOp):
        if plan is None:
            raise AscendirError(f"{ctx.current}: convert-nn-to-ascend has no template for {op.name}")
        raise AscendirError(f"{ctx.current}: the {template.kind} template cannot lower it: {plan.reason}")
    if plan is not None:
        ctx.declined.append(DeclinedRegion(ctx.current, str(op.kind.data), plan.reason))
    return lower_body(ctx, op, operands)


def lower_body(ctx: LoweringContext, op: nn.FusedOp, operands: list[SSAValue]) -> list[SSAValue]:
    """A region's body op by op (its meaning); returns the buffers of what it yields."""
    outer = ctx.current
    block = op.body.block
    for arg, buf in zip(block.args, operands):
        ctx.values[arg] = buf
    lower_block(ctx, list(block.ops))
    ctx.current = outer
    term = block.last_op
    assert isinstance(term, nn.YieldOp)
    return [ctx.gm(v) for v in term.values]


def lower_module(module: ModuleOp, target: HardwareConfig, session: Session | None = None, topology: str = "") -> None:
    """Replace the nn `@main` of `module` by kernels and a host `@main`, in place, for devices of
    `target` joined by `topology` (LoweringContext; "" = the default topology). Each region a
    template declined goes to `session.declined` and, as a note, to `session.notes` (once per
    distinct region: identical regions replay the first one's kernels).

    Raises:
        AscendirError: no @main, non-tensor signature, or any lowering error.
    """
    main = next((op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == "main"), None)
    if main is None:
        raise AscendirError("convert-nn-to-ascend: module has no func.func @main")
    ftype = main.function_type
    if not all(isinstance(t, TensorType) for t in (*ftype.inputs.data, *ftype.outputs.data)):
        raise AscendirError("convert-nn-to-ascend: @main must take and return tensors (already lowered?)")
    in_types = [gm_type(t) for t in ftype.inputs.data]
    out_types = [gm_type(t) for t in ftype.outputs.data]
    host = Block(arg_types=in_types)
    ctx = LoweringContext(target, host, topology)
    ctx.numbers = op_numbers(module)
    for arg, new in zip(main.body.block.args, host.args):
        ctx.values[arg] = new
    ops = list(main.body.block.ops)
    lower_block(ctx, ops)
    ret = ops[-1]
    assert isinstance(ret, func.ReturnOp)
    host.add_op(func.ReturnOp(*[ctx.gm(v) for v in ret.arguments]))
    new_main = func.FuncOp(
        "main", (in_types, out_types), Region(host), arg_attrs=main.arg_attrs, res_attrs=main.res_attrs
    )
    module.body.block.insert_ops_before([*ctx.kernels, new_main], main)
    module.body.block.erase_op(main)
    if session is not None:
        for d in ctx.declined:
            session.declined.append(d)
            session.note(f"convert-nn-to-ascend: {d.region}: the {d.kind} template declines it: {d.reason}; lowered op by op")
    module.attributes[ascend.ARCH_ATTR] = ascend.ArchAttr(ascend.Arch(target.arch.name))
    module.attributes[ascend.TARGET_ATTR] = ascend.TargetAttr(target.name)


@dataclass(frozen=True)
class ConvertNNToAscend(ModulePass):
    """Lower nn to ascend for `target`: a shipped chip name (ascend910b2, 910b2, ...) or a path
    to a TOML chip description; `topology` (a shipped topology's name or a TOML path, "" = the
    default one) is what MC2's chunk counts are chosen for."""

    name = "convert-nn-to-ascend"

    target: str = DEFAULT_TARGET
    topology: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # An nn.attention left unfused (or too big for the flash template on this chip) has no
        # template of its own: decompose it here too, so ascendir-opt lowers what `ascendir
        # compile` lowers (the driver already ran this before moving constants into the store).
        DecomposeAttention(target=self.target).apply(ctx, op)
        lower_module(op, load_target(self.target), session_of(ctx), self.topology)
