"""A parsed JSON object checked against the dataclass it becomes: each field of the type the dataclass
declares, before the dataclass is built (a string where a number belongs, a list where an object belongs,
a 5000-digit integer or NaN are one line of error naming the field, never a traceback).

    values = checked_fields(LoraSettings, data["lora"], "hubkit.json lora")   # then LoraSettings(**values)
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


def checked_fields(cls: type, data: Any, label: str) -> dict[str, Any]:
    """`data`'s known fields, each checked against `cls`'s declared field type.

    Args:
        cls: a dataclass.
        data: the parsed JSON value meant to become it.
        label: how messages name it (``hubkit.json lora``).

    Returns:
        The fields of `data` that `cls` declares (the caller decides about unknown ones).

    Raises:
        FileFormatError: `data` is not an object, or a field is not of its declared type.
    """
    if not isinstance(data, dict):
        raise FileFormatError(f"{label} must be a JSON object, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    values = {}
    for spec in dataclasses.fields(cls):
        if spec.name in data:
            value = data[spec.name]
            if not _matches(value, hints[spec.name]):
                raise FileFormatError(f"{label}: {spec.name} cannot be {_describe(value)}")
            values[spec.name] = value
    return values
