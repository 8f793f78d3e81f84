"""Output files (api/outputs.py) and how the CLI ends on signals (api/entry.py).

Regular files are replaced atomically, symlinks written through, FIFOs and character devices
written in place and never replaced, `-` is stdout, `.gz` is gzip; a path the run reads is an
error; SIGINT / SIGTERM end a run with 130 / 143, one line, no temporary left.

Never aimed at the machine's own /dev/null or /dev/stdout: a device node is made in tmp_path
(mknod of /dev/null's numbers) and FIFOs stand in for pipes.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

from ascendir.api.entry import Signalled
from ascendir.api.outputs import open_output, output_kind, write_text
from click.testing import CliRunner

from ascendir.api.cli import main
from ascendir.errors import AscendirError
from cli_helpers import assert_clean_error, run_cli

DATA = Path(__file__).parent / "data"
MLP = DATA / "mlp_small" / "model.onnx"
REF = DATA / "mlp_small" / "reference.npz"
ASCENDIR = Path(sys.executable).with_name("ascendir")


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_regular_file_is_replaced_atomically_and_keeps_its_mode(tmp_path: Path) -> None:
    out = tmp_path / "r.txt"
    out.write_text("old")
    out.chmod(0o640)
    write_text(out, "new")
    assert out.read_text() == "new" and stat.S_IMODE(out.stat().st_mode) == 0o640
    with pytest.raises(RuntimeError), open_output(out) as f:  # a failure half-way keeps the old file
        f.write(b"half")
        raise RuntimeError("boom")
    assert out.read_text() == "new" and _leftovers(tmp_path) == []
    fresh = tmp_path / "fresh.txt"
    with pytest.raises(Signalled), open_output(fresh) as f:  # as SIGTERM does through entry.py
        f.write(b"half")
        raise Signalled(signal.SIGTERM)
    assert not fresh.exists() and _leftovers(tmp_path) == []


def test_symlink_is_written_through(tmp_path: Path) -> None:
    target, link = tmp_path / "target.json", tmp_path / "link.json"
    target.write_text("old")
    link.symlink_to(target.name)
    write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to("made.json")
    write_text(dangling, "made")
    assert dangling.is_symlink() and (tmp_path / "made.json").read_text() == "made"
    assert _leftovers(tmp_path) == []


def test_fifo_is_written_in_place(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    assert output_kind(fifo) == "through"
    write_text(fifo, "through the pipe")
    reader.join(10)
    assert got == [b"through the pipe"] and stat.S_ISFIFO(fifo.stat().st_mode)


def test_character_device_is_written_in_place(tmp_path: Path) -> None:
    # the kind is read with stat only: nothing is written to the machine's /dev/null here (and
    # it is checked only while it is a device: a tool that renamed a file over it made it regular)
    if stat.S_ISCHR(os.stat("/dev/null").st_mode):
        assert output_kind("/dev/null") == "through"
    node = tmp_path / "null"
    try:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers, in tmp
    except (PermissionError, OSError):
        pytest.skip("mknod is not permitted here")
    try:
        write_text(node, "discarded")
    except AscendirError as e:  # a nodev mount: open fails, yet nothing may be replaced
        assert "cannot write" in str(e)
    assert stat.S_ISCHR(node.stat().st_mode) and _leftovers(tmp_path) == []
    r = run_cli("run", MLP, "--timing-only", "--report", node)
    assert r.exit_code in (0, 2), r.output
    assert stat.S_ISCHR(node.stat().st_mode)


@pytest.mark.skipif(not (os.path.exists("/dev/full") and stat.S_ISCHR(os.stat("/dev/full").st_mode)), reason="no /dev/full")
def test_a_full_device_is_one_line_error(tmp_path: Path) -> None:
    """An output written in place that fails (ENOSPC: /dev/full) names it, exit 2: was
    `internal error: OSError: [Errno 28]` (--outputs, --report, --trace, -o, and stdout)."""
    for opt in ("--outputs", "--report", "--trace"):
        assert_clean_error(run_cli("run", MLP, opt, "/dev/full"), "cannot write", "/dev/full", "No space left")
    r = run_cli("compile", MLP, "-o", "/dev/full")  # (after choose-tiling's note)
    assert r.exit_code == 2 and r.output.splitlines()[-1] == "error: cannot write output /dev/full: No space left on device", r.output
    with open("/dev/full", "wb") as full:  # the IR on stdout, as `> /dev/full` gives it
        r = subprocess.run([ASCENDIR, "compile", MLP], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    err = [line for line in r.stderr.splitlines() if not line.startswith("choose-tiling:")]
    assert r.returncode == 2 and err == ["error: cannot write standard output: No space left on device"], r.stderr


def test_directory_and_socket_are_never_replaced(tmp_path: Path) -> None:
    assert_clean_error(run_cli("run", MLP, "--timing-only", "--report", tmp_path), "it is a directory")
    sock_path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sock_path))
        assert_clean_error(run_cli("run", MLP, "--timing-only", "--trace", sock_path), "it is a socket")
        assert stat.S_ISSOCK(sock_path.stat().st_mode)


def test_dash_is_stdout_and_the_table_moves_to_stderr(tmp_path: Path) -> None:
    r = run_cli("run", MLP, "--timing-only", "--report", "-")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["total_cycles"] > 0  # stdout holds the JSON alone
    assert "kernels" in r.stderr
    assert not Path("-").exists()
    ir = run_cli("compile", MLP, "-o", "-")
    assert ir.exit_code == 0 and "ascend.kernel" in ir.stdout


def test_gz_names_are_gzip_and_report_reads_them(tmp_path: Path) -> None:
    rep, trace = tmp_path / "r.json.gz", tmp_path / "t.json.gz"
    assert run_cli("run", MLP, "--timing-only", "--report", rep, "--trace", trace).exit_code == 0
    assert json.loads(gzip.decompress(rep.read_bytes()))["kernels"]
    assert json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    r = run_cli("report", rep)
    assert r.exit_code == 0 and "kernels" in r.output


def test_an_output_that_is_an_input_is_an_error(tmp_path: Path) -> None:
    inputs = tmp_path / "in.npz"
    shutil.copy(REF, inputs)
    model = tmp_path / "m.onnx"
    shutil.copy(MLP, model)
    before = model.read_bytes()
    assert_clean_error(run_cli("run", model, "--outputs", model), "a file this run reads")
    assert_clean_error(run_cli("run", model, "--inputs", inputs, "--outputs", inputs), "a file this run reads")
    (tmp_path / "hard.npz").hardlink_to(inputs)
    assert_clean_error(run_cli("run", model, "--inputs", inputs, "--outputs", tmp_path / "hard.npz"), "a file this run reads")
    (tmp_path / "link.onnx").symlink_to(model)
    assert_clean_error(run_cli("run", model, "--report", tmp_path / "link.onnx"), "a file this run reads")
    assert model.read_bytes() == before
    # the weights file beside IR
    ir = tmp_path / "m.mlir"
    assert run_cli("compile", model, "-o", ir).exit_code == 0
    assert_clean_error(run_cli("run", ir, "--outputs", tmp_path / "m.weights.npz"), "a file this run reads")
    assert_clean_error(run_cli("compile", model, "-o", model), "a file this run reads")
    # the external data an ONNX model names
    proto = onnx.load(model)
    ext = tmp_path / "ext"
    ext.mkdir()
    onnx.save(proto, ext / "m.onnx", save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin",
              size_threshold=0)
    assert_clean_error(run_cli("run", ext / "m.onnx", "--report", ext / "w.bin"), "a file this run reads")
    assert (ext / "w.bin").stat().st_size > 0
    # two outputs naming one file
    assert_clean_error(run_cli("run", model, "--report", tmp_path / "a.json", "--trace", tmp_path / "a.json"), "must differ")
    assert _leftovers(tmp_path) == []


def _spawn(*args: object) -> subprocess.Popen:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.Popen([str(ASCENDIR), *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)


def _blocked_on_fifo(fifo: Path, proc: subprocess.Popen, timeout: float = 120.0) -> int:
    """Wait until `proc` opened `fifo` for reading (long after start-up); return our write end,
    held open without data so the process stays blocked reading it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO until a reader opened it
        except OSError:
            time.sleep(0.05)
    raise AssertionError("the run never read its --inputs")


