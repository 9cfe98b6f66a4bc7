"""Model output as data: JSON parsing and a small JSON-schema subset validator.

:func:`parse_json` reads model output with :func:`json.loads` (a fenced
```json block is tolerated; NaN/Infinity are rejected) and :func:`validate`
checks it against a schema (the supported keywords are listed in
:func:`schema_errors`). Nothing from a model is executed.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any, Callable

from ..errors import ModelError


# --------------------------------------------------------------------------- schema

_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
}
_KEYWORDS = {"type", "properties", "required", "additionalProperties", "items", "enum",
             "maxItems", "minItems", "maxLength", "minLength", "minimum", "maximum", "pattern"}
_ANNOTATIONS = {"title", "description", "$schema", "$id", "default", "examples"}


def schema_errors(instance: Any, schema: dict, path: str = "$") -> list[str]:
    """Every way ``instance`` violates ``schema``, as ``"<json path>: <problem>"`` strings.

    Supported: type (one name or a list), properties, required,
    additionalProperties (false/true), items, enum, maxItems, minItems,
    maxLength, minLength, minimum, maximum (inclusive; a non-finite number
    fails both) and pattern (JSON-schema semantics: an unanchored
    :func:`re.search`). Any other keyword raises ValueError so a schema
    never silently promises more than is checked.

    Patterns come from the caller's own schema, never from model output;
    keep them bounded (no nested quantifiers) since they run on model text.
    """
    unknown = set(schema) - _KEYWORDS - _ANNOTATIONS
    if unknown:
        raise ValueError(f"unsupported schema keyword(s) at {path}: {sorted(unknown)}")
    for key in ("minimum", "maximum"):
        if key in schema and not is_finite_number(schema[key]):
            raise ValueError(f"schema {key} at {path} must be a finite number, got {schema[key]!r}")
    pattern = _pattern(schema["pattern"], path) if "pattern" in schema else None
    errs: list[str] = []
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        for name in names:
            if name not in _TYPES:
                raise ValueError(f"unsupported schema type at {path}: {name!r}")
        if not any(_TYPES[n](instance) for n in names):
            return [f"{path}: expected {'/'.join(names)}, got {_json_type(instance)}"]
    if "enum" in schema and not any(_same(instance, e) for e in schema["enum"]):
        errs.append(f"{path}: {_short(instance)} is not one of {schema['enum']}")
    if isinstance(instance, str):
        if "maxLength" in schema and len(instance) > schema["maxLength"]:
            errs.append(f"{path}: longer than {schema['maxLength']} characters")
        if "minLength" in schema and len(instance) < schema["minLength"]:
            errs.append(f"{path}: shorter than {schema['minLength']} characters")
        if pattern is not None and pattern.search(instance) is None:
            errs.append(f"{path}: {_short(instance)} does not match pattern {schema['pattern']!r}")
    if _TYPES["number"](instance):
        if not math.isfinite(instance) and ("minimum" in schema or "maximum" in schema):
            errs.append(f"{path}: {instance!r} is not a finite number")
        else:
            if "minimum" in schema and instance < schema["minimum"]:
                errs.append(f"{path}: {instance!r} is less than the minimum {schema['minimum']!r}")
            if "maximum" in schema and instance > schema["maximum"]:
                errs.append(f"{path}: {instance!r} is greater than the maximum {schema['maximum']!r}")
    if isinstance(instance, list):
        if "maxItems" in schema and len(instance) > schema["maxItems"]:
            errs.append(f"{path}: more than {schema['maxItems']} items")
        if "minItems" in schema and len(instance) < schema["minItems"]:
            errs.append(f"{path}: fewer than {schema['minItems']} items")
        if "items" in schema:
            for i, item in enumerate(instance):
                errs.extend(schema_errors(item, schema["items"], f"{path}[{i}]"))
    if isinstance(instance, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in instance:
                errs.append(f"{path}: missing required property {key!r}")
        for key, value in instance.items():
            if key in props:
                errs.extend(schema_errors(value, props[key], f"{path}.{key}"))
            elif schema.get("additionalProperties", True) is False:
                errs.append(f"{path}: unexpected property {_short(key)}")
    return errs


def validate(instance: Any, schema: dict) -> None:
    """Raise ModelError naming the first problems when ``instance`` does not match ``schema``."""
    errs = schema_errors(instance, schema)
    if errs:
        more = f" (+{len(errs) - 3} more)" if len(errs) > 3 else ""
        raise ModelError("output does not match the schema: " + "; ".join(errs[:3]) + more)


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _pattern(pattern: Any, path: str) -> re.Pattern[str]:
    """The compiled schema ``pattern`` (cached); ValueError when it is not a valid regex string."""
    if not isinstance(pattern, str):
        raise ValueError(f"schema pattern at {path} must be a string, got {pattern!r}")
    try:
        return _compiled(pattern)
    except re.error as exc:
        raise ValueError(f"invalid schema pattern at {path}: {pattern!r}: {exc}") from None


def _same(a: Any, b: Any) -> bool:
    # enum equality without Python's True == 1 conflation
    return type(a) is type(b) and a == b or (_TYPES["number"](a) and _TYPES["number"](b) and a == b)


def _json_type(v: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPES[name](v):
            return name
    return type(v).__name__


def _short(v: Any, n: int = 60) -> str:
    s = repr(v)
    return s if len(s) <= n else s[: n - 3] + "..."


# --------------------------------------------------------------------------- parsing

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def parse_json(text: str) -> Any:
    """Parse model output as JSON: the whole text, else the first fenced block. ValueError if neither."""
    candidates = [text.strip()] + [m.group(1).strip() for m in _FENCE.finditer(text)]
    for cand in candidates:
        if not cand:
            continue
        try:
            return json.loads(cand, parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            continue
    raise ValueError("output is not valid JSON")


def is_finite_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
