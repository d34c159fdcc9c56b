"""A parsed JSON object checked against the dataclass it becomes: each field of the type the dataclass
declares, before the dataclass is built (a string where a number belongs, a list where an object belongs,
a 5000-digit integer or NaN are one line of error naming the field, never a traceback).

    values = checked_fields(SweepInfo, data["sweep"], "hubkit.json sweep")   # then SweepInfo(**values)
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, TypeGuard

from hubkit.errors import FileFormatError

# JSON integers beyond this are not counts a run or a model can hold (and are not exact as floats).
MAX_JSON_INT = 2**53


def is_count(value: object, largest: int = MAX_JSON_INT) -> TypeGuard[int]:
    """Whether a parsed JSON value is an integer from 1 to `largest` (a bool is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= largest


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _matches(value: Any, hint: Any) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, arg) for arg in args)
    if origin is typing.Literal:
        return any(value == arg and type(value) is type(arg) for arg in args)
    if hint is type(None) or hint is None:
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_JSON_INT
    if hint is float:
        if isinstance(value, int) and not isinstance(value, bool):
            return abs(value) <= MAX_JSON_INT
        return isinstance(value, float) and math.isfinite(value)
    if hint is str:
        return isinstance(value, str)
    if origin in (tuple, list):
        item = args[0] if args else Any
        return isinstance(value, list | tuple) and all(_matches(v, item) for v in value)
    if origin is dict:
        value_hint = args[1] if len(args) == 2 else Any
        return isinstance(value, dict) and all(
            isinstance(k, str) and _matches(v, value_hint) for k, v in value.items()
        )
    if dataclasses.is_dataclass(hint):
        return isinstance(value, dict)  # its own fields are checked when it is built
    return isinstance(value, hint) if isinstance(hint, type) else True


def checked_fields(cls: type, data: Any, label: str, *, strict: bool = True) -> dict[str, Any]:
    """The fields of `data` (a parsed JSON value) that the dataclass `cls` declares, each checked against its
    declared type (a JSON array of a tuple field becomes a tuple); `strict` refuses the fields `cls` does
    not declare, else they are left out.

    Raises:
        FileFormatError: `data` is not an object, holds unknown fields (`strict`), or a field is not of its
            declared type.
    """
    if not isinstance(data, dict):
        raise FileFormatError(f"{label} must be a JSON object, got {type(data).__name__}")
    declared = dataclasses.fields(cls)
    unknown = sorted(set(data) - {spec.name for spec in declared})
    if strict and unknown:
        raise FileFormatError(f"{label} has unknown fields {unknown[:5]}")
    hints = typing.get_type_hints(cls)
    values = {}
    for spec in declared:
        if spec.name in data:
            value = data[spec.name]
            if not _matches(value, hints[spec.name]):
                raise FileFormatError(f"{label}: {spec.name} cannot be {_describe(value)}")
            values[spec.name] = tuple(value) if typing.get_origin(hints[spec.name]) is tuple else value
    return values


def refuse_newer_schema(version: object, name: str, current: int, error: type[Exception]) -> None:
    """Refuse a file a newer hubkit wrote (its ``schema_version`` above `current`) with a message, rather
    than half-read it.

    Raises:
        error: `version` is newer.
    """
    if is_count(version) and version > current:
        raise error(f"{name} has schema {version}, newer than this hubkit ({current}): upgrade hubkit")
