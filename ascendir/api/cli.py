"""`ascendir`: compile ONNX models for Ascend NPUs and run them in the cycle-accounting interpreter.

    ascendir compile model.onnx -o model.mlir [--emit nn|ascend] [--target 910b2] [-p PIPELINE]
    ascendir run model.onnx [--inputs in.npz] [--outputs out.npz] [--report r.json] [--trace t.json] [--plots DIR]
    ascendir report r.json [--trace t.json] [--plots DIR]
    ascendir calibrate [--quick]
    ascendir sweep model.onnx --target 910b2 --target 910b4 --dtype fp16 [--tiling m=128,n=256] [-o t.csv] [--plot t.png]

Bad input (file, op, shape, IR) prints one line `error: ...` and exits with code 2. Output files
are written before the printed report; a reader that closes stdout early (`| head`) ends the
command silently with status 141, as SIGPIPE ends other Unix tools.
"""

from __future__ import annotations

import io
import json
import math
import os
import signal
import sys
import traceback
import warnings
import zipfile
from pathlib import Path

import click

from ascendir.errors import DEBUG_ENV, INTERNAL_ERROR_EXIT, AscendirError, AscendirWarning, internal_error, one_line
from ascendir.api.outputs import check_writable, is_stdout, output_kind, read_bytes, write_output, write_text

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # BLAS threads thrash on small tiles


_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click >= 8.2
_CLOSED_STDOUT = 128 + signal.SIGPIPE  # the status of a Unix tool killed by SIGPIPE


def _closed_stdout() -> None:
    """The reader closed stdout: discard what is still buffered and end quietly."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(_CLOSED_STDOUT)


def _Console(stderr: bool = False):
    """A rich Console that ends as other Unix tools do on a closed stdout (rich's own ends with
    status 1). rich is imported here, not at start-up: `ascendir --help` stays fast."""
    from rich.console import Console

    class QuietConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            _closed_stdout()

    return QuietConsole(stderr=stderr)


_show_warning = warnings.showwarning


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """An AscendirWarning is one line `warning: ...` on stderr; other warnings as Python shows them."""
    if issubclass(category, AscendirWarning):
        click.echo(f"warning: {message}", err=True)
    else:
        _show_warning(message, category, filename, lineno, file, line)


class _Group(click.Group):
    """Turns every AscendirError (and xDSL parse/verify error) and every bad command line into
    one line and exit code 2, and every AscendirWarning into one line `warning: ...`."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        warnings.showwarning = _one_line_warning
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except _NO_ARGS_IS_HELP as e:  # bare `ascendir`: the help text
            e.show()
            sys.exit(e.exit_code)
        except click.UsageError as e:  # click would print usage + hint + message on 4 lines
            hint = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
            click.echo(f"error: {one_line(click.ClickException(e.format_message()))}{hint}", err=True)
            sys.exit(e.exit_code)
        except click.ClickException as e:
            e.show()
            sys.exit(e.exit_code)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except AscendirError as e:  # clipped: a message may quote a user's 100 kB value
            click.echo(f"error: {one_line(e)}", err=True)
            sys.exit(2)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
            raise
        except BrokenPipeError:  # e.g. `ascendir compile m.onnx | head`
            _closed_stdout()
        except MemoryError as e:  # numerics of a model larger than this machine's memory
            click.echo(f"error: out of memory: {' '.join(str(e).split())} (--timing-only moves no data)", err=True)
            sys.exit(2)
        except Exception as e:  # an internal bug: one line, the traceback only on request
            if os.environ.get(DEBUG_ENV):
                traceback.print_exc()
            click.echo(internal_error(e), err=True)
            sys.exit(INTERNAL_ERROR_EXIT)


@click.group(cls=_Group)
@click.version_option(package_name="ascendir")
def main() -> None:
    """Compile ONNX models to the Ascend NPU dialect and simulate them."""


_target_opt = click.option(
    "--target", default="ascend910b2", show_default=True,
    help="Chip name (a file of ascendir/hardware/chips/, e.g. 910b2, 910a, 310p) or a hardware TOML file; `run` on lowered IR defaults to the chip it was lowered for.",
)
_pipeline_opt = click.option("-p", "--pipeline", default=None, help="nn-level pass pipeline, xdsl-opt syntax (default: the -O level's).")
_opt_level = click.option("-O", "opt_level", type=click.Choice(["0", "1", "2"]), default="2", show_default=True, help="Optimization level.")
_verify_opt = click.option("--verify-numerics", is_flag=True, help="Evaluate the nn module before and after every pass (same inputs) and fail on a difference beyond the dtype's tolerance.")
_tiling_opt = click.option("--tiling", default=None, metavar="m=128,n=128,k=64,br=64,bc=128",
                           help="Force these tiling fields instead of choose-tiling's (others searched): m, n, k, l1_depth, split_k, swizzle on every nn.matmul; br, bc on every flash attention.")
_shape_only_opt = click.option("--shape-only", is_flag=True,
                               help="Read no weight bytes from ONNX external data (weights are zeros); compile writes no weights file, run is timing-only.")
_dtype_opt = click.option("--dtype", type=click.Choice(["fp32", "fp16", "bf16"]), default="fp32", show_default=True,
                          help="Precision policy for ONNX input: weights and activations in this type; fp32 accumulation (L0C) and softmax/norm statistics.")
_plots_opt = click.option("--plots", type=click.Path(path_type=Path), default=None, metavar="DIR",
                          help="Write roofline.{png,svg} and timeline.{png,svg} here (needs matplotlib: pip install 'ascendir[plots]').")
_shape_opt = click.option("--input-shape", "input_shapes", multiple=True, metavar="NAME=DxD", help="Pin a dynamic input shape, e.g. input_ids=1x128.")