@pytest.mark.parametrize("signum, code, line", [(signal.SIGTERM, 143, "error: terminated by SIGTERM"),
                                                (signal.SIGINT, 130, "error: interrupted by SIGINT")])
def test_signals_end_the_run_with_one_line_and_no_temporary(tmp_path: Path, signum: int, code: int, line: str) -> None:
    fifo = tmp_path / "inputs.npz"
    os.mkfifo(fifo)
    proc = _spawn("run", MLP, "--inputs", fifo, "--outputs", tmp_path / "o.npz", "--report", tmp_path / "r.json")
    fd = _blocked_on_fifo(fifo, proc)
    try:
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(fd)
    assert proc.returncode == code, err
    assert err.strip() == line, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inputs.npz"]


def _handlers_installed(proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Wait until entry.py caught SIGTERM (the interpreter's own start-up, before any ascendir
    code runs, is Python's and out of reach)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
        except OSError:
            status = ""
        caught = next((int(x.split()[1], 16) for x in status.splitlines() if x.startswith("SigCgt:")), 0)
        if caught >> (signal.SIGTERM - 1) & 1:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.005)
    raise AssertionError("no SIGTERM handler")


def test_sigint_during_start_up_prints_no_traceback(tmp_path: Path) -> None:
    """SIGINT as soon as ascendir's code runs (imports, click, compile): one line, exit 130."""
    for delay in (0.0, 0.1, 0.4):
        proc = _spawn("run", MLP, "--timing-only")
        _handlers_installed(proc)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert "Traceback" not in err, err
        assert proc.returncode == 130 and err.strip() == "error: interrupted by SIGINT", (delay, err)


def test_sigint_handled_in_a_weakref_callback_still_ends_the_run() -> None:
    """A signal whose handler runs inside a weakref callback (the import system's module locks
    use them: seen once as CI's start-up SIGINT test printing "Exception ignored in ... cb"),
    where Python prints and drops the exception: one line, exit 130, not a traceback and a run
    that goes on."""
    code = """if True:
        import os, signal, weakref
        from ascendir.api import entry
        class T: pass
        def main():
            t = T()
            def cb(_):
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(1000):  # (calls: the handler runs here, in the callback)
                    len(())
            r = weakref.ref(t, cb)
            del t
            for _ in range(10_000_000):
                len(())
            print("finished")
        entry._guarded("ascendir", lambda: main)
    """
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr and "finished" not in proc.stdout, proc.stderr
    assert proc.returncode == 130 and proc.stderr.strip() == "error: interrupted by SIGINT", proc.stderr


def test_outputs_npz_written_through_symlink_is_loadable(tmp_path: Path) -> None:
    real, link = tmp_path / "real.npz", tmp_path / "link.npz"
    link.symlink_to(real.name)
    r = run_cli("run", MLP, "--inputs", REF, "--outputs", link)
    assert r.exit_code == 0, r.output
    assert link.is_symlink() and np.load(real)["output"].shape == np.load(REF)["output:output"].shape


def test_link_to_a_proc_descriptor_is_appended_to_not_replaced(tmp_path: Path) -> None:
    # `-o /dev/stdout > out.txt`, with a link of our own to /proc/self/fd/3 (realpath follows it
    # on to out.txt, which was then renamed over and /dev/stdout.weights.npz made beside the link)
    link, out = tmp_path / "stdout", tmp_path / "out.txt"
    link.symlink_to("/proc/self/fd/3")
    out.write_text("before\n")
    inode = out.stat().st_ino
    proc = subprocess.run(["sh", "-c", '"$0" compile "$1" -o "$2" 3>>"$3"', ASCENDIR, MLP, link, out], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_ino == inode and out.read_text().startswith("before\nbuiltin.module")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt", "stdout"]  # no weights beside the link
    assert "no weights were written" in proc.stderr
    assert output_kind(tmp_path / "stdout") == "through"


def test_symlink_loop_output_is_refused(tmp_path: Path) -> None:
    (tmp_path / "l1").symlink_to("l2")
    (tmp_path / "l2").symlink_to("l1")
    assert_clean_error(run_cli("compile", MLP, "-o", tmp_path / "l1"), "symlink loop")
    assert all(p.is_symlink() for p in tmp_path.iterdir()) and len(list(tmp_path.iterdir())) == 2


def test_report_inside_plots_dir_under_a_plot_name_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    plots = tmp_path / "P"
    assert_clean_error(run_cli("run", MLP, "--timing-only", "--plots", plots, "--report", plots / "roofline.png"),
                       "output paths must differ")
    assert not plots.exists()
    rep = tmp_path / "roofline.svg"
    assert run_cli("run", MLP, "--timing-only", "--report", rep).exit_code == 0
    assert_clean_error(run_cli("report", rep, "--plots", tmp_path), "output paths must differ")  # it reads rep
    json.loads(rep.read_text())


def test_gzipped_outputs_npz_and_ir_round_trip(tmp_path: Path) -> None:
    ref = np.load(REF)["output:output"]
    out = tmp_path / "out.npz.gz"
    r = run_cli("run", MLP, "--inputs", REF, "--outputs", out)  # np.savez seeks: was "Negative seek in write mode"
    assert r.exit_code == 0, r.output
    with gzip.open(out) as f:
        np.testing.assert_allclose(np.load(f)["output"], ref, rtol=1e-3, atol=1e-4)
    ir = tmp_path / "m.mlir.gz"
    r = run_cli("compile", MLP, "-o", ir)
    assert r.exit_code == 0, r.output
    assert ir.read_bytes()[:2] == b"\x1f\x8b" and (tmp_path / "m.weights.npz").exists()
    out2 = tmp_path / "out2.npz"
    r = run_cli("run", ir, "--inputs", REF, "--outputs", out2)  # the IR reader gunzips it
    assert r.exit_code == 0, r.output
    np.testing.assert_allclose(np.load(out2)["output"], ref, rtol=1e-3, atol=1e-4)


def test_report_dash_reads_stdin(tmp_path: Path) -> None:
    rep = tmp_path / "r.json"
    assert run_cli("run", MLP, "--timing-only", "--report", rep).exit_code == 0
    r = CliRunner().invoke(main, ["report", "-"], input=rep.read_bytes(), catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert f"total {round(json.loads(rep.read_text())['total_cycles']):,} cycles" in r.output
