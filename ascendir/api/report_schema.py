"""The JSON report's schema (report.schema.json, JSON Schema 2020-12, published with the
package) and the check of a document against it with `jsonschema`.

`SCHEMA_VERSION` is the report's `schema_version`: a report keeps validating against the schema
of its major version (keys may be added, none removed or retyped). JSON has no NaN or infinity:
`loads` reads Python's `NaN` / `Infinity` extensions as a `NonFinite` value, which the schema's
number types reject, so a non-finite figure is named by its path like any other problem.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

from ascendir.interpreter.report.report import SCHEMA_VERSION

SCHEMA_PATH = Path(__file__).with_name("report.schema.json")
__all__ = ["SCHEMA_PATH", "SCHEMA_VERSION", "NonFinite", "loads", "problem", "schema"]

_ARTICLE = {"object": "an object", "array": "a list", "string": "a string", "number": "a number", "integer": "an integer",
            "boolean": "true or false", "null": "null"}


class NonFinite:
    """`NaN`, `Infinity` or `-Infinity` read from a JSON document: not a JSON number."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return {"NaN": "NaN", "Infinity": "inf", "-Infinity": "-inf"}.get(self.text, self.text)


def loads(text: str | bytes):
    """`json.loads`, with non-finite numbers read as `NonFinite` (see the module docstring)."""
    return json.loads(text, parse_constant=NonFinite)


@cache
def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


@cache
def _validator():
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schema())


def _show(v) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _path(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _non_finite(v):
    """`v` with float NaN / inf (a report in memory) as NonFinite, as `loads` reads them."""
    if isinstance(v, float) and not math.isfinite(v):
        return NonFinite("NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity"))
    if isinstance(v, dict):
        return {k: _non_finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_non_finite(x) for x in v]
    return v


def _document_order(data, path) -> tuple[int, ...]:
    """Where `path` lies in `data`, as positions of its keys and indices in document order."""
    out, v = [], data
    for p in path:
        if isinstance(v, dict):
            out.append(list(v).index(p) if p in v else len(v))
        else:
            out.append(p)
        v = v[p] if isinstance(v, (dict, list)) else None
    return tuple(out)


def problem(data) -> str | None:
    """The first way `data` departs from the schema, as one line naming the field by its path
    (e.g. "'kernels[0].bytes.gm_read' is -1, not a finite non-negative number"), or None.
    `data` as read by `loads` (or a report dict: it is round-tripped through JSON)."""
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object"
    data = _non_finite(data)
    errors = list(_validator().iter_errors(data))
    if not errors:
        return None
    # the first in the file; a missing schema_version last: what else is wrong says more
    said = [(_say(e), _document_order(data, e.absolute_path)) for e in errors]
    return min(said, key=lambda m: (m[0] == "no 'schema_version'", m[1]))[0]


def _say(error) -> str:
    path = _path(error.absolute_path)
    where = f"'{path}'" if path else "the file"
    defs = schema()["$defs"].values()
    if error.validator == "required":
        missing = next(k for k in error.validator_value if k not in error.instance)
        return f"no '{_path([*error.absolute_path, missing])}'"
    if any(error.schema is d for d in defs):  # a leaf kind: say which
        return f"{where} is {_show(error.instance)}, not {error.schema['description']}"
    if error.validator == "type":
        kinds = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return f"{where} is {_show(error.instance)}, not {' or '.join(_ARTICLE.get(k, k) for k in kinds)}"
    if error.validator == "const":
        return f"{where} is {_show(error.instance)}, not {error.validator_value!r}"
    if error.validator == "enum":
        return f"{where} is {_show(error.instance)}, not one of {', '.join(map(repr, error.validator_value))}"
    return f"{where}: {' '.join(error.message.split())[:200]}"