def _compile_options(f):
    """The options `compile` and `run` share (target, pipeline, shapes, precision, tiling...)."""
    for option in reversed((_target_opt, _pipeline_opt, _opt_level, _shape_opt, _verify_opt, _tiling_opt, _shape_only_opt, _dtype_opt)):
        f = option(f)
    return f

@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="Write IR here (weights go to OUT.weights.npz); default stdout.")
@click.option("--emit", type=click.Choice(["nn", "ascend"]), default="ascend", show_default=True)
@_compile_options
def compile(model: Path, output: Path | None, emit: str, target: str, pipeline: str | None, opt_level: str, input_shapes,
            verify_numerics: bool, tiling: str | None, shape_only: bool, dtype: str) -> None:
    """Compile MODEL (.onnx, or .mlir IR) to the nn or ascend dialect."""
    from ascendir.driver import compile_model, parse_input_shapes, print_ir, weights_path

    from ascendir.session import Session
    from ascendir.transforms.nn.choose_tiling import log_summary

    if is_stdout(output):
        output = None  # `-o -`: the IR on stdout, as without -o
    if output is not None:
        _check_outputs([output] if shape_only or output_kind(output) != "atomic" else [output, weights_path(output)],
                       _run_inputs(model, target))
    session = Session(echo_notes=True)
    module, weights = compile_model(
        model, target, opt_level=f"O{opt_level}", pipeline=pipeline, emit=emit, input_shapes=parse_input_shapes(input_shapes),
        verify_numerics=verify_numerics, tiling=tiling, shape_only=shape_only, dtype=dtype, session=session,
    )
    if session.search_log:
        click.echo(log_summary(session.search_log), err=True)
    if verify_numerics:
        from ascendir.driver import parse_pipeline

        _verified(parse_pipeline(pipeline, f"O{opt_level}", target, tiling), "random inputs (seed 0)")
    text = print_ir(module)
    if output is None:
        click.echo(text, nl=False)
        return
    if shape_only:  # the weights are zeros: writing them would only fill the disk
        write_text(output, text)
        click.echo(f"wrote {output} (--shape-only: no weights file)", err=True)
        return
    if output_kind(output) != "atomic":  # a FIFO, device or descriptor takes one stream: the IR
        write_text(output, text)
        click.echo(f"wrote {output}; not a regular file, so no weights were written "
                   f"(`-o FILE.mlir` writes them to FILE.weights.npz)", err=True)
        return
    write_output(weights_path(output), weights.save)
    write_text(output, text)
    click.echo(f"wrote {output} and {weights_path(output)} ({len(weights)} weights)", err=True)


def _run_inputs(model: Path, target: str, *more: Path | None) -> list[Path]:
    """The files a run reads: `model`, the weights file beside IR, the ONNX model's external data,
    a target TOML, and `more` (--inputs, --expected)."""
    from ascendir.driver import weights_path

    files = [model, *more]
    if model.suffix == ".onnx":
        files += _external_data(model)
    else:
        files.append(weights_path(model))
    if target.endswith(".toml"):
        files.append(Path(target))
    return [f for f in files if f is not None]


def _external_data(model: Path) -> list[Path]:
    """The external-data files an ONNX model names (read without loading them); none for a file
    onnx cannot parse (the importer reports that)."""
    import onnx

    try:
        proto = onnx.load(model, load_external_data=False)
    except Exception:  # noqa: BLE001 - the import reports what is wrong with it
        return []
    found: list[Path] = []

    def walk(graph) -> None:
        for t in graph.initializer:
            if t.data_location == onnx.TensorProto.EXTERNAL:
                loc = next((e.value for e in t.external_data if e.key == "location"), None)
                if loc and "\0" not in loc:
                    found.append(model.parent / loc)
        for node in graph.node:
            for a in node.attribute:
                for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    walk(g)

    walk(proto.graph)
    for f in proto.functions:
        for node in f.node:
            for a in node.attribute:
                for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    walk(g)
    return found


def _file_id(p: Path) -> tuple:
    """What identifies the file `p` names: device and inode when it exists (hard links and
    symlinks alike), else its resolved path."""
    try:
        st = p.stat()
        return (st.st_dev, st.st_ino)
    except OSError:
        return (os.path.realpath(p),)


def _plot_files(plots: Path | None) -> list[Path]:
    """The files --plots DIR may write (api/plots.py: roofline and timeline, each format)."""
    from ascendir.api.plots import FORMATS

    return [] if plots is None else [plots / f"{stem}.{ext}" for stem in ("roofline", "timeline") for ext in FORMATS]


def _check_outputs(outputs: list[Path | None], inputs: list[Path | None], plots: Path | None = None) -> None:
    """Before any work: every output path can be written, none is a file the run reads, and no
    two name the same file (FIFOs and devices excepted; `-` at most once), the files of --plots
    DIR included.

    Raises:
        AscendirError: naming the path.
    """
    given = [p for p in outputs if p is not None]
    drawn = {_file_id(f): f for f in _plot_files(plots)}
    for p in [*given, *(p for p in inputs if p is not None)]:
        if not is_stdout(p) and _file_id(p) in drawn:
            raise AscendirError(f"{p}: --plots {plots} writes this file too: output paths must differ")
    read = {_file_id(p) for p in inputs if p is not None}
    files = []
    for p in given:
        check_writable(p)
        kind = output_kind(p)
        if kind == "atomic" and _file_id(p) in read:
            raise AscendirError(f"output {p} is a file this run reads: it would be overwritten")
        if kind in ("atomic", "stdout"):
            files.append(_file_id(p) if kind == "atomic" else ("-",))
    if len(set(files)) < len(files):
        raise AscendirError(f"output paths must differ ({', '.join(map(str, given))})")


