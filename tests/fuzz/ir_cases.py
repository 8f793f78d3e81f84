"""Fuzz cases for IR text: mutated nn and ascend modules through `ascendir-opt` and `ascendir run`.

Seeds are the modules of tests/filecheck (each `// -----` chunk, comments dropped) and the ascend
modules the nn seeds lower to. Mutations work on tokens: integers and floats replaced by extreme
values, element types and shapes changed, enum words (pipes, memory spaces) swapped, lines
deleted, duplicated or moved up (a value used before its definition), an unterminated string
literal inserted, the text truncated, bytes inserted.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from hypothesis import strategies as st

from .harness import Case

FILECHECK = Path(__file__).resolve().parents[1] / "filecheck"

INT_VALUES = ["0", "-1", "1", "3", "17", "2147483648", "4611686018427387904", "9223372036854775807",
              "18446744073709551616", "1000000000", "-9223372036854775808", "65536"]
FLOAT_VALUES = ["1.0e+308", "-1.0e+308", "1.0e-320", "0.0", "-0.0", "0x7FC00000", "0x7F800000", "3.4e+38", "1.0e+39"]
TYPES = ["f32", "f16", "bf16", "i64", "i32", "i8", "i1", "f64", "index", "i4", "f8E4M3FN"]
WORDS = ["MTE1", "MTE2", "MTE3", "V", "M", "S", "FIX", "ALL", "gm", "ub", "l1", "l0a", "l0b", "l0c", "bt", "fb",
         "aic", "aiv", "mix"]
JUNK = ['"abc', '"\\', "%", "{", "}", "(", ")", "<", ">", ":", "->", "\x00", "\xff", "@", "#ascend<", "^bb0:", "ascend.set_flag",
        "ascend.wait_flag ALL -> MTE2, 0", "ascend.pipe_barrier ALL", '"' + "a" * 30]

NN_PASSES = ["O0", "O2", "convert-nn-to-ascend", "ascend-lowering{target=ascend910b2}", "recompose-nn", "choose-tiling",
             "fuse-matmul-epilogue", "fuse-attention", "fuse-elementwise", "ascend-lowering{target=ascend910a}",
             "fuse-ffn,choose-tiling", "fold-batchnorm", "shard-tensor-parallel{tp=2}",
             "O2,shard-tensor-parallel{tp=4 sequence-parallel=true}"]
ASCEND_PASSES = ["insert-sync", "plan-memory", "double-buffer", "double-buffer,plan-memory,insert-sync", ""]


def _chunks(text: str) -> list[str]:
    out = []
    for chunk in text.split("// -----"):
        body = "\n".join(ln for ln in chunk.splitlines() if not ln.lstrip().startswith("//")).strip()
        if body:
            out.append(body + "\n")
    return out


@functools.cache
def seeds() -> tuple[tuple[str, str], ...]:
    """(level, text): every filecheck module and the ascend modules of the nn ones."""
    found: list[tuple[str, str]] = []
    for path in sorted(FILECHECK.rglob("*.mlir")):
        for chunk in _chunks(path.read_text()):
            found.append(("ascend" if "ascend.kernel" in chunk else "nn", chunk))
    found.extend(("ascend", t) for t in _lowered([t for lvl, t in found if lvl == "nn"]))
    return tuple(found)


def _lowered(texts: list[str]) -> list[str]:
    """The nn seeds that lower (O2 then the ascend lowering for 910B2), printed."""
    from xdsl.parser import Parser

    from ascendir.driver import lower, print_ir, run_passes, parse_pipeline
    from ascendir.session import make_context

    out = []
    for text in texts:
        try:
            module = Parser(make_context(), text).parse_module()
            module.verify()
            run_passes(module, parse_pipeline(None, "O2", "ascend910b2", None), None)
            lower(module, None, "ascend910b2")
            out.append(print_ir(module))
        except Exception:  # noqa: BLE001 - a seed that does not lower (error tests) is skipped
            continue
    return out


_INT = re.compile(r"(?<![\w.%#@^])\d+(?![\w.])")
_FLOAT = re.compile(r"-?\d+\.\d+(e[-+]?\d+)?")
_TYPE = re.compile(r"\b(f16|f32|bf16|i1|i8|i32|i64|f64|index)\b")
_WORD = re.compile(r"\b(MTE1|MTE2|MTE3|V|M|S|FIX|ALL|gm|ub|l1|l0a|l0b|l0c|aic|aiv)\b")


def _sub_one(draw, pattern: re.Pattern, text: str, choices: list[str]) -> str:
    spans = [m.span() for m in pattern.finditer(text)]
    if not spans:
        return text
    a, b = draw(st.sampled_from(spans))
    return text[:a] + draw(st.sampled_from(choices)) + text[b:]


def mutate(draw, text: str) -> tuple[str, str]:
    how = draw(st.sampled_from(["int", "int", "float", "type", "word", "word", "delete", "duplicate", "move_up",
                                "junk", "truncate", "string", "shape"]))
    lines = text.splitlines()
    if how == "int":
        text = _sub_one(draw, _INT, text, INT_VALUES)
    elif how == "float":
        text = _sub_one(draw, _FLOAT, text, FLOAT_VALUES)
    elif how == "type":
        text = _sub_one(draw, _TYPE, text, TYPES)
    elif how == "word":
        text = _sub_one(draw, _WORD, text, WORDS)
    elif how == "shape":
        text = _sub_one(draw, re.compile(r"\d+x"), text, ["0x", "1x", "100000x", "4611686018427387904x", "?x"])
    elif how in ("delete", "duplicate", "move_up") and len(lines) > 2:
        i = draw(st.integers(1, len(lines) - 2))
        if how == "delete":
            del lines[i]
        elif how == "duplicate":
            lines.insert(i, lines[i])
        else:  # a value used before its definition
            j = draw(st.integers(1, i))
            lines.insert(j, lines.pop(i))
        text = "\n".join(lines) + "\n"
    elif how == "junk":
        i = draw(st.integers(0, len(text)))
        text = text[:i] + draw(st.sampled_from(JUNK)) + text[i:]
    elif how == "string":  # an unterminated string literal (the xDSL lexer backtracks on it)
        i = draw(st.integers(0, len(text)))
        text = text[:i] + '"' + "x" * draw(st.integers(1, 40)) + text[i:].replace('"', "", 1)
    elif how == "truncate":
        text = text[: draw(st.integers(0, len(text)))]
    return text, how


@st.composite
def ir_cases(draw) -> Case:
    level, text = draw(st.sampled_from(seeds()))
    notes = [level]
    for _ in range(draw(st.integers(1, 3))):
        text, how = mutate(draw, text)
        notes.append(how)
    data = text.encode("utf-8", "surrogateescape") if "\xff" not in text else text.encode("latin-1", "replace")
    files = {"in.mlir": data}
    tool = draw(st.sampled_from(["opt", "opt", "run"]))
    if tool == "run":
        argv = draw(st.sampled_from([("run", "in.mlir", "--timing-only"), ("run", "in.mlir"), ("compile", "in.mlir", "--emit", "ascend")]))
        return Case("ascendir", argv, files, " ".join(notes))
    passes = draw(st.sampled_from(NN_PASSES if level == "nn" else ASCEND_PASSES))
    argv = ("in.mlir", "-p", passes) if passes else ("in.mlir",)
    return Case("ascendir-opt", argv, files, " ".join(notes))
