"""Edge cases tried against the int branch (onnxruntime's Cast for fp16 <-> float32 conversions:
interpreter/exec/ort_cast.py). The conversions held bit for bit against numpy's cast on odd
memory (unaligned, read-only, byte-swapped, overlapping, transposed, 3-D) and through whole kernels
with subnormals, signed zeros, inf and NaN (quiet and signalling, with payloads), values
around 65504..65520, sizes 4095..131073, in threads and on two devices. What did not hold: a
process where onnxruntime does not import (a broken or missing wheel) fails a numerics run with
`internal error:` (exit 1) as soon as one conversion reaches CAST_ELEMENTS elements, where main ran
it (README: bad input or environment prints one line `error: ...` and exits 2)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from ascendir.interpreter.exec import ort_cast

# runs the CLI with every onnxruntime import failing, as a broken install does
_BLOCKED = (
    "import sys, importlib.abc\n"
    "class _NoOrt(importlib.abc.MetaPathFinder):\n"
    "    def find_spec(self, name, path, target=None):\n"
    "        if name == 'onnxruntime' or name.startswith('onnxruntime.'):\n"
    "            raise ImportError('libonnxruntime.so: cannot open shared object file')\n"
    "sys.meta_path.insert(0, _NoOrt())\n"
    "from ascendir.api.entry import ascendir\n"
    "sys.argv = ['ascendir'] + sys.argv[1:]\n"
    "ascendir()\n")


def _matmul_model(path: str) -> None:
    """An fp16 MatMul x[128, 256] @ w[256, 256]: its weight slices are widened through
    ort_cast.widen_into (65,536 elements, over CAST_ELEMENTS)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w = (np.random.default_rng(0).standard_normal((256, 256)) * 0.05).astype(np.float16)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [128, 256])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)], [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def test_numerics_run_without_onnxruntime_is_no_internal_error(tmp_path):
    model = str(tmp_path / "mm.onnx")
    _matmul_model(model)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    env.pop("ASCENDIR_DEBUG", None)
    p = subprocess.run([sys.executable, "-c", _BLOCKED, "run", model], capture_output=True, text=True, env=env, timeout=120)
    out = p.stdout + p.stderr
    assert "internal error" not in out, out[-2000:]
    assert p.returncode in (0, 2), out[-2000:]
    if p.returncode == 2:  # a clear one-line error naming what is missing
        assert "onnxruntime" in out and out.count("error:") == 1, out[-2000:]


@pytest.mark.parametrize("case", ["unaligned", "readonly", "byteswapped"])
def test_conversions_of_odd_memory_are_numpys_cast(case):
    rng = np.random.default_rng(1)
    h = rng.standard_normal(8192).astype(np.float16)
    h.view(np.uint16)[::101] = 0x0001  # fp16 subnormals
    f = (rng.standard_normal(8192) * 300).astype(np.float32)
    if case == "unaligned":
        hb = np.zeros(h.nbytes + 1, np.uint8)
        h2 = np.frombuffer(hb.data, np.float16, h.size, offset=1)
        h2[...] = h
        fb = np.zeros(f.nbytes + 2, np.uint8)
        f2 = np.frombuffer(fb.data, np.float32, f.size, offset=2)
        f2[...] = f
        assert not h2.flags.aligned and not f2.flags.aligned
    elif case == "readonly":
        h2, f2 = h.copy(), f.copy()
        h2.flags.writeable = f2.flags.writeable = False
    else:
        h2, f2 = h.astype(">f2"), f.astype(">f4")
    wide = np.empty(h.shape, np.float32)
    ort_cast.widen_into(wide, h2)
    assert wide.tobytes() == h.astype(np.float32).tobytes()
    narrow = np.empty(f.shape, np.float16)
    if not ort_cast.narrow_into(narrow, f2):  # (declined: the caller casts with numpy)
        np.copyto(narrow, f2, casting="unsafe")
    assert narrow.tobytes() == f.astype(np.float16).tobytes()