def _input_shapes_of(path: Path) -> dict[str, tuple[int, ...]]:
    """The shape of each graph-input array of an --inputs .npz (keys as `_load_inputs` reads
    them), read from the archive's headers without loading the data; {} when it cannot be read
    (`_load_inputs` then says why)."""
    import numpy as np

    shapes = {}
    try:
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                key = info.filename.removesuffix(".npy")
                if key.startswith("output:"):
                    continue
                with z.open(info) as f:
                    fmt = np.lib.format
                    major, _ = fmt.read_magic(f)
                    shape, _, _ = (fmt.read_array_header_1_0 if major == 1 else fmt.read_array_header_2_0)(f)
                shapes[key.removeprefix("input:")] = tuple(shape)
    except (OSError, ValueError, zipfile.BadZipFile):
        return {}
    return shapes


def _load_inputs(path: Path, func, precision: str = "fp32", devices: int = 0) -> dict[str, np.ndarray]:
    """The arrays of an --inputs .npz for the arguments of `func` (@main): one key per graph input
    (optionally `input:`-prefixed; `output:` keys are ignored), each of the exact shape and dtype.
    Under `--dtype fp16|bf16` (`precision`) an f32 array (the ONNX model's type) may feed an input
    the policy made fp16/bf16: it is converted as the weights are (saturating).

    Raises:
        AscendirError: unreadable or not an .npz, a missing, unknown or doubled key, a wrong shape
            or dtype; the message names the input.
    """
    import zipfile

    import numpy as np

    from ascendir.driver import check_feeds
    from ascendir.frontends.onnx.precision import DTYPES, saturating_cast

    if path.is_file() and not zipfile.is_zipfile(path):
        raise AscendirError(f"cannot read inputs {path}: not an .npz archive (write it with numpy.savez)")
    _check_entry_sizes(path, func)
    try:
        with np.load(path) as data:
            files = [k for k in data.files if not k.startswith("output:")]
            arrays = {k: data[k] for k in files}
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise AscendirError(f"cannot read inputs {path}: {' '.join(str(e).split())}") from None

    def convert(arr: np.ndarray, dtype: np.dtype) -> np.ndarray | None:
        if arr.dtype == np.float32 and precision != "fp32" and dtype == DTYPES[precision][1]:
            return saturating_cast(arr, dtype)
        return None

    return check_feeds(func, arrays, f"inputs {path}", convert, devices)


def _check_entry_sizes(path: Path, func) -> None:
    """Before any entry is decompressed: none holds more bytes than the largest input of `func`
    could take (8 bytes an element, plus the .npy header), so a small archive of deflated zeros (a
    zip bomb: 2 MB holding 2 GB) is refused instead of filling memory.

    Raises:
        AscendirError: naming the entry and its size.
    """
    import math

    largest = max((math.prod(t.get_shape()) * 8 for t in func.function_type.inputs.data), default=0) + 65536
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
    except (OSError, zipfile.BadZipFile, ValueError) as e:
        raise AscendirError(f"cannot read inputs {path}: {' '.join(str(e).split())}") from None
    for info in infos:
        if not info.filename.startswith("output:") and info.file_size > largest:
            raise AscendirError(
                f"inputs {path}: entry '{info.filename[:60]}' holds {info.file_size} bytes, more than any input of the model takes ({largest})"
            )


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--inputs", type=click.Path(path_type=Path), default=None, help=".npz whose keys are graph input names; default: seeded random inputs.")
@click.option("--outputs", type=click.Path(path_type=Path), default=None, help="Write the output tensors to this .npz.")
@click.option("--timing-only", is_flag=True, help="Simulate cycles without moving data.")
@click.option("--check-races", is_flag=True, help="Check pipe races in --timing-only runs too (numerics runs always check).")
@click.option("--report", "report_path", type=click.Path(path_type=Path), default=None, help="Write the report as JSON.")
@click.option("--trace", "trace_path", type=click.Path(path_type=Path), default=None, help="Write a Chrome/Perfetto trace JSON.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the random inputs.")
@click.option("--expected", type=click.Path(path_type=Path), default=None, metavar="FILE.npz",
              help="Expected outputs (keys: output names, or output:NAME): print PASS/FAIL per output, exit 1 on a mismatch. The output: keys of --inputs serve too.")
@click.option("--check-ort", is_flag=True, help="Expected outputs from onnxruntime on the same ONNX model and inputs (needs onnxruntime).")
@click.option("--devices", type=click.IntRange(min=1, max=4096), default=1, show_default=True,
              help="Run the module SPMD on this many devices of --topology (a module holding collectives): every rank "
                   "gets the same weights; an --inputs key NAME@R feeds rank R only; random inputs use seed + rank.")
@click.option("--topology", default=None, metavar="NAME|FILE.toml",
              help="How the devices are joined (shipped: atlas800-a2, atlas800-a2-x2, a3-supernode-16; default atlas800-a2).")
@click.option("--tp", type=click.IntRange(min=1, max=4096), default=1, show_default=True,
              help="Tensor parallelism: shard the model Megatron-style over this many devices of --topology "
                   "(shard-tensor-parallel after the -O pipeline) and run every rank on the same inputs.")
@click.option("--sequence-parallel", is_flag=True, help="With --tp: norms and residuals on sequence shards (reduce_scatter / all_gather instead of all_reduce).")
@click.option("--moe-routing", default=None, metavar="uniform|skew=A|FILE.npz",
              help="Routing of the MoE blocks in a --timing-only run without --inputs (default uniform; FILE: "
                   "'indices' [tokens, k]); other runs route their inputs. Stated in the report.")
