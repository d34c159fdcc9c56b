"""JSON and JSON-lines files: read bounded, parsed with a depth bound, written back from the parsed value.

A file is refused from its size (`os.fstat` of the opened file) before any byte of it is read, so a
sparse 2 GB file costs no memory. The parsed value is what callers check and what they publish:
`dump_json` writes it out in one fixed layout, so whatever escapes or duplicate keys the original held
do not survive (only control characters stay escaped, as JSON requires).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hubkit.errors import FileFormatError, FileTooLargeError

# Deeper than any config, tokenizer or results file hubkit publishes (tokenizer.json nests 6 levels).
MAX_DEPTH = 64


def read_bounded(path: Path, max_bytes: int, name: str | None = None) -> bytes:
    """The whole content of a regular file of at most `max_bytes`, refused from its size before reading (a
    symlink is followed: callers decide beforehand which links they follow).

    Raises:
        FileTooLargeError: the file is larger than `max_bytes` (nothing of it was read).
        FileFormatError: not a regular file (a FIFO, a device, a folder), missing, or changed while read.
    """
    name = name or path.name
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; reads of regular files ignore the flag.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError as e:
        raise FileFormatError(f"{name}: no such file") from e
    except IsADirectoryError as e:
        raise FileFormatError(f"{name}: a folder, not a file") from e
    except OSError as e:
        raise FileFormatError(f"{name}: cannot be opened ({e.strerror})") from e
    with os.fdopen(fd, "rb", buffering=0) as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise FileFormatError(f"{name}: not a regular file")
        if info.st_size > max_bytes:
            raise too_large(name, info.st_size, max_bytes)
        # One byte more than the size says: a file that grew, or a /proc file (size 0), shows as changed.
        data = _read_up_to(f, info.st_size + 1)
    if len(data) != info.st_size:
        raise FileFormatError(f"{name}: changed while it was read (its size said {info.st_size} bytes)")
    return data


def _read_up_to(f: Any, size: int) -> bytes:
    chunks, left = [], size
    while left > 0:
        chunk = f.read(left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size} bytes"


def too_large(name: str, size: int, max_bytes: int) -> FileTooLargeError:
    """The error for a file of `size` bytes where at most `max_bytes` are accepted."""
    return FileTooLargeError(f"{name}: {_megabytes(size)}, more than the {_megabytes(max_bytes)} allowed")


def decode_text(data: bytes, name: str) -> str:
    """`data` as UTF-8 text.

    Raises:
        FileFormatError: the bytes are not UTF-8 (naming the first bad byte's position).
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FileFormatError(f"{name}: not UTF-8 text (byte {e.start})") from e


def _check_depth(value: Any, name: str, max_depth: int) -> None:
    """Refuse a value nested deeper than `max_depth` containers (level by level: no recursion)."""
    level, depth = [value], 1
    while True:
        level = [
            child
            for node in level
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, dict | list)
        ]
        if not level:
            return
        depth += 1
        if depth > max_depth:
            raise FileFormatError(f"{name}: nested deeper than {max_depth} levels")


def parse_json(data: bytes, name: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """The value of a JSON document's UTF-8 bytes, nested at most `max_depth` objects and arrays deep (dicts
    keep the document's key order; of duplicate keys the last one counts).

    Raises:
        FileFormatError: not UTF-8, not JSON, or nested too deep.
    """
    value = _loads(decode_text(data, name), name)
    if isinstance(value, dict | list):
        _check_depth(value, name, max_depth)
    return value


def parse_json_object(data: bytes, name: str) -> dict[str, Any]:
    """`parse_json` of a document that must hold an object.

    Raises:
        FileFormatError: as `parse_json`, or not a JSON object.
    """
    value = parse_json(data, name)
    if not isinstance(value, dict):
        raise FileFormatError(f"{name}: not a JSON object")
    return value


def _loads(text: str, name: str, line: int | None = None) -> Any:
    where = f" line {line}" if line is not None else ""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        position = f"line {e.lineno} column {e.colno}" if line is None else f"column {e.colno}"
        raise FileFormatError(f"{name}:{where} not JSON ({e.msg} at {position})") from e
    except RecursionError as e:  # the C parser's own bound, far below the stack's
        raise FileFormatError(f"{name}:{where} nested too deep to parse") from e
    except ValueError as e:  # an integer of more digits than Python converts (4,300)
        raise FileFormatError(f"{name}:{where} holds a number too long to read") from e


def read_json(path: Path, *, max_bytes: int, max_depth: int = MAX_DEPTH, name: str | None = None) -> Any:
    """`parse_json` of `read_bounded(path, max_bytes)`.

    Raises:
        FileTooLargeError: as `read_bounded`.
        FileFormatError: as `read_bounded` and `parse_json`.
    """
    name = name or path.name
    return parse_json(read_bounded(path, max_bytes, name), name, max_depth=max_depth)


def _encode(text: str, name: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate, written as a \ud800 escape in the original
        raise FileFormatError(f"{name}: holds a string that is not valid Unicode (a lone surrogate)") from e


def dump_json(value: Any, name: str, *, trailing_newline: bool = True, compact: bool = False) -> bytes:
    """`value` as a JSON document in one fixed layout: the same value always gives the same bytes (UTF-8,
    non-ASCII characters as themselves, keys in the value's order).

    A trailing newline is what transformers writes (`tokenizers` writes none); `compact` writes no
    whitespace at all (as vocab.json is written), else two-space indentation.

    Raises:
        FileFormatError: a string holds a lone surrogate, which UTF-8 cannot encode.
    """
    layout: dict[str, Any] = {"separators": (",", ":")} if compact else {"indent": 2}
    text = json.dumps(value, ensure_ascii=False, **layout)
    return _encode(text + ("\n" if trailing_newline else ""), name)


def parse_jsonl(data: bytes, name: str, *, max_depth: int = MAX_DEPTH) -> list[Any]:
    """The values of a JSON-lines document, one per non-empty line.

    Raises:
        FileFormatError: not UTF-8, a line that is not JSON, or one nested too deep.
    """
    values = []
    for number, line in enumerate(decode_text(data, name).split("\n"), start=1):
        if line.strip():
            value = _loads(line, name, number)
            if isinstance(value, dict | list):
                _check_depth(value, f"{name} line {number}", max_depth)
            values.append(value)
    return values


def dump_jsonl(values: Iterable[Any], name: str) -> bytes:
    """One compact JSON value per line, each ending with a newline.

    Raises:
        FileFormatError: a string holds a lone surrogate.
    """
    return _encode("".join(json.dumps(v, ensure_ascii=False) + "\n" for v in values), name)
