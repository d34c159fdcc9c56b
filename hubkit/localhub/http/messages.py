"""HTTP requests and responses as plain data, so handlers never touch sockets."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path
from typing import Any, BinaryIO

from hubkit.localhub.accounts.identity import ANONYMOUS, Caller
from hubkit.localhub.storage.exceptions import InvalidInputError, TooLargeError

CHUNK = 1 << 20
# What a body may hold until the dispatcher sets its route's limit (`guards.py`).
DEFAULT_BODY_LIMIT = 1 << 20
_CONTENT_LENGTH = re.compile(r"^[0-9]{1,19}$")
_CHUNK_SIZE = re.compile(rb"^[0-9A-Fa-f]{1,16}$")
# A chunked body's trailer: a few header lines at most.
_MAX_TRAILER_LINES = 32


class Body:
    """A request body read from the socket, sized by Content-Length or chunked transfer encoding.

    Never more than `limit` bytes are read: a larger Content-Length is refused before the first byte,
    a chunked body as soon as a chunk would pass the limit (TooLargeError, HTTP 413). `length` is None
    when chunked or malformed; `finished`, once it was read to its end, lets the connection carry another
    request.
    """

    def __init__(self, stream: BinaryIO, headers: Message) -> None:
        self._stream = stream
        encoding = headers.get("Transfer-Encoding")
        self.chunked = encoding is not None and encoding.strip().lower() == "chunked"
        declared = headers.get("Content-Length") or "0"
        # Any other transfer encoding leaves the body's end unknown: the request is refused, unread.
        self.valid_length = self.chunked or (encoding is None and bool(_CONTENT_LENGTH.match(declared)))
        self.length = int(declared) if not self.chunked and self.valid_length else None
        self.finished = not self.chunked and self.length == 0
        self.limit = DEFAULT_BODY_LIMIT
        self._what = "This request's body"

    @property
    def empty(self) -> bool:
        """Whether the request declares no body at all."""
        return not self.chunked and self.length == 0

    def limit_to(self, limit: int, what: str = "This request's body") -> None:
        """Refuse a body over `limit` bytes (TooLargeError): now, from its Content-Length, or while chunks
        arrive."""
        self.limit, self._what = limit, what
        if self.length is not None and self.length > limit:
            raise TooLargeError(self._too_large(self.length))

    def _too_large(self, size: int) -> str:
        return f"{self._what} is {size} bytes or more: this local Hub takes at most {self.limit} here."

    def chunks(self) -> Iterator[bytes]:
        """Yield the body in pieces. A body that ends early raises InvalidInputError, one over the limit
        TooLargeError."""
        if not self.valid_length:
            raise InvalidInputError("Invalid Content-Length header.")
        try:
            yield from self._chunked() if self.chunked else self._sized()
        except OSError as e:  # the client went away or stalled mid-body
            raise InvalidInputError(f"Request body is truncated ({e.__class__.__name__}).") from e
        self.finished = True

    def _sized(self) -> Iterator[bytes]:
        size = self.length or 0
        if size > self.limit:
            raise TooLargeError(self._too_large(size))
        yield from self._read(size, "Request body is truncated: the connection closed early.")

    def _read(self, size: int, truncated: str) -> Iterator[bytes]:
        """`size` bytes in pieces (a chunk may be announced as large as the limit)."""
        while size:
            block = self._stream.read(min(CHUNK, size))
            if not block:
                raise InvalidInputError(truncated)
            size -= len(block)
            yield block

    def _chunked(self) -> Iterator[bytes]:
        total = 0
        while True:
            line = self._stream.readline(1024)
            if not line.endswith(b"\n"):
                raise InvalidInputError("Chunked request body is truncated or malformed.")
            size_field = line.split(b";", 1)[0].strip()
            if not _CHUNK_SIZE.match(size_field):
                raise InvalidInputError(f"Invalid chunk size {size_field[:20]!r} in a chunked request body.")
            size = int(size_field, 16)
            if size == 0:
                for _ in range(_MAX_TRAILER_LINES):
                    if self._stream.readline(1024) in (b"\r\n", b"\n", b""):
                        return
                raise InvalidInputError("Chunked request body has too long a trailer.")
            total += size
            if total > self.limit:
                raise TooLargeError(self._too_large(total))
            yield from self._read(size, "Chunked request body is truncated.")
            if self._stream.readline(16) not in (b"\r\n", b"\n"):
                raise InvalidInputError("Chunked request body is malformed: a chunk does not end with CRLF.")

    def read(self) -> bytes:
        """The whole body (at most `limit` bytes)."""
        return b"".join(self.chunks())

    def lines(self) -> Iterator[bytes]:
        """The body's lines (NDJSON), without their line ends, read as they arrive."""
        partial: list[bytes] = []  # the pieces of a line that is still arriving
        for block in self.chunks():
            *complete, rest = block.split(b"\n")
            if complete:
                yield b"".join([*partial, complete[0]])
                yield from complete[1:]
                partial = []
            partial.append(rest)
        if any(partial):
            yield b"".join(partial)

    def json(self) -> dict[str, Any]:
        """The body as a JSON object (an empty body is `{}`). Raises InvalidInputError for anything else."""
        data = parse_json(self.read() or b"{}", "Request body")
        if not isinstance(data, dict):
            raise InvalidInputError("Request body must be a JSON object.")
        return data


def parse_json(data: bytes, what: str) -> Any:
    """`data` parsed as JSON. Raises InvalidInputError for invalid or too deeply nested JSON."""
    try:
        return json.loads(data)
    except RecursionError:  # [[[[...]]]]: the parser recurses once per level
        raise InvalidInputError(f"{what} is nested too deeply.") from None
    except ValueError as e:
        raise InvalidInputError(f"{what} is not valid JSON: {e}") from e


@dataclass
class Request:
    """One parsed request. `segments` are still percent-encoded: `refs%2Fpr%2F1` is one segment."""

    method: str
    segments: list[str]
    query: dict[str, list[str]]
    headers: Message
    body: Body
    base_url: str = ""  # scheme and address the client used (from Host), for every URL in the answer
    caller: Caller = ANONYMOUS
    write: bool = False  # the route changes the repository (set by the dispatcher)
    client: str = ""  # the client's IP address (anonymous callers' rate limits count per address)

    def param(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default

    def flag(self, name: str) -> bool:
        return (self.param(name) or "").lower() in ("1", "true")


@dataclass
class Response:
    """What to send back: a status, headers, and a body in memory or a byte range of a file."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    file: Path | None = None
    offset: int = 0
    length: int = 0

    @property
    def content_length(self) -> int:
        return self.length if self.file is not None else len(self.body)


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(data).encode()
    )


def list_field(data: dict, key: str) -> list[dict]:
    """`data[key]` as a list of JSON objects (absent: empty). Raises InvalidInputError otherwise."""
    items = data.get(key) or []
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise InvalidInputError(f"'{key}' must be a list of objects.")
    return items