@_plots_opt
@_compile_options
def run(model: Path, inputs: Path | None, outputs: Path | None, timing_only: bool, check_races: bool, report_path: Path | None,
        trace_path: Path | None, seed: int, expected: Path | None, check_ort: bool, devices: int, topology: str | None,
        tp: int, sequence_parallel: bool, moe_routing: str | None, plots: Path | None, target: str, pipeline: str | None, opt_level: str, input_shapes,
        verify_numerics: bool, tiling: str | None, shape_only: bool, dtype: str) -> None:
    """Compile MODEL (.onnx or .mlir) for TARGET and run it in the interpreter; print the verdict
    (with expected outputs at hand) and the report. Exit code 1: an output beyond its tolerance."""
    from ascendir.driver import gather_bounds, io_names, is_lowered, main_func, random_inputs, simulate_ranks
    from ascendir.interpreter import simulate
    from ascendir.api.report_table import render

    timing_only = _check_run_flags(model, outputs, timing_only, shape_only, verify_numerics, expected, check_ort)
    _check_outputs([outputs, report_path, trace_path], _run_inputs(model, target, inputs, expected), plots)
    if plots is not None:
        _prepare_plots(plots)
    module, weights, hw = _load_for_run(model, inputs, target, input_shapes, shape_only, dtype, timing_only, pipeline, tiling)
    bounds = {} if is_lowered(module) else gather_bounds(main_func(module))
    reference, want = _expected_outputs(model, inputs, expected, check_ort, timing_only, lambda: io_names(main_func(module), results=True))
    notes: dict = {}
    ran = None
    if sequence_parallel and tp == 1:
        raise AscendirError("--sequence-parallel shards sequences over the --tp devices; give --tp N")
    if tp > 1:
        if is_lowered(module):
            raise AscendirError(f"--tp shards an nn-level model; {model} is lowered IR (compile the ONNX model or the nn IR)")
        if devices not in (1, tp):
            raise AscendirError(f"--tp {tp} runs on {tp} devices; --devices {devices} differs")
        devices = tp
    spmd = devices > 1 or topology is not None
    if spmd and plots is not None:
        raise AscendirError("--plots draws one chip; drop it with --devices / --topology (--trace has a process per device)")
    if spmd:  # before the lowering: a group the topology cannot run is the user's to fix
        from ascendir.hardware.topology import load_topology
        from ascendir.interpreter.sim.cluster import check_groups

        topo = load_topology(topology)
        if devices > topo.devices:
            raise AscendirError(f"--devices {devices} does not fit topology {topo.name} ({topo.devices} devices)")
        check_groups(module, topo, devices)
    moe, routing = _moe_routing(module, weights, model, inputs, seed, bounds, timing_only, shape_only, moe_routing, dtype)
    rank_weights = [weights] * devices
    if not is_lowered(module):
        ran, stores = _lower_for_run(module, weights, hw, inputs, seed, bounds, pipeline, opt_level, target, tiling, verify_numerics,
                                     dtype, notes, tp, sequence_parallel)
        if tp > 1:
            weights, rank_weights = stores[0], stores
    if inputs:
        feeds = _load_inputs(inputs, main_func(module), dtype if model.suffix == ".onnx" else "fp32", devices if spmd else 0)
    else:  # timing-only moves no data: no need to make (possibly huge) random inputs
        feeds = {} if timing_only else random_inputs(module, seed, bounds)

    # an output on stdout (`--report -`) keeps it for itself: the table goes to stderr
    console = _Console(stderr=any(is_stdout(p) for p in (outputs, report_path, trace_path)))
    if spmd:
        # tensor parallel: every rank computes on the whole input; else NAME@R keys or seed + rank
        rank_feeds = [feeds if tp > 1 else _rank_feeds(feeds, r, module, seed, bounds, timing_only, inputs is not None)
                      for r in range(devices)]
        with _launch_progress(f"simulating on {devices} x {hw.name}") as progress:
            result = simulate_ranks([module] * devices, rank_weights, rank_feeds, hw, topo, timing_only,
                                 trace_path is not None or plots is not None)
        feeds = rank_feeds[0]
    else:
        with _launch_progress(f"simulating on {hw.name}") as progress:
            result = simulate(module, weights, feeds, hw, timing_only=timing_only, trace=trace_path is not None or plots is not None,
                              check_races=True if check_races else None, progress=progress, moe_routing=routing)

    result.report.update(notes)
    if moe is not None:
        from ascendir.api.moe_report import set_lowering

        set_lowering(moe, module)
        result.report["moe"] = moe
    result.report.update(model={"path": str(model), "sha256": _sha256(model)}, workload=_workload(main_func(module)), pipeline=ran,
                         dtype=dtype if model.suffix == ".onnx" else None, seed=None if inputs else seed, timing_only=timing_only)
    verdict = None
    if reference is not None:
        from ascendir.api.verdict import compare, onnxruntime_outputs

        if check_ort:
            want = onnxruntime_outputs(model, feeds)
        verdict = compare(result.outputs, want, dtype if model.suffix == ".onnx" else "fp32", reference)
        result.report["verdict"] = verdict
    _write_run_files(result, outputs, report_path, trace_path, plots)
    render(result.report, console)  # the verdict first, when there is one
    if verdict is not None and verdict["status"] == "fail":
        sys.exit(1)


def _rank_feeds(feeds: dict, rank: int, module, seed: int, bounds, timing_only: bool, given: bool) -> dict:
    """Rank `rank`'s inputs: NAME@rank keys of --inputs over the shared NAME ones; without
    --inputs, random inputs of seed + rank (ranks differ, so a collective has something to do)."""
    from ascendir.driver import random_inputs

    if not given:
        return {} if timing_only else (feeds if rank == 0 else random_inputs(module, seed + rank, bounds))
    out = {k: v for k, v in feeds.items() if "@" not in k}
    out.update({k.rsplit("@", 1)[0]: v for k, v in feeds.items() if k.endswith(f"@{rank}")})
    return out


