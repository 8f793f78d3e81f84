"""What the `ascendir` commands share: their console, the checks of their output paths, their
common options, the --plots files and the progress bar. Imports nothing heavy at start-up, so
`ascendir --help` stays fast."""

from __future__ import annotations

from collections.abc import Sequence

import os
import signal
import sys
from pathlib import Path

import click

from ascendir.errors import AscendirError
from ascendir.api.outputs import check_writable, is_stdout, output_kind

CLOSED_STDOUT = 128 + signal.SIGPIPE  # the status of a Unix tool killed by SIGPIPE


def closed_stdout() -> None:
    """The reader closed stdout: discard what is still buffered and end quietly."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(CLOSED_STDOUT)


def cli_console(stderr: bool = False):
    """A rich Console that ends as other Unix tools do on a closed stdout (rich's own ends with
    status 1). rich is imported here, not at start-up: `ascendir --help` stays fast."""
    from rich.console import Console

    class QuietConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            closed_stdout()

    return QuietConsole(stderr=stderr)


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


def topology_opt(joined: str):
    """The `--topology NAME|FILE.toml` option of the commands that simulate devices together
    (run, generate, sweep); `joined` names the devices it joins in the help text."""
    return click.option("--topology", default=None, metavar="NAME|FILE.toml",
                        help=f"How {joined} are joined (shipped: atlas800-a2, atlas800-a2-x2, a3-supernode-16; default atlas800-a2); "
                             "its chip is the default --target.")


def topology_target(target: str, topology: str | None, param: str = "target") -> str:
    """The chip a run simulates: --target, or when --target is left at its default and a
    --topology is given, the topology's own chip (its [topology] chip: a3-supernode-16 joins
    A3 dies, not the default 910B2). `param`: the command's name of its --target.

    Raises:
        AscendirError: an unknown or malformed topology (hardware/topology.py)."""
    if topology is None or click.get_current_context().get_parameter_source(param) is not click.core.ParameterSource.DEFAULT:
        return target
    from ascendir.hardware.topology import load_topology

    return load_topology(topology).chip


plots_opt = click.option("--plots", type=click.Path(path_type=Path), default=None, metavar="DIR",
                          help="Write roofline.{png,svg} and timeline.{png,svg} here (needs matplotlib: pip install 'ascendir[plots]').")


_shape_opt = click.option("--input-shape", "input_shapes", multiple=True, metavar="NAME=DxD", help="Pin a dynamic input shape, e.g. input_ids=1x128.")


def compile_options(f):
    """The options `compile` and `run` share (target, pipeline, shapes, precision, tiling...)."""
    for option in reversed((_target_opt, _pipeline_opt, _opt_level, _shape_opt, _verify_opt, _tiling_opt, _shape_only_opt, _dtype_opt)):
        f = option(f)
    return f


def run_inputs(model: Path, target: str, *more: Path | None) -> list[Path]:
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


def check_outputs(outputs: list[Path | None], inputs: list[Path | None], plots: Path | None = None) -> None:
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


def verified(pipeline, source: str, after: Sequence[str] = (), dtype: str = "fp32") -> dict:
    """What --verify-numerics checked (the passes of `pipeline`, then the passes named `after`:
    a tensor-parallel run's shard and MC2 passes, checked on every rank), printed on stderr with
    the tolerances of the `--dtype` policy's outputs (and f32's, which other outputs keep), and kept
    in the report."""
    from ascendir.driver import TOLERANCES

    names = [*(p.name for p in pipeline.passes), *after]
    shown = {"fp16": [("f16", "float16")], "bf16": [("bf16", "bfloat16")]}.get(dtype, []) + [("f32", "float32")]
    tols = "; ".join(f"{short}: rtol {TOLERANCES[full][0]:g}, atol {TOLERANCES[full][1]:g}" for short, full in shown)
    click.echo(f"verify-numerics: {len(names)} passes ({', '.join(names)}) each kept every output within its dtype's "
               f"tolerance ({tols}; atol x max(1, max|value|)) on {source}", err=True)
    return {"passes": names, "inputs": source, "status": "pass"}


def prepare_plots(directory: Path) -> None:
    """Before any work: matplotlib importable and `directory` usable (made when the plots are written)."""
    from ascendir.api.plots import prepare_dir, require_matplotlib

    require_matplotlib()
    prepare_dir(directory)


def write_plot_files(report: dict, trace_events: list[dict] | None, directory: Path) -> None:
    from ascendir.api.plots import write_plots

    paths = write_plots(report, trace_events, directory)
    click.echo(f"wrote {', '.join(p.name for p in paths)} in {directory}", err=True)


class launch_progress:
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
                            TimeElapsedColumn(), console=cli_console(stderr=True), transient=True)
        self.bar.start()
        task = self.bar.add_task(self.what, total=None)

        def update(done: int, total: int) -> None:
            self.bar.update(task, completed=done, total=max(done, total))

        return update

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()

