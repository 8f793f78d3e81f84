"""The `ascendir generate` command (the engine is api/generate.py): imports nothing heavy until
it runs, so `ascendir --help` stays fast."""

from __future__ import annotations

from pathlib import Path

import click

from ascendir.errors import AscendirError
from ascendir.api.cli_common import topology_opt, topology_target


@click.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--prompt-len", type=click.IntRange(min=1), default=16, show_default=True, help="Prompt tokens (ignored with --inputs).")
@click.option("--new-tokens", type=click.IntRange(min=1), default=8, show_default=True,
              help="Tokens to generate: the prefill picks the first, each of the N - 1 decode steps one more.")
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True, help="Sequences (ignored with --inputs).")
@click.option("--inputs", type=click.Path(path_type=Path), default=None, metavar="PROMPT.npz",
              help="The prompt: key input_ids (or input:input_ids), int [batch, prompt_len]; default: seeded random ids.")
@click.option("--outputs", type=click.Path(path_type=Path), default=None, metavar="OUT.npz",
              help="Write generated_ids [batch, new_tokens] and final_logits [batch, vocab].")
@click.option("--report", "report_path", type=click.Path(path_type=Path), default=None, metavar="R.json",
              help="Write the serving report (TTFT, TPOT, tokens/s, bytes per token, roofline) as JSON.")
@click.option("--plots", type=click.Path(path_type=Path), default=None, metavar="DIR", help="Write tpot.{png,svg} here (needs matplotlib).")
@click.option("--timing-only", is_flag=True, help="Simulate cycles without moving data (decode steps interpolated where checked affine).")
@click.option("--shape-only", is_flag=True, help="Read no weight bytes (implies --timing-only).")
@click.option("--dtype", type=click.Choice(["fp32", "fp16", "bf16"]), default="fp32", show_default=True, help="Precision policy for the ONNX input.")
@click.option("--target", default="ascend910b2", show_default=True, help="Chip name or hardware TOML.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the random prompt.")
@click.option("--tp", type=click.IntRange(min=1, max=4096), default=1, show_default=True,
              help="Tensor parallelism: shard every step Megatron-style over this many devices of --topology and simulate them together.")
@click.option("--devices", type=click.IntRange(min=1, max=4096), default=None,
              help="Devices to serve on: the same as --tp N (a plain decoder spreads over devices only by sharding).")
@click.option("--kv-block-size", type=int, default=None, metavar="N",
              help="Keep the KV cache paged: pools of N-position blocks read through a block table (a multiple of 16 in 16..512; default: contiguous).")
@topology_opt("the --tp devices")
def generate(model: Path, prompt_len: int, new_tokens: int, batch: int, inputs: Path | None, outputs: Path | None,
             report_path: Path | None, plots: Path | None, timing_only: bool, shape_only: bool, dtype: str, target: str, seed: int,
             tp: int, devices: int, kv_block_size: int | None, topology: str | None) -> None:
    """Serve MODEL (an ONNX decoder with its KV cache as inputs/outputs) in the simulator:
    prefill the prompt, then greedy decode; print TTFT, TPOT, tokens/s and the HBM roofline."""
    import json
    import sys

    from ascendir.api.cli_common import check_outputs, run_inputs
    from ascendir.api.outputs import check_writable, write_output, write_text

    if tp > 1 and devices not in (None, tp):
        raise AscendirError(f"--tp {tp} runs on {tp} devices; --devices {devices} differs")
    tp = max(tp, devices or 1)
    if topology is not None and tp == 1:
        raise AscendirError("--topology joins the --tp devices; give --tp N (or --devices N)")
    target = topology_target(target, topology)
    timing_only = timing_only or shape_only
    if outputs is not None and timing_only:
        raise AscendirError(f"--outputs needs numerics; drop {'--shape-only' if shape_only else '--timing-only'}")
    if kv_block_size is not None:  # 0 or less is no block size, not "contiguous" (the default)
        from ascendir.transforms.nn.page_kv_cache import check_block_size

        check_block_size(kv_block_size)
    for p, what in ((outputs, "--outputs"), (report_path, "--report")):
        if p is not None:
            check_writable(p, what)
    # as run / compile / sweep: neither output may overwrite the model, its data or the prompt
    check_outputs([outputs, report_path], run_inputs(model, target, inputs,
                                                      Path(topology) if topology and topology.endswith(".toml") else None))
    if plots is not None:
        from ascendir.api.plots import prepare_dir, require_matplotlib

        require_matplotlib()
        prepare_dir(plots)
    prompt = _read_prompt(inputs) if inputs is not None else None
    if prompt is not None and timing_only:
        raise AscendirError("--inputs gives the prompt's data; --timing-only moves none (use --prompt-len / --batch)")

    from ascendir.api.generate import generate as run, plot_tpot, schema_problem

    def say(msg: str) -> None:
        if sys.stderr.isatty():
            click.echo(msg, err=True)

    g = run(model, prompt_len, new_tokens, batch, prompt, target, dtype, timing_only, shape_only, seed, progress=say, tp=tp, topology=topology,
            kv_block_size=kv_block_size or 0)
    broken = schema_problem(g.report)
    if broken:
        raise AscendirError(f"the generate report breaks its schema: {broken}")
    if outputs is not None:
        import io

        import numpy as np

        def save(f) -> None:
            buf = io.BytesIO()
            np.savez(buf, **g.outputs)
            f.write(buf.getbuffer())

        write_output(outputs, save)
    if report_path is not None:
        write_text(report_path, json.dumps(g.report, indent=1, allow_nan=False))
    if plots is not None:
        paths = plot_tpot(g.report, plots)
        click.echo(f"wrote {', '.join(p.name for p in paths)} in {plots}", err=True)
    for line in summary(g.report):
        click.echo(line)