def _moe_routing(module, weights, model: Path, inputs: Path | None, seed: int, bounds, timing_only: bool, shape_only: bool,
                 moe_routing: str | None, dtype: str) -> tuple[list[dict] | None, dict]:
    """The report's `moe` section (api/moe_report.py) for an nn-level model, before it is lowered:
    the routing of this run's inputs, or --moe-routing's assumption in a timing-only run without
    them; and that routing by block (what a timing-only simulation follows), {} without blocks.

    Raises:
        AscendirError: --moe-routing in a run that routes its inputs, on lowered IR, or on a model
            without a recognised MoE block; a bad --moe-routing spec."""
    from ascendir.api.moe_report import moe_section
    from ascendir.costmodel.moe_routing import parse_routing
    from ascendir.driver import is_lowered, main_func, random_inputs

    spec = parse_routing(moe_routing) if moe_routing is not None else None
    routes_inputs = not shape_only and (inputs is not None or not timing_only)
    if spec is not None and routes_inputs:
        raise AscendirError("--moe-routing sets the routing of --timing-only runs without --inputs; this run routes its inputs")
    if is_lowered(module):
        if spec is not None:
            raise AscendirError(f"--moe-routing needs an nn-level model; {model} is lowered IR")
        return None, {}
    from ascendir.conversion.nn_to_ascend.templates.moe_match import find_moe_blocks

    if spec is None and not find_moe_blocks(main_func(module).body.block):
        return None, {}  # no MoE block: read no inputs, evaluate no router
    feeds, text = None, ""
    if routes_inputs:
        if inputs is not None:
            feeds, text = _load_inputs(inputs, main_func(module), dtype if model.suffix == ".onnx" else "fp32"), f"the inputs of {inputs}"
        else:
            feeds, text = random_inputs(module, seed, bounds), f"random inputs (seed {seed})"
    got = moe_section(module, weights, feeds, text, spec)
    return got if got is not None else (None, {})


def _check_run_flags(model: Path, outputs: Path | None, timing_only: bool, shape_only: bool, verify_numerics: bool,
                     expected: Path | None, check_ort: bool) -> bool:
    """Whether the run is timing-only (--shape-only implies it).

    Raises:
        AscendirError: a flag that needs numerics (--outputs, --expected, --check-ort,
            --verify-numerics) with --timing-only / --shape-only; two references; --check-ort on IR."""
    if shape_only:
        if verify_numerics:
            raise AscendirError("--verify-numerics needs the weights; drop --shape-only")
        timing_only = True  # zeros for weights: only the timing is meaningful
    if timing_only and outputs is not None:
        raise AscendirError(f"--outputs needs numerics; drop {'--shape-only' if shape_only else '--timing-only'}")
    for flag, given in (("--expected", expected), ("--check-ort", check_ort)):
        if given and timing_only:
            raise AscendirError(f"{flag} needs numerics; drop {'--shape-only' if shape_only else '--timing-only'}")
    if check_ort and expected is not None:
        raise AscendirError("give one reference: --expected or --check-ort")
    if check_ort and model.suffix != ".onnx":
        raise AscendirError(f"--check-ort runs onnxruntime on an ONNX model; {model} is IR (use --expected)")
    return timing_only


def _load_for_run(model: Path, inputs: Path | None, target: str, input_shapes, shape_only: bool, dtype: str,
                  timing_only: bool, pipeline: str | None, tiling: str | None):
    """(module, weights, chip) of `run`: an ONNX model imported (its dynamic dims pinned by
    --input-shape, else by the --inputs arrays), or IR text with its weights file; lowered IR runs
    on the chip it was lowered for unless --target says otherwise.

    Raises:
        AscendirError: --input-shape on IR; weights missing for a numerics run; nn options on
            lowered IR; lowered IR for another architecture than --target's."""
    from ascendir.driver import is_lowered, load_ir, missing_weights, parse_input_shapes, reject_nn_options, weights_path
    from ascendir.frontends.onnx import import_onnx
    from ascendir.hardware import load_target

    hw = load_target(target)
    if model.suffix == ".onnx":
        hints = _input_shapes_of(inputs) if inputs is not None else None
        module, weights = import_onnx(model, parse_input_shapes(input_shapes), shape_only=shape_only, dtype=dtype, shape_hints=hints)
        return module, weights, hw
    if input_shapes:
        raise AscendirError(f"--input-shape applies to .onnx models; {model} is IR with static shapes")
    module, weights = load_ir(model)
    missing = [] if timing_only else missing_weights(module, weights)
    if missing:  # else the interpreter fails mid-run on the first one it reads
        wp = weights_path(model)
        where = f"{wp}, which does not exist" if not wp.exists() else str(wp)
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise AscendirError(
            f"{model}: weight @{missing[0]}{more} not in {where} (`ascendir compile -o` writes it beside the IR; "
            "--timing-only needs none)"
        )
    if is_lowered(module):
        reject_nn_options(model, pipeline, tiling)
        if click.get_current_context().get_parameter_source("target") is click.core.ParameterSource.DEFAULT:
            from ascendir.transforms.ascend.plan_memory import module_target

            hw = module_target(module)  # the chip it was lowered for, not the default one
    arch, lowered_for = (module.attributes.get(k) for k in ("ascend.arch", "ascend.target"))
    if arch is not None and getattr(arch, "data", None) != hw.arch.name:
        chip = getattr(lowered_for, "data", "another chip")
        raise AscendirError(
            f"{model} was lowered for {chip} ({getattr(arch, 'data', arch)}), --target {hw.name} is {hw.arch}: compile the model for it"
        )
    return module, weights, hw


