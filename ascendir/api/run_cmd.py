"""The `ascendir run` command: compile a model for a chip (or a cluster of them) and run it in
the interpreter; the verdict, the report and the run's files. Imports nothing heavy until it
runs, so `ascendir --help` stays fast."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ascendir.errors import AscendirError
from ascendir.api.cli_common import (
    check_outputs, cli_console, compile_options, launch_progress, plots_opt, prepare_plots, run_inputs, topology_opt, topology_target, verified,
    write_plot_files,
)
from ascendir.api.outputs import is_stdout, open_output, write_output, write_text

if TYPE_CHECKING:  # (numpy is imported where a run needs it: the CLI starts without it)
    import numpy as np


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


@click.command()
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
@click.option("--devices", type=click.IntRange(min=1, max=4096), default=None,
              help="Run the module SPMD on this many devices of --topology (a module holding collectives): every rank "
                   "gets the same weights; an --inputs key NAME@R feeds rank R only; random inputs use seed + rank. "
                   "[default: --tp / --ep N, else 1]")
@topology_opt("the devices")
@click.option("--tp", type=click.IntRange(min=1, max=4096), default=1, show_default=True,
              help="Tensor parallelism: shard the model Megatron-style over this many devices of --topology "
                   "(shard-tensor-parallel after the -O pipeline) and run every rank on the same inputs.")
@click.option("--ep", type=click.IntRange(min=1, max=4096), default=1, show_default=True,
              help="Expert parallelism: spread the routed experts of the MoE blocks over this many devices of --topology "
                   "(shard-expert-parallel after the -O2 pipeline; dispatch / combine all-to-all) and run every rank on the same inputs.")
@click.option("--sequence-parallel", is_flag=True, help="With --tp: norms and residuals on sequence shards (reduce_scatter / all_gather instead of all_reduce).")
@click.option("--moe-routing", default=None, metavar="uniform|skew=A|FILE.npz",
              help="Routing of the MoE blocks in a --timing-only run without --inputs (default uniform; FILE: "
                   "'indices' [tokens, k]); other runs route their inputs. Stated in the report.")
@plots_opt
@compile_options
def run(model: Path, inputs: Path | None, outputs: Path | None, timing_only: bool, check_races: bool, report_path: Path | None,
        trace_path: Path | None, seed: int, expected: Path | None, check_ort: bool, devices: int, topology: str | None,
        tp: int, ep: int, sequence_parallel: bool, moe_routing: str | None, plots: Path | None, target: str, pipeline: str | None, opt_level: str, input_shapes,
        verify_numerics: bool, tiling: str | None, shape_only: bool, dtype: str) -> None:
    """Compile MODEL (.onnx or .mlir) for TARGET and run it in the interpreter; print the verdict
    (with expected outputs at hand) and the report. Exit code 1: an output beyond its tolerance."""
    from ascendir.driver import gather_bounds, io_names, is_lowered, main_func, parse_pipeline, random_inputs, simulate_ranks
    from ascendir.interpreter import simulate
    from ascendir.api.report_table import render

    timing_only = _check_run_flags(model, outputs, timing_only, shape_only, verify_numerics, expected, check_ort)
    target = topology_target(target, topology)
    check_outputs([outputs, report_path, trace_path], run_inputs(model, target, inputs, expected), plots)
    if plots is not None:
        prepare_plots(plots)
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
        if devices not in (None, tp):
            raise AscendirError(f"--tp {tp} runs on {tp} devices; --devices {devices} differs")
        devices = tp
    if ep > 1:
        if tp > 1:
            raise AscendirError(f"--ep {ep} with --tp {tp}: expert and tensor parallelism together are not supported yet")
        if is_lowered(module):
            raise AscendirError(f"--ep shards an nn-level model; {model} is lowered IR (compile the ONNX model or the nn IR)")
        if devices not in (None, ep):
            raise AscendirError(f"--ep {ep} runs on {ep} devices; --devices {devices} differs")
        devices = ep
    devices = devices or 1
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
    fused_router = not is_lowered(module) and "fuse-moe-gating" in {
        p.name for p in parse_pipeline(pipeline, f"O{opt_level}", target, tiling).passes}  # the routers' kernels
    moe, routing = _moe_routing(module, weights, model, inputs, seed, bounds, timing_only, shape_only, moe_routing, dtype,
                                fused_router)
    rank_weights = [weights] * devices
    if not is_lowered(module):
        ran, stores = _lower_for_run(module, weights, hw, inputs, seed, bounds, pipeline, opt_level, target, tiling, verify_numerics,
                                     dtype, notes, tp, sequence_parallel, topology, devices, ep)
        if tp > 1 or ep > 1:
            weights, rank_weights = stores[0], stores
    if not timing_only:  # before any input array is made: a run larger than the host is refused here
        _check_host_memory(model, module, inputs is None, devices)
    if inputs:
        feeds = _load_inputs(inputs, main_func(module), dtype if model.suffix == ".onnx" else "fp32", devices if spmd else 0)
    else:  # timing-only moves no data: no need to make (possibly huge) random inputs
        feeds = {} if timing_only else random_inputs(module, seed, bounds)

    # an output on stdout (`--report -`) keeps it for itself: the table goes to stderr
    console = cli_console(stderr=any(is_stdout(p) for p in (outputs, report_path, trace_path)))
    with contextlib.ExitStack() as files:  # a streamed trace lands only if the whole run does
        writer = None
        if trace_path is not None and not spmd:  # a cluster's trace (a track per device) is written at the end
            from ascendir.interpreter.report.trace import TraceWriter

            writer = TraceWriter(hw, files.enter_context(open_output(trace_path, "trace")), keep=plots is not None)
        if spmd:
            # tensor parallel: every rank computes on the whole input; else NAME@R keys or seed + rank
            rank_feeds = [feeds if tp > 1 or ep > 1 else _rank_feeds(feeds, r, module, seed, bounds, timing_only, inputs is not None)
                          for r in range(devices)]
            with launch_progress(f"simulating on {devices} x {hw.name}") as progress:
                result = simulate_ranks([module] * devices, rank_weights, rank_feeds, hw, topo, timing_only,
                                        trace_path is not None or plots is not None, routing)
            feeds = rank_feeds[0]
        else:
            with launch_progress(f"simulating on {hw.name}") as progress:
                result = simulate(module, weights, feeds, hw, timing_only=timing_only, trace=writer or plots is not None,
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
            if check_ort and routing and dtype in ("fp16", "bf16"):
                _explain_routing_flips(verdict, result.outputs, want, model, input_shapes, inputs, feeds, routing, dtype)
            if check_ort and verdict["status"] == "fail":
                from ascendir.api.verdict import explain_by_optimised, note_u8s8

                try:
                    optimised = onnxruntime_outputs(model, feeds, optimised=True)
                except AscendirError:  # onnxruntime's optimisers fail where its plain graph ran: no note, the FAIL stands
                    pass
                else:
                    explain_by_optimised(verdict, result.outputs, optimised, dtype)
                note_u8s8(verdict, model)
            result.report["verdict"] = verdict
        _write_run_files(result, outputs, report_path, None if writer else trace_path, plots)
        if writer is not None:
            writer.close(result.report)
    render(result.report, console)  # the verdict first, when there is one
    if verdict is not None and verdict["status"] == "fail":
        sys.exit(1)


def _explain_routing_flips(verdict: dict, got: dict, want: dict, model: Path, input_shapes, inputs: Path | None, feeds: dict,
                           routing: dict, dtype: str) -> None:
    """Add to a 16-bit run's --check-ort `verdict` the tokens its MoE routers (`routing`, the
    run's TopK indices by block) route to another expert set than the fp32 model does on the
    same `feeds` (onnxruntime's routing), and whether the other tokens are within tolerance
    (verdict.explain_routing_flip). The fp32 model is imported only when the verdict FAILs.

    Raises: AscendirError as routed_indices (an op without reference semantics)."""
    if verdict["status"] != "fail":
        return
    from ascendir.api.moe_report import flipped_tokens, routing_by_block
    from ascendir.api.verdict import explain_routing_flip
    from ascendir.driver import parse_input_shapes
    from ascendir.frontends.onnx import import_onnx

    hints = _input_shapes_of(inputs) if inputs is not None else None
    module32, weights32 = import_onnx(model, parse_input_shapes(input_shapes), dtype="fp32", shape_hints=hints)
    ref = routing_by_block(module32, weights32, feeds)
    if not ref:
        return
    explain_routing_flip(verdict, got, want, dtype, flipped_tokens(routing, ref), next(iter(ref.values())).shape[0])


def _check_host_memory(model: Path, module, random: bool, devices: int) -> None:
    """Refuse a numerics run of the lowered `module` whose estimated host bytes (inputs, weights,
    GM buffers, outputs; costmodel/host_memory.py) exceed the host budget, before allocating.

    Raises:
        AscendirError: naming the estimate, the budget and the largest buffer."""
    from ascendir.costmodel.host_memory import check_host_bytes, run_host_bytes
    from ascendir.driver import io_names, main_func

    main = main_func(module)
    total, items = run_host_bytes(module, main, io_names(main, results=False), random, devices)
    check_host_bytes(f"a run of {model.name[:60]}", total, items)


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
                 moe_routing: str | None, dtype: str, fused_router: bool) -> tuple[list[dict] | None, dict]:
    """The report's `moe` section (api/moe_report.py) for an nn-level model, before it is lowered:
    the routing of this run's inputs, or --moe-routing's assumption in a timing-only run without
    them; and that routing by block (what a timing-only simulation follows), {} without blocks.
    fused_router: the pipeline runs fuse-moe-gating (moe_report.routed_indices).

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
    got = moe_section(module, weights, feeds, text, spec, fused_router)
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
        AscendirError: --input-shape or --dtype on IR; weights missing for a numerics run; nn options on
            lowered IR; lowered IR for another architecture than --target's."""
    from ascendir.driver import is_lowered, load_ir, missing_weights, parse_input_shapes, reject_nn_options, reject_onnx_options, weights_path
    from ascendir.frontends.onnx import import_onnx
    from ascendir.hardware import load_target

    hw = load_target(target)
    if model.suffix == ".onnx":
        hints = _input_shapes_of(inputs) if inputs is not None else None
        module, weights = import_onnx(model, parse_input_shapes(input_shapes), shape_only=shape_only, dtype=dtype, shape_hints=hints)
        return module, weights, hw
    reject_onnx_options(model, input_shapes, dtype)
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
                   sequence_parallel: bool = False, topology: str | None = None, devices: int = 1, ep: int = 1) -> tuple[str, list]:
    """Run the nn pipeline (checking each pass's numerics with --verify-numerics), with `tp` > 1
    shard-tensor-parallel, and ascend-lowering on `module` in place (for `topology`: MC2's chunk
    counts suit its links); put what the report carries
    of it (the tiling search, the declined regions, what was verified) into `notes`. Returns the
    pipeline that ran, as `ascendir-opt -p` text, and the weight store of each rank ([weights]
    without tp)."""
    from ascendir.driver import lower, lower_tensor_parallel, main_func, parse_pipeline, random_inputs, run_passes
    from ascendir.transforms.nn.choose_tiling import log_json

    checks = None
    if verify_numerics:  # the run's inputs: a module of collectives checked on every rank's (NAME@r keys)
        spmd = devices if tp == 1 and ep == 1 and devices > 1 else 0
        checks = _load_inputs(inputs, main_func(module), dtype, spmd) if inputs else random_inputs(module, seed, bounds)
        if spmd and not inputs:
            checks.update({f"{k}@{r}": v for r in range(1, spmd) for k, v in random_inputs(module, seed + r, bounds).items()})
    nn_pipeline = parse_pipeline(pipeline, f"O{opt_level}", target, tiling)
    session = run_passes(module, nn_pipeline, weights, checks)
    stores = [weights]
    shard = []
    if ep > 1:
        module, stores = lower_tensor_parallel(module, weights, 1, target, False, session, (), topology, checks, ep=ep)
        shard = [f"shard-expert-parallel{{ep={ep}}}"]
    elif tp > 1:
        from ascendir.pipelines import after_shard

        mc2 = after_shard(opt_level) if pipeline is None else ()  # -O2: MC2 (pipelines.AFTER_SHARD)
        module, stores = lower_tensor_parallel(module, weights, tp, target, sequence_parallel, session, mc2, topology, checks)
        shard = [f"shard-tensor-parallel{{tp={tp}{' sequence-parallel=true' if sequence_parallel else ''}}}",
                 *(p.name for p in mc2)]
    else:
        lower(module, weights, target, session, topology)
    on = f' topology="{topology}"' if topology else ""
    ran = ",".join([*(str(p.pipeline_pass_spec()) for p in nn_pipeline.passes), *shard, f"ascend-lowering{{target={hw.name}{on}}}"])
    if session.search_log:  # what choose-tiling scored (the report's table prints it too)
        notes["tiling_search"] = log_json(session.search_log)
    if session.declined:  # regions lowered op by op because their template declined them
        notes["declined"] = [{"region": d.region, "kind": d.kind, "reason": d.reason} for d in session.declined]
    if verify_numerics:
        notes["verify_numerics"] = verified(nn_pipeline, f"the inputs of {inputs}" if inputs else f"random inputs (seed {seed})",
                                            [name.split("{")[0] for name in shard], dtype)
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
        write_plot_files(result.report, result.trace_events, plots)


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

