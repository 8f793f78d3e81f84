"""The compile path shared by the CLI, ascendir-opt users and the Python API.

    module, weights = compile_model("model.onnx", target="ascend910b2", opt_level="O2")
    result = simulate(module, weights, inputs, load_target("ascend910b2"))
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import IntegerType, ModuleOp, StringAttr, TensorType
from xdsl.dialects.func import FuncOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.exceptions import ArgSpecParseError, ParseError, VerifyException, DiagnosticException

from ascendir.session import Session, make_context
from ascendir.dtypes import to_numpy_dtype
from ascendir.dialects import nn
from ascendir.dialects.ascend import KernelOp
from ascendir.dialects.ir_checks import check_module, check_string_literals
from ascendir.dialects.ir_text import IRParser, IRPrinter
from ascendir.errors import AscendirError, not_utf8, one_line
from ascendir.hardware import load_target
from ascendir.hardware.config import DEFAULT_TARGET
from ascendir.pipelines import LOWERING, PIPELINES, ascend_lowering, available_passes, expand_pipelines, pass_name
from ascendir.weights import WeightStore

NAME_ATTR = "onnx.name"


def parse_pipeline(
    spec: str | None, opt_level: str = "O2", target: str | Path | None = None, tiling: str | None = None
) -> PassPipeline:
    """The nn-level pass pipeline: `spec` (xdsl-opt syntax, may name O0/O1/O2) or `opt_level`.

    `target` becomes the target of every `choose-tiling` that names none (it tiles for the chip
    being compiled for); `tiling` ("m=128,n=128,k=64") is forced on every matmul by that pass,
    which is appended when the pipeline has none (e.g. -O0). A pass whose own `target` option
    names another chip than `target` is an error (it would tile for a chip the module is not
    compiled for; chips are compared as loaded configurations, so a custom TOML keeping a shipped
    chip's name is another chip), as are ascend-level passes (ASCEND_LEVEL_PASSES) in this
    nn-level pipeline, and a `tiling` next to a choose-tiling that has its own `tiling` option.

    Raises:
        AscendirError: an unknown pass, option or pipeline name, an ascend-level pass, a pass
            target contradicting `target`, a malformed `tiling`, or `tiling` and a choose-tiling
            `tiling` option both given.
    """
    pipe = _parse_pipeline(spec, opt_level)
    if target is None and not tiling:
        return pipe
    from ascendir.transforms.nn.choose_tiling import ChooseTiling
    from ascendir.conversion.nn_to_ascend.tiling import parse_tiling

    if target is not None:
        hw = load_target(target)
        tdesc = str(target) if Path(str(target)).suffix == ".toml" else hw.name
        for p in pipe.passes:
            # a pass tiling (or deciding fit) for another chip than the one simulated / compiled
            # for would make choices that chip cannot use: say so rather than pick one. Compared
            # as resolved configurations, not names: a custom file keeping a shipped chip's
            # `name` with other buffer sizes is another chip.
            own = getattr(p, "target", "")
            if own and load_target(own) != hw:
                same = " (the same name, other parameters)" if load_target(own).name == hw.name else ""
                raise AscendirError(
                    f"bad pass pipeline: {p.name}{{target={own}}} contradicts --target {tdesc}{same} (the nn-level "
                    f"passes work for the chip being compiled for: drop the pass's target option or use --target {own})"
                )

    if tiling:
        parse_tiling(tiling)  # fail early on a malformed spec
        for p in pipe.passes:
            # two sources for one choice: which one the user meant is a guess, so ask
            if isinstance(p, ChooseTiling) and p.tiling:
                raise AscendirError(
                    f'--tiling {tiling} conflicts with the pass option choose-tiling{{tiling="{p.tiling}"}} in -p: give '
                    "the fields in one place"
                )
    passes = list(pipe.passes)
    if tiling and not any(isinstance(p, ChooseTiling) for p in passes):
        passes.append(ChooseTiling())
    tgt = str(target) if target is not None else ""
    passes = [
        replace(p, target=p.target or tgt, tiling=tiling or p.tiling) if isinstance(p, ChooseTiling) else p for p in passes
    ]
    return PassPipeline(tuple(passes))


# Passes over lowered (ascend dialect) kernels: on the nn-level pipeline they would find no
# kernel and do nothing; lowering runs them itself (pipelines.ascend_lowering).
ASCEND_LEVEL_PASSES = ("plan-memory", "insert-sync", "double-buffer")


def _parse_pipeline(spec: str | None, opt_level: str) -> PassPipeline:
    if spec is None:
        if opt_level not in PIPELINES:
            raise AscendirError(f"unknown optimization level '{opt_level}' (choose from {', '.join(PIPELINES)})")
        spec = PIPELINES[opt_level]
    if any(pass_name(p) == LOWERING for p in spec.split(",")):
        raise AscendirError(
            f"bad pass pipeline '{spec}': {LOWERING} is the lowering itself; compile / run lower after the nn-level "
            "pipeline (choose the chip with --target; ascendir-opt runs it explicitly)"
        )
    spec = expand_pipelines(spec)
    if not spec:
        return PassPipeline(())
    try:
        pipeline = PassPipeline.parse_spec(available_passes(spec), spec)  # other xDSL plugins' passes too
    except (Exception, ArgSpecParseError) as e:  # ValueError, or a syntax error (a BaseException in xDSL)
        raise AscendirError(f"bad pass pipeline '{spec}': {one_line(e)}") from None
    lowered = [p.name for p in pipeline.passes if p.name in ASCEND_LEVEL_PASSES]
    if lowered:
        raise AscendirError(
            f"bad pass pipeline '{spec}': {lowered[0]} is an ascend-level pass (it works on lowered kernels; "
            "compile / run apply it after lowering; run it alone with ascendir-opt on ascend IR)"
        )
    if any(p.name == "convert-nn-to-ascend" for p in pipeline.passes):
        raise AscendirError(
            f"bad pass pipeline '{spec}': it is the nn-level pipeline; convert-nn-to-ascend runs after it "
            "(choose the chip with --target; ascendir-opt runs it explicitly)"
        )
    return pipeline


def is_lowered(module: ModuleOp) -> bool:
    """True when the module is already in the ascend dialect: it has kernels, or the lowering
    marked it (`ascend.target`; a model of views only, a lone Squeeze, lowers to no kernel)."""
    return any(isinstance(op, KernelOp) for op in module.ops) or "ascend.target" in module.attributes


def lower(module: ModuleOp, weights: WeightStore | None, target: str | Path | None, session: Session | None = None,
          topology: str | Path | None = None) -> None:
    """nn → ascend in place, the one way in: the `ascend-lowering` pipeline for `target` (on
    `topology`, a name or TOML path, None = the default one: what MC2's chunk counts suit) with
    `weights` in its session (constants move into it; without a store they stay in the IR as
    valued `ascend.weight` ops).

    Raises:
        AscendirError: an op the lowering cannot map, or a tile that does not fit.
    """
    # The `ascend-lowering` pipeline (pipelines.ascend_lowering); the module is verified once,
    # after it (verifying the nn module again here would repeat the nn pipeline's check).
    run_passes(module, PassPipeline(ascend_lowering(str(target or DEFAULT_TARGET), str(topology or ""))), weights, session=session)


def run_passes(
    module: ModuleOp,
    pipeline: PassPipeline,
    weights: WeightStore | None = None,
    verify_inputs: dict[str, np.ndarray] | None = None,
    session: Session | None = None,
) -> Session:
    """Apply `pipeline` and verify; xDSL verify errors become one-line AscendirErrors.

    The passes share one `session` (a new one when None; its notes are echoed to stderr unless
    the caller's session collects them): `weights` go into it, readable to pattern passes (e.g.
    a causal mask stored as an initializer), and choose-tiling's search log and the passes'
    notes come out of it. With `verify_inputs` (nn-level modules only), every pass is checked
    numerically: the module is evaluated with `run_nn` before and after it on those inputs (see
    `verify_numerics`); a module holding collectives on every rank of their groups
    (spmd_reference; `NAME@r` keys of `verify_inputs` feed rank r, the session's `rank_stores`
    are a sharded module's weights).

    Returns:
        The session, with what the passes left in it.

    Raises:
        AscendirError: IR that fails to verify, or a pass that changes an output beyond tolerance.
    """
    session = session if session is not None else Session(echo_notes=True)
    if weights is not None:
        session.weights = weights
    passes = pipeline.passes if verify_inputs is not None else (pipeline,)
    try:
        before = _run_nn_or_none(module, session.weights, verify_inputs, session.rank_stores)
        for p in passes:
            if verify_inputs is None:
                p.apply(make_context(session), module)
            else:
                PassPipeline((p,)).apply(make_context(session), module)
            module.verify()
            if before is not None:
                after = _run_nn_or_none(module, session.weights, verify_inputs, session.rank_stores)
                compare_outputs(before, after, f"pass '{p.name}'")
                before = after
    except (VerifyException, DiagnosticException) as e:
        raise AscendirError(f"IR fails to verify: {one_line(e)}") from None
    return session


def run_pipeline(module: ModuleOp, spec: str, weights: WeightStore | None = None, session: Session | None = None) -> Session:
    """Apply a pass pipeline given as text, as `ascendir-opt -p` takes it, to `module` in place:
    nn-level or ascend-level passes, the named pipelines O0 / O1 / O2 and
    `ascend-lowering{target=...}`, other installed plugins' passes; then verify.

    Returns:
        The session the passes shared (notes, tiling search log, declined regions).

    Raises:
        AscendirError: an unknown pass or option, a syntax error, IR that fails to verify.
    """
    spec = expand_pipelines(spec)
    try:
        pipeline = PassPipeline.parse_spec(available_passes(spec), spec) if spec.strip() else PassPipeline(())
    except (Exception, ArgSpecParseError) as e:  # ValueError, or a syntax error (a BaseException in xDSL)
        raise AscendirError(f"bad pass pipeline '{spec}': {one_line(e)}") from None
    return run_passes(module, pipeline, weights, session=session)


def check_feeds(func: FuncOp, arrays: dict[str, np.ndarray], source: str, convert=None, devices: int = 0) -> dict[str, np.ndarray]:
    """The input arrays for the arguments of `func` (@main), checked: one key per graph input
    (optionally `input:`-prefixed; `output:` keys are ignored), each of the exact shape and
    element type (bfloat16 & co. saved as raw bytes, `|V2`, are viewed as their type).
    `convert(array, dtype)` may first turn an array into the argument's dtype (the CLI's
    `--dtype fp16` feeds f32 arrays to fp16 inputs) and returns None when it does not apply.
    With `devices` (run --devices), a key `NAME@R` feeds rank R: an input needs its plain key or
    one for every rank, and the result keeps the `NAME@R` keys. `source` names where the arrays
    came from in messages (`inputs x.npz`).

    Raises:
        AscendirError: a missing, unknown or doubled key, a wrong shape or element type; the
            message names the input.
    """
    files = [k for k in arrays if not k.startswith("output:")]
    base = io_names(func, results=False)
    names = [*base, *(f"{n}@{r}" for r in range(devices) for n in base)] if devices else list(base)
    by_name: dict[str, str] = {}
    for k in files:
        name = k.removeprefix("input:")
        if name in by_name:
            raise AscendirError(f"{source}: keys '{by_name[name]}' and '{k}' both give input '{name}'")
        by_name[name] = k
    missing = [n for n in base if n not in by_name and not (devices and all(f"{n}@{r}" in by_name for r in range(devices)))]
    if missing:
        raise AscendirError(f"{source} lack graph input(s) {', '.join(missing)} (keys: {', '.join(files) or 'none'})")
    unknown = [k for n, k in by_name.items() if n not in names]
    if unknown:
        raise AscendirError(f"{source}: key(s) {', '.join(unknown)} name no graph input (inputs: {', '.join(names) or 'none'})")
    types = list(func.function_type.inputs.data)
    feeds = {}
    for i, name in enumerate(names):
        if name not in by_name:
            continue
        ty = types[i % len(types)]
        arr, shape, dtype = np.asarray(arrays[by_name[name]]), tuple(ty.get_shape()), to_numpy_dtype(ty.element_type)
        if arr.dtype.kind == "V" and arr.dtype.itemsize == dtype.itemsize and dtype.kind == "V":
            arr = arr.view(dtype)
        if convert is not None and (converted := convert(arr, dtype)) is not None:
            arr = converted
        if arr.dtype != dtype:
            raise AscendirError(f"{source}: input '{name}' is {arr.dtype}, the model expects {dtype}")
        if arr.shape != shape:
            raise AscendirError(f"{source}: input '{name}' has shape {arr.shape}, the model expects {shape}")
        feeds[name] = arr
    return feeds


def _run_nn_or_none(module: ModuleOp, weights: WeightStore | None, inputs,
                    rank_stores: list[WeightStore] | None = None) -> dict[str, np.ndarray] | None:
    """The nn reference's outputs on `inputs` (None without). A module holding collectives runs
    on every rank of their groups (spmd_reference: rank r's outputs as `NAME@r`), with
    `rank_stores` (a sharded module's) or `weights` on every rank."""
    if inputs is None:
        return None
    from ascendir.interpreter.exec.nn_reference import run_nn
    from ascendir.interpreter.exec.spmd_reference import run_spmd_merged, spmd_ranks

    weights = weights if weights is not None else WeightStore()
    n = spmd_ranks(module)
    if n:
        return run_spmd_merged(module, rank_stores if rank_stores is not None else [weights] * n, inputs)
    return run_nn(module, weights, inputs)


# (rtol, atol relative to the largest |value| of the output) per numpy dtype kind/name: a rewrite
# may reorder float rounding (x / sqrt(v) vs x * (1 / sqrt(v))) but nothing more.
TOLERANCES = {"float64": (1e-9, 1e-10), "float32": (1e-4, 1e-5), "float16": (1e-2, 1e-3), "bfloat16": (3e-2, 1e-2)}


def compare_outputs(before: dict[str, np.ndarray], after: dict[str, np.ndarray], what: str) -> None:
    """Fail if an output of `after` differs from `before` beyond its dtype's tolerance:
    |after - before| <= rtol * |before| + atol * max(1, max |before|); integers and booleans exact,
    NaN only where NaN was.

    Raises:
        AscendirError: naming `what`, the output, the first differing index and both values.
    """
    for name, b in before.items():
        a = after.get(name)
        if a is None or a.shape != b.shape:
            raise AscendirError(f"{what} changed output '{name}' (shape {getattr(a, 'shape', None)} vs {b.shape})")
        if b.dtype.kind in "f" or b.dtype.name == "bfloat16":
            rtol, atol = TOLERANCES.get(b.dtype.name, TOLERANCES["float32"])
            b64, a64 = b.astype(np.float64), a.astype(np.float64)
            finite = np.isfinite(b64)
            scale = max(1.0, float(np.max(np.abs(b64[finite]), initial=0.0)))
            with np.errstate(invalid="ignore"):
                ok = np.abs(a64 - b64) <= rtol * np.abs(b64) + atol * scale
            ok |= (np.isnan(a64) & np.isnan(b64)) | (~finite & (a64 == b64))
        else:
            ok = a == b
        if not np.all(ok):
            idx = tuple(int(i) for i in np.argwhere(~ok)[0])
            raise AscendirError(
                f"{what} changed output '{name}' at index {list(idx)}: {b[idx]!r} before, {a[idx]!r} after "
                f"({int(np.count_nonzero(~ok))} of {ok.size} values beyond the {b.dtype} tolerance)"
            )


def compile_model(
    model: str | Path,
    target: str | Path | None = None,
    *,
    opt_level: str = "O2",
    pipeline: str | None = None,
    emit: str = "ascend",
    input_shapes: dict[str, tuple[int, ...]] | None = None,
    verify_numerics: bool = False,
    tiling: str | None = None,
    shape_only: bool = False,
    dtype: str = "fp32",
    session: Session | None = None,
) -> tuple[ModuleOp, WeightStore]:
    """Import an ONNX file (or parse IR text with weights beside it) and compile it.

    `emit` = "nn" stops after the nn-level pipeline; "ascend" lowers for `target`.
    `verify_numerics` checks every nn-level pass on seeded random inputs (see run_passes).
    `tiling` ("m=128,n=128,k=64") overrides choose-tiling's choice for every matmul.
    `shape_only` reads no external weight bytes (see import_onnx); incompatible with
    `verify_numerics`, whose checks would compare zeros.
    `dtype` (fp32, fp16, bf16) is the precision policy applied at import (see
    frontends/onnx/precision.py); IR input carries its own types, so only fp32 (no change) is
    accepted with it.
    `session` collects what the passes leave (choose-tiling's search log, notes); without one,
    notes go to stderr.

    Raises:
        AscendirError: any bad input (file, op, shape, pass pipeline, IR).
    """
    from ascendir.frontends.onnx import import_onnx

    if emit not in ("nn", "ascend"):
        raise AscendirError(f"--emit must be nn or ascend, got '{emit}'")
    load_target(target)  # fail early on a bad target
    if shape_only and verify_numerics:
        raise AscendirError("--verify-numerics needs the weights; drop --shape-only")
    path = Path(model)
    if path.suffix == ".onnx":
        module, weights = import_onnx(path, input_shapes, shape_only=shape_only, dtype=dtype)
    else:
        reject_onnx_options(path, input_shapes, dtype)
        module, weights = load_ir(path)
    if not is_lowered(module):
        feeds = random_inputs(module) if verify_numerics else None
        session = run_passes(module, parse_pipeline(pipeline, opt_level, target or DEFAULT_TARGET, tiling), weights, feeds, session)
        if session.rank_stores is not None:  # shard-tensor-parallel: the module is rank 0's, so are its weights
            weights = session.weights
        if emit == "ascend":
            lower(module, weights, target, session)
    elif emit == "nn":
        raise AscendirError(f"{path} is already lowered to the ascend dialect; cannot emit nn")
    else:
        reject_nn_options(path, pipeline, tiling)
    return module, weights


def reject_onnx_options(path: Path, input_shapes, dtype: str) -> None:
    """IR text has static shapes and carries its own element types: `--input-shape`, or `--dtype`
    other than fp32 (no change), would be ignored (a quantizing model's fp16 refusal skipped with
    it), so they are refused.

    Raises:
        AscendirError: `input_shapes` given, or `dtype` is not fp32."""
    if input_shapes:
        raise AscendirError(f"--input-shape applies to .onnx models; {path} is IR with static shapes")
    if dtype != "fp32":
        raise AscendirError(f"--dtype {dtype} applies to .onnx models; {path} is IR text, which carries its own types "
                            "(compile the model with --dtype)")


def reject_nn_options(path: Path, pipeline: str | None, tiling: str | None) -> None:
    """Already-lowered (ascend dialect) input: its kernels and tiles are fixed, so an nn-level
    pipeline or a tiling would be silently ignored.

    Raises:
        AscendirError: when `pipeline` (-p) or `tiling` (--tiling) is given."""
    if pipeline is not None:
        raise AscendirError(f"{path} is already lowered to the ascend dialect; -p (an nn-level pipeline) does not apply")
    if tiling:
        raise AscendirError(f"{path} is already lowered to the ascend dialect; --tiling (choose-tiling's fields) does not "
                            "apply: compile the nn-level IR or the model with it")


def weights_path(ir_path: str | Path) -> Path:
    """The WeightStore file written beside an IR file: `model.mlir` (or gzipped `model.mlir.gz`)
    → `model.weights.npz`.

    Raises:
        AscendirError: the path names no file (`.`, `/`)."""
    p = Path(ir_path)
    if not p.name:
        raise AscendirError(f"{p} names a directory, not an IR file")
    if p.suffix == ".gz" and p.stem:
        p = p.with_name(p.stem)
    return p.with_name(p.stem + ".weights.npz")


def load_ir(path: str | Path) -> tuple[ModuleOp, WeightStore]:
    """Parse an IR file (gzip-compressed too, as `compile -o m.mlir.gz` writes it) and load its
    `.weights.npz` (empty store if absent).

    Raises:
        AscendirError: unreadable file, broken gzip stream, parse error or verification failure.
    """
    import gzip
    import zlib

    path = Path(path)
    try:
        data = path.read_bytes()
        text = (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode()
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise AscendirError(f"cannot read {path}: broken gzip data ({e})") from None
    except OSError as e:
        raise AscendirError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:  # a binary or mis-encoded file
        raise AscendirError(f"cannot read {path}: {not_utf8(e)}") from None
    check_string_literals(text, str(path))  # before xDSL's lexer, which backtracks on a bad one
    parsed = False
    try:
        module = IRParser(make_context(), text, str(path)).parse_module()
        parsed = True
        module.verify()
        check_module(module)
    except ParseError as e:
        raise AscendirError(f"{path}: parse error: {one_line(e)}") from None
    except (VerifyException, DiagnosticException) as e:
        raise AscendirError(f"{path}: IR fails to verify: {one_line(e)}") from None
    except AscendirError as e:
        raise AscendirError(f"{path}: IR fails to verify: {e}") from None
    except RecursionError:
        raise AscendirError(f"{path}: regions or attributes nested too deeply to parse") from None
    except OverflowError as e:  # xDSL packs a dense literal (1e308 as f32) without a ParseError
        raise AscendirError(f"{path}: a literal does not fit its element type ({e})") from None
    except ValueError as e:  # xDSL's attributes check their range so (a subview size 2^64 as i64)
        if parsed:
            raise
        raise AscendirError(f"{path}: parse error: {one_line(e)}") from None
    wp = weights_path(path)
    if not wp.exists():
        return module, WeightStore()
    import zipfile

    hint = "(`ascendir compile -o` writes it beside the IR)"
    if not zipfile.is_zipfile(wp):  # np.load would try to unpickle it
        raise AscendirError(f"cannot read weights {wp}: not an .npz archive {hint}")
    try:
        return module, WeightStore.load(str(wp))
    except Exception as e:  # a damaged archive (BadZipFile, EOFError, OSError, ValueError)
        raise AscendirError(f"cannot read weights {wp}: {one_line(e)} {hint}") from None


def missing_weights(module: ModuleOp, weights: WeightStore) -> list[str]:
    """Names of the nn.weight / ascend.weight ops of `module` that `weights` lacks (an
    ascend.weight carrying its own `value` needs no entry), in program order."""
    from ascendir.dialects import ascend

    names: list[str] = []
    for op in module.walk():
        if isinstance(op, nn.WeightOp):
            name = op.weight_name
        elif isinstance(op, ascend.WeightOp) and op.value is None:
            name = op.sym.root_reference.data
        else:
            continue
        if name not in weights and name not in names:
            names.append(name)
    return names


def print_ir(module: ModuleOp) -> str:
    """The module in custom assembly format, user text (node / tensor names) in string literals
    as UTF-8 (ir_text.IRPrinter)."""
    buf = io.StringIO()
    IRPrinter(stream=buf).print_op(module)
    return buf.getvalue() + "\n"


def main_func(module: ModuleOp) -> FuncOp:
    """The `func.func @main` of a module.

    Raises:
        AscendirError: when there is none, or it is a declaration without a body.
    """
    for op in module.ops:
        if isinstance(op, FuncOp) and op.sym_name.data == "main":
            if not op.body.blocks:
                raise AscendirError("func.func @main is a declaration without a body")
            return op
    raise AscendirError("module has no func.func @main")


def io_names(func: FuncOp, results: bool) -> list[str]:
    """onnx.name of each argument (or result) of `func`, `arg{i}` / `out{i}` when absent."""
    attrs = func.res_attrs if results else func.arg_attrs
    n = len(func.function_type.outputs.data if results else func.function_type.inputs.data)
    names = []
    for i in range(n):
        d = attrs.data[i].data if attrs is not None else {}
        a = d.get(NAME_ATTR)
        names.append(a.data if isinstance(a, StringAttr) else f"{'out' if results else 'arg'}{i}")
    return names


def random_inputs(module: ModuleOp, seed: int = 0, vocab_hints: dict[str, int] | None = None) -> dict[str, np.ndarray]:
    """Seeded random inputs for @main: floats ~ N(0, 1); integer inputs feeding an embedding
    Gather take values in [0, table rows); names containing "mask" are all ones; other integers
    are in [0, 2).

    Raises:
        AscendirError: an input indexing a Gather table with no rows (no index is valid); inputs
            whose arrays and float64 draw exceed the host budget (costmodel/host_memory.py).
    """
    from ascendir.costmodel.host_memory import check_host_bytes, input_host_bytes

    func = main_func(module)
    check_host_bytes("the random inputs", *input_host_bytes(func, io_names(func, False), random=True))
    rng = np.random.default_rng(seed)
    hints = vocab_hints if vocab_hints is not None else gather_bounds(func)
    out = {}
    for name, t in zip(io_names(func, False), func.function_type.inputs.data):
        shape, elem = tuple(t.get_shape()), t.element_type
        dtype = to_numpy_dtype(elem)
        if isinstance(elem, IntegerType):
            if elem.width.data == 1:
                out[name] = rng.integers(0, 2, size=shape).astype(bool)
            elif "mask" in name.lower():
                out[name] = np.ones(shape, dtype)
            else:
                rows = hints.get(name, 2)
                if rows == 0 and math.prod(shape) > 0:
                    raise AscendirError(f"input '{name}' indexes a Gather table with no rows: no index is valid (give --inputs)")
                out[name] = rng.integers(0, max(rows, 1), size=shape).astype(dtype)
        else:
            out[name] = rng.standard_normal(shape).astype(dtype)
    return out


def gather_bounds(func: FuncOp) -> dict[str, int]:
    """For each integer argument of an nn-level @main that indexes an nn.gather (directly or
    through reshape/cast), the gathered axis' size: the valid token-id range."""
    bounds: dict[str, int] = {}
    for name, arg in zip(io_names(func, False), func.body.block.args):
        if not isinstance(arg.type, TensorType):
            continue
        frontier, seen = [arg], set()
        while frontier:
            v = frontier.pop()
            for use in v.uses:
                op = use.operation
                if id(op) in seen:
                    continue
                seen.add(id(op))
                if isinstance(op, nn.GatherOp) and use.index == 1:
                    size = nn.shape_of(op.input)[op.axis.value.data]
                    bounds[name] = min(bounds.get(name, size), size)
                elif isinstance(op, (nn.ReshapeOp, nn.CastOp, nn.IdentityOp)):
                    frontier.append(op.result)
    return bounds


def input_bounds_before_lowering(module: ModuleOp) -> dict[str, int]:
    """Token-id bounds of a module still in nn form (empty once lowered)."""
    return {} if is_lowered(module) else gather_bounds(main_func(module))


def parse_input_shapes(specs: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """`("input_ids=1x128", ...)` → {"input_ids": (1, 128)}.

    Raises:
        AscendirError: a malformed spec.
    """
    shapes = {}
    for spec in specs:
        name, _, dims = spec.partition("=")
        try:
            shapes[name] = tuple(int(d) for d in dims.lower().split("x")) if dims else ()
            if not name or any(d < 0 for d in shapes[name]):
                raise ValueError
        except ValueError:
            raise AscendirError(f"bad --input-shape '{spec}': expected NAME=DIMxDIM..., e.g. input_ids=1x128") from None
    return shapes


def simulate_ranks(modules: list[ModuleOp], weights: list[WeightStore | None], feeds: list[dict[str, np.ndarray]], target,
                   topology, timing_only: bool = False, trace: bool = False, moe_routing=None):
    """Run per-rank `modules` with per-rank `weights` and `feeds` on `topology` (a name, file or
    Topology) for `target`: the multi-device driver of `ascendir run --devices` (every rank the same
    module and store); a tensor-parallel run passes the shard pass's per-rank modules and stores.
    Returns rank 0's SimResult with every rank's outputs (rank r > 0 as `NAME@r`) and the cluster
    report. A timing-only run of symmetric ranks (cluster.symmetric_ranks) simulates rank 0 only.
    `moe_routing` (timing-only): MoE block name -> TopK indices, every device's (as simulate).

    Raises:
        AscendirError: as simulate_cluster."""
    from ascendir.hardware.topology import load_topology
    from ascendir.interpreter import simulate_cluster
    from ascendir.interpreter.sim.cluster import symmetric_ranks

    topology = load_topology(topology)
    # timing-only over symmetric ranks: rank 0 alone gives every rank's figures
    symmetric = timing_only and symmetric_ranks(modules, topology)
    results = simulate_cluster(modules, weights, feeds, target, topology, timing_only=timing_only, trace=trace, symmetric=symmetric,
                               moe_routing=moe_routing)
    first = results[0]
    for r, res in enumerate(results[1:], start=1):
        first.outputs.update({f"{k}@{r}": v for k, v in res.outputs.items()})
    return first


def lower_tensor_parallel(module: ModuleOp, weights: WeightStore, tp: int, target: str | Path | None,
                          sequence_parallel: bool = False, session: Session | None = None,
                          after_shard: Sequence[ModulePass] = (), topology: str | Path | None = None,
                          verify_inputs: dict[str, np.ndarray] | None = None, ep: int = 1) -> tuple[ModuleOp, list[WeightStore]]:
    """Shard an nn-level `module` (its nn pipeline already run) over `tp` devices
    (shard-tensor-parallel, Megatron-style; with `ep` > 1 instead, tp being 1: its routed experts
    over `ep` devices, shard-expert-parallel), run `after_shard` on it (the MC2 fusions of
    pipelines.after_shard at -O2) and lower it for `target` on `topology` (MC2's chunk counts are
    chosen for its links; None = the default topology): the module every rank runs and one
    WeightStore per rank (what the lowering moved into rank 0's store, the constants, is every
    rank's). The path of `ascendir run --tp` and `ascendir sweep --tp`.

    With `verify_inputs` (--verify-numerics), the shard pass and each `after_shard` pass are
    checked as run_passes checks a pass: every rank's outputs (spmd_reference) against the
    unsharded module's, then against the module before the pass.

    Raises:
        AscendirError: an op that cannot be split tp ways; a pass that changes an output beyond
            tolerance; as `lower`."""
    from ascendir.transforms.nn import shard_expert_parallel, shard_tensor_parallel

    before = _run_nn_or_none(module, weights, verify_inputs)
    if ep > 1:
        if tp > 1:
            raise AscendirError(f"expert parallelism ({ep}) with tensor parallelism ({tp}) is not supported yet")
        module, stores = shard_expert_parallel.shard_module(module, weights, ep, str(target or DEFAULT_TARGET), session)
        tp, name = ep, shard_expert_parallel.NAME
    else:
        module, stores = shard_tensor_parallel.shard_module(module, weights, tp, sequence_parallel, str(target or DEFAULT_TARGET), session)
        name = "shard-tensor-parallel"
    if before is not None:  # every rank's outputs equal the unsharded module's
        session = session if session is not None else Session(echo_notes=True)
        session.rank_stores = stores
        want = {f"{k}@{r}" if r else k: v for r in range(tp) for k, v in before.items()}
        compare_outputs(want, _run_nn_or_none(module, stores[0], verify_inputs, stores), f"pass '{name}'")
    if after_shard:
        run_passes(module, PassPipeline(tuple(after_shard)), stores[0], verify_inputs, session=session)
    lower(module, stores[0], target, session, topology)
    for store in stores[1:]:
        for name in stores[0]:
            if name not in store:
                store.add(name, stores[0][name])
    return module, stores