def _lower_for_run(module, weights, hw, inputs: Path | None, seed: int, bounds, pipeline: str | None, opt_level: str,
                   target: str, tiling: str | None, verify_numerics: bool, dtype: str, notes: dict, tp: int = 1,
                   sequence_parallel: bool = False) -> tuple[str, list]:
    """Run the nn pipeline (checking each pass's numerics with --verify-numerics), with `tp` > 1
    shard-tensor-parallel, and ascend-lowering on `module` in place; put what the report carries
    of it (the tiling search, the declined regions, what was verified) into `notes`. Returns the
    pipeline that ran, as `ascendir-opt -p` text, and the weight store of each rank ([weights]
    without tp)."""
    from ascendir.driver import lower, main_func, parse_pipeline, random_inputs, run_passes
    from ascendir.transforms.nn.choose_tiling import log_json

    checks = None
    if verify_numerics:
        checks = _load_inputs(inputs, main_func(module), dtype) if inputs else random_inputs(module, seed, bounds)
    nn_pipeline = parse_pipeline(pipeline, f"O{opt_level}", target, tiling)
    session = run_passes(module, nn_pipeline, weights, checks)
    stores = [weights]
    shard = []
    if tp > 1:
        from ascendir.transforms.nn.shard_tensor_parallel import shard_module

        module, stores = shard_module(module, weights, tp, sequence_parallel, target, session)
        shard = [f"shard-tensor-parallel{{tp={tp}{' sequence-parallel=true' if sequence_parallel else ''}}}"]
    ran = ",".join([*(str(p.pipeline_pass_spec()) for p in nn_pipeline.passes), *shard, f"ascend-lowering{{target={hw.name}}}"])
    lower(module, stores[0], target, session)
    for store in stores[1:]:  # what the lowering moved into rank 0's store (constants) is every rank's
        for name in stores[0]:
            if name not in store:
                store.add(name, stores[0][name])
    if session.search_log:  # what choose-tiling scored (the report's table prints it too)
        notes["tiling_search"] = log_json(session.search_log)
    if session.declined:  # regions lowered op by op because their template declined them
        notes["declined"] = [{"region": d.region, "kind": d.kind, "reason": d.reason} for d in session.declined]
    if verify_numerics:
        notes["verify_numerics"] = _verified(nn_pipeline, f"the inputs of {inputs}" if inputs else f"random inputs (seed {seed})")
    return ran, stores


def _write_run_files(result, outputs: Path | None, report_path: Path | None, trace_path: Path | None, plots: Path | None) -> None:
    """The run's files, before anything is printed (rendering may stop early: `ascendir run ... |
    head` closes stdout).

    Raises:
        AscendirError: a report that breaks its schema (then nothing is written)."""
    import numpy as np

    from ascendir.api.report_schema import problem
    from ascendir.dtypes import numpy_native

    def save_outputs(f) -> None:
        # bf16 / fp8 / fp4 / int4 outputs upcast exactly (dtypes.numpy_native): np.savez would store
        # ml_dtypes arrays as raw |V bytes that np.load cannot compute with
        # np.savez seeks back into what it wrote: a gzip stream or a pipe cannot, a buffer can
        buf = io.BytesIO()
        np.savez(buf, **{k: numpy_native(v) for k, v in result.outputs.items()})
        f.write(buf.getbuffer())

    broken = problem(result.report)
    if broken:  # `ascendir report` would reject it: say so now, write nothing
        raise AscendirError(f"the run's report breaks its schema: {broken} (a target figure out of range?)")
    if outputs is not None:
        write_output(outputs, save_outputs)
    if report_path is not None:
        write_text(report_path, json.dumps(result.report, indent=1, allow_nan=False))
    if trace_path is not None:
        from ascendir.interpreter.report.trace import trace_document

        write_text(trace_path, json.dumps(trace_document(result.trace_events, result.report)))
    if plots is not None:
        _write_plots(result.report, result.trace_events, plots)


def _workload(func) -> dict:
    """What one run computes, for the throughput: `batch` = the first input's leading dim (1 for
    a scalar), `tokens` = batch x sequence of the first integer input of rank 2 (token ids
    [batch, seq]), None without one."""
    from xdsl.dialects.builtin import IntegerType

    types = func.function_type.inputs.data
    shapes = [tuple(t.get_shape()) for t in types if hasattr(t, "get_shape")]
    batch = shapes[0][0] if shapes and shapes[0] else 1
    ids = next((tuple(t.get_shape()) for t in types if hasattr(t, "get_shape") and isinstance(t.element_type, IntegerType)
                and len(t.get_shape()) == 2), None)
    return {"batch": int(batch), "tokens": int(ids[0] * ids[1]) if ids else None}


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _expected_outputs(model: Path, inputs: Path | None, expected: Path | None, check_ort: bool, timing_only: bool,
                      names) -> tuple[str | None, dict[str, np.ndarray]]:
    """The reference of the verdict and its expected outputs (empty for onnxruntime, computed
    after the run on the same inputs): --check-ort, --expected, else the output: keys of --inputs
    (none in a timing-only run: no outputs to compare). `names()`: the graph's output names."""
    from ascendir.api.verdict import load_expected

    if check_ort:
        return "onnxruntime", {}
    if expected is not None:
        if inputs is None and _has_input_keys(expected):  # else random inputs, and a certain FAIL
            raise AscendirError(f"--expected {expected} holds the inputs too (input: keys): pass it as --inputs {expected}")
        return str(expected), load_expected(expected, names(), "expected outputs", required=True)
    if inputs is not None and not timing_only:
        want = load_expected(inputs, names(), "inputs", required=False)
        if want:
            return str(inputs), want
    return None, {}


def _has_input_keys(path: Path) -> bool:
    """Whether an .npz holds `input:` arrays (read from its directory, without loading data)."""
    try:
        with zipfile.ZipFile(path) as z:
            return any(n.startswith("input:") for n in z.namelist())
    except (OSError, zipfile.BadZipFile):
        return False  # load_expected says why