def _read_prompt(path: Path):
    """input_ids of a .npz (key input_ids or input:input_ids).

    Raises:
        AscendirError: unreadable file, no such key."""
    import zipfile

    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as z:
            for key in ("input_ids", "input:input_ids"):
                if key in z.files:
                    return np.array(z[key])
            keys = ", ".join(z.files) or "none"
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise AscendirError(f"--inputs {path}: cannot read it as .npz ({' '.join(str(e).split())})") from None
    raise AscendirError(f"--inputs {path}: no key input_ids (or input:input_ids); keys: {keys}")


def summary(r: dict) -> list[str]:
    """The lines `generate` prints: the serving figures of report `r`."""
    def ms(s):
        return "-" if s is None else f"{s * 1e3:.4g} ms"

    def bound(phase):
        if not phase:
            return "-"
        return ", ".join(f"{b['resource']} {100 * b['share']:.0f} %" for b in phase["bound"][:3])

    b = r["hbm_bytes_per_token"]
    lines = [
        f"{r['model']['path']} on {r['target'] if r.get('tp', 1) == 1 else str(r['tp']) + ' x ' + r['target'] + ' (tensor parallel, ' + r['topology'] + ')'}: "
        f"batch {r['batch']}, prompt {r['prompt_len']}, {r['new_tokens']} new tokens"
        f"{' (timing only)' if r['timing_only'] else ''}",
        f"TTFT {ms(r['ttft_s'])}; TPOT mean {ms(r['tpot_mean_s'])} (roofline {ms(r['roofline_tpot_mean_s'])}); "
        f"{r['tokens_per_s']:.1f} tokens/s end to end" + (f", {r['decode_tokens_per_s']:.1f} tokens/s decoding" if r["decode_tokens_per_s"] else ""),
    ]
    if b["kv"] is not None:
        lines.append(f"HBM bytes per token: weights {b['weights'] / 2**20:.2f} MiB + KV {b['kv'] / 2**20:.2f} MiB (least); "
                     f"simulated {b['simulated'] / 2**20:.2f} MiB")
    kv = r["kv_cache"]
    per_device = f" ({kv['bytes_final_per_device'] / 2**20:.2f} MiB per device: its KV heads)" if r.get("tp", 1) > 1 else ""
    lines.append(f"KV cache: {kv['bytes_per_token']} B per token per sequence, {kv['bytes_final'] / 2**20:.2f} MiB at the end{per_device}")
    if kv.get("layout") == "paged":
        lines.append(f"KV layout: paged, blocks of {kv['block_size']} positions: {kv['blocks_used']} of {kv['blocks_allocated']} "
                     f"blocks used ({kv['bytes_used_blocks'] / 2**20:.2f} of {kv['bytes_allocated'] / 2**20:.2f} MiB)")
    else:
        lines.append("KV layout: contiguous")
    lines.append(f"bound: prefill {bound(r['phases']['prefill'])}; decode {bound(r['phases']['decode'])}")
    s = r["steps"]
    lines.append(f"decode steps: {len(s['simulated_cache_len'])} simulated, {s['interpolated']} interpolated ({s['method']})")
    return lines