def _verified(pipeline, source: str) -> dict:
    """What --verify-numerics checked, printed on stderr and kept in the report."""
    from ascendir.driver import TOLERANCES

    names = [p.name for p in pipeline.passes]
    r, a = TOLERANCES["float32"]
    click.echo(f"verify-numerics: {len(names)} passes ({', '.join(names)}) each kept every output within its dtype's "
               f"tolerance (f32: rtol {r:g}, atol {a:g} x max(1, max|value|)) on {source}", err=True)
    return {"passes": names, "inputs": source, "status": "pass"}


def _prepare_plots(directory: Path) -> None:
    """Before any work: matplotlib importable and `directory` usable (made when the plots are written)."""
    from ascendir.api.plots import prepare_dir, require_matplotlib

    require_matplotlib()
    prepare_dir(directory)


def _write_plots(report: dict, trace_events: list[dict] | None, directory: Path) -> None:
    from ascendir.api.plots import write_plots

    paths = write_plots(report, trace_events, directory)
    click.echo(f"wrote {', '.join(p.name for p in paths)} in {directory}", err=True)


class _launch_progress:
    """A rich progress bar of kernel launches on stderr when stderr is a terminal; otherwise
    nothing (pipes, CI and tests see no control characters). Yields the `progress(done, total)`
    callback for `simulate`, or None."""

    def __init__(self, what: str, unit: str = "launches"):
        self.what, self.unit = what, unit
        self.bar = None

    def __enter__(self):
        if not sys.stderr.isatty():
            return None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn(self.unit),
                            TimeElapsedColumn(), console=_Console(stderr=True), transient=True)
        self.bar.start()
        task = self.bar.add_task(self.what, total=None)

        def update(done: int, total: int) -> None:
            self.bar.update(task, completed=done, total=max(done, total))

        return update

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()


@main.command()
@click.argument("reports", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="REPORT.json [B.json]")
@click.option("--diff", is_flag=True, help="Compare two reports (A.json B.json): settings, totals, and what changed per kernel and per pipe.")
@click.option("--trace", "trace_path", type=click.Path(path_type=Path), default=None,
              help="The Chrome trace of the same run (`ascendir run --trace`): --plots then draws the pipe timeline too.")
@_plots_opt
def report(reports: tuple[Path, ...], diff: bool, trace_path: Path | None, plots: Path | None) -> None:
    """Render a REPORT.json written by `ascendir run --report` (.json.gz too), or with --diff
    compare two of them."""
    from ascendir.api.report_table import render

    if diff:
        if len(reports) != 2 or trace_path is not None or plots is not None:
            raise AscendirError("--diff takes two reports (A.json B.json) and no --trace / --plots")
        from ascendir.api import report_diff

        a, b = (_read_report(p) for p in reports)
        report_diff.render(a, b, (str(reports[0]), str(reports[1])), _Console())
        return
    if len(reports) != 1:
        raise AscendirError(f"give one report ({len(reports)} given; --diff compares two)")
    (report_path,) = reports
    if trace_path is not None and plots is None:
        raise AscendirError("--trace is read for the pipe timeline of --plots; add --plots DIR")
    if plots is not None:
        _check_outputs([], [report_path, trace_path], plots)
        _prepare_plots(plots)
    data = _read_report(report_path)
    events = None
    if trace_path is not None:
        trace = _read_json(trace_path, "trace")
        events = trace.get("traceEvents") if isinstance(trace, dict) else None
        if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
            raise AscendirError(f"{trace_path} is not a trace of `ascendir run --trace`: no 'traceEvents' list of objects")
        other = _trace_mismatch(data, trace)
        if other:
            raise AscendirError(f"{trace_path} is not the trace of the run of {report_path}: {other}")
    if plots is not None:  # files first, as in `run`: a failure then prints one line
        if events is None:
            click.echo("note: no --trace given: the pipe timeline needs the trace of the run (ascendir run --trace)", err=True)
        _write_plots(data, events, plots)
    render(data, _Console())


def _read_report(path: Path) -> dict:
    """A report file, checked against its schema and its totals.

    Raises:
        AscendirError: unreadable, not JSON, or not a report (naming the first bad field).
    """
    data = _read_json(path, "report")
    problem = _report_problem(data)
    if problem:
        raise AscendirError(f"{path} is not a report of `ascendir run --report`: {problem}")
    return data


def _read_json(path: Path, what: str):
    from ascendir.api.report_schema import loads

    try:
        return loads(read_bytes(path))
    except (OSError, ValueError, EOFError) as e:
        raise AscendirError(f"cannot read {what} {path}: {' '.join(str(e).split())}") from None
    except RecursionError:  # json parses nested arrays recursively
        raise AscendirError(f"cannot read {what} {path}: arrays or objects nested too deeply") from None


def _report_problem(data) -> str | None:
    """What keeps `data` from being a renderable report, or None: a departure from the report's
    schema (api/report.schema.json: types, finite non-negative figures, a positive clock and
    ceilings, rates in [0, 1]) or totals that disagree with the kernels (total_cycles = Σ kernel
    cycles, total_seconds = total_cycles / clock_hz)."""
    from ascendir.api.report_schema import SCHEMA_VERSION, problem

    if isinstance(data, dict) and "schema_version" not in data and isinstance(data.get("model"), list):
        broken = "no 'schema_version'"  # the cost-model notes under 'model': a report before schema 1
    else:
        broken = problem(data)
    if broken == "no 'schema_version'":
        return f"{broken}: written before report schema {SCHEMA_VERSION}; run it again"
    if broken:
        if isinstance(data, dict) and "schema_version" in data and data["schema_version"] != SCHEMA_VERSION:
            broken += f" (this ascendir reads report schema {SCHEMA_VERSION})"
        return broken
    total = sum(k["cycles"] for k in data["kernels"])
    if not math.isclose(total, data["total_cycles"], rel_tol=1e-9, abs_tol=1e-6):
        return f"'total_cycles' {data['total_cycles']!r} is not the sum of its kernels' cycles ({total!r})"
    if not math.isclose(data["total_seconds"], data["total_cycles"] / data["clock_hz"], rel_tol=1e-9, abs_tol=1e-15):
        return f"'total_seconds' {data['total_seconds']!r} is not total_cycles / clock_hz"
    return None


def _trace_mismatch(report: dict, trace: dict) -> str | None:
    """Why `trace` is not the trace of the run `report` describes, or None: their run ids differ
    (report.run_id); for files without one, the kernel launches (the host track's spans: name and
    cycles, in order) differ from the report's kernels."""
    ours = report.get("run_id")
    other = trace.get("otherData")
    theirs = other.get("run_id") if isinstance(other, dict) else None
    if ours is not None and theirs is not None:
        return None if ours == theirs else f"run id {theirs}, the report's is {ours}"
    launches = [(e.get("name"), (e.get("args") or {}).get("cycles")) for e in trace["traceEvents"]
                if e.get("ph") == "X" and e.get("pid") == 0]
    kernels = [(k["name"], k["cycles"]) for k in report["kernels"]]
    if launches == kernels:
        return None
    first = next((i for i, (a, b) in enumerate(zip(launches, kernels)) if a != b), min(len(launches), len(kernels)))
    where = (f"launch #{first} is {launches[first][0]} ({launches[first][1]} cycles), the report's {kernels[first][0]} "
             f"({kernels[first][1]} cycles)" if first < min(len(launches), len(kernels)) else "")
    return f"{len(launches)} kernel launches, the report has {len(kernels)}" + (f"; {where}" if where else "")


@main.command()
@click.option("--quick", is_flag=True, help="Only the small cases (V3, V7, V13, V14a).")
def calibrate(quick: bool) -> None:
    """Predicted vs measured for reference §7 (V1-V7, V9, V10, V11-V13, V14): error, median and worst."""
    from ascendir.api import calibration

    console = _Console()
    rows = calibration.run(quick, progress=lambda vid: console.print(f"simulating {vid} ...", style="dim"))
    calibration.render(rows, console)


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--target", "targets", multiple=True, default=("ascend910b2",), show_default=True,
              help="A chip name or TOML file; repeat for more points.")
@click.option("--tiling", "tilings", multiple=True, metavar="m=128,n=128,k=64",
              help="A forced tiling (as run --tiling); repeat for more points. Default: choose-tiling's search.")
@click.option("--dtype", "dtypes", multiple=True, type=click.Choice(["fp32", "fp16", "bf16"]), default=("fp32",),
              show_default=True, help="Precision policy; repeat for more points.")
@click.option("--numerics", is_flag=True, help="Move data too (random inputs, seed 0); default: timing-only, weights not read.")
@click.option("--scheduler", default="local", show_default=True, metavar="local|dask-local|ADDRESS",
              help="Where points run: local processes, a throw-away local Dask cluster, or a Dask scheduler address (tcp://host:8786).")
@click.option("-j", "--jobs", type=click.IntRange(min=1, max=256), default=1, show_default=True,
              help="Worker processes (local, dask-local).")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, metavar="TABLE.csv|.json",
              help="Write the table; JSON when the name ends in .json, else CSV (`-`: CSV on stdout).")
@click.option("--plot", "plot_path", type=click.Path(path_type=Path), default=None, metavar="FILE.png|.svg",
              help="Latency per point as a bar chart (needs matplotlib).")
def sweep(model: Path, targets: tuple[str, ...], tilings: tuple[str, ...], dtypes: tuple[str, ...], numerics: bool,
          scheduler: str, jobs: int, output: Path | None, plot_path: Path | None) -> None:
    """Compile and simulate MODEL at every point of a grid of targets, tilings and dtypes: one table and a plot."""
    from ascendir.api import sweep as sw

    if not model.is_file():
        raise AscendirError(f"cannot read {model}: no such file")
    _check_outputs([output, plot_path], [model])
    from ascendir.conversion.nn_to_ascend.tiling import parse_tiling

    for t in tilings:  # a malformed tiling fails every point: say so once, before any runs
        parse_tiling(t)
    points = sw.grid(targets, tilings or (None,), dtypes)
    console = _Console(stderr=is_stdout(output))
    with _launch_progress(f"sweeping {model.name}", "points") as progress:
        count = iter(range(1, len(points) + 1))
        rows = sw.run_sweep(str(model), points, scheduler, jobs, timing_only=not numerics,
                            done=(lambda row: progress(next(count), len(points))) if progress else None)
    if output is not None:
        text = sw.table_text(rows, "json" if output.name.removesuffix(".gz").endswith(".json") else "csv")
        write_text(output, text)
    if plot_path is not None:
        sw.plot(rows, plot_path, str(model))
    from rich.table import Table

    table = Table(title=f"sweep of {model.name}: {len(rows)} points", title_justify="left")
    for col in ("#", "target", "dtype", "tiling", "cycles", "µs", "bound"):
        table.add_column(col, justify="right" if col in ("#", "cycles", "µs") else "left",
                         no_wrap=col != "tiling", overflow="fold")
    for i, r in enumerate(rows, 1):
        ran = not r.get("error")
        table.add_row(str(i), r["target"], r["dtype"], r["tiling"], f"{r['total_cycles']:,.0f}" if ran else "failed",
                      f"{r['latency_us']:,.2f}" if ran else "-", f"{r['bound']} {100 * r['bound_share']:.0f}%" if ran else "-")
    console.print(table)
    for i, r in enumerate(rows, 1):
        if r.get("error"):
            console.print(f"#{i} failed: {r['error']}", markup=False, highlight=False)

from ascendir.api.generate_cmd import generate  # noqa: E402  (`ascendir generate`: its own module)

main.add_command(generate)

if __name__ == "__main__":
    main()
