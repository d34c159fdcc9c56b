"""HTTP requests and responses as plain data, so handlers never touch sockets."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path
from typing import Any, BinaryIO

from hubkit.localhub.exceptions import InvalidInputError
from hubkit.localhub.identity import ANONYMOUS, Caller

CHUNK = 1 << 20
# Bodies read whole (JSON, NDJSON commits) above this are refused; LFS content is streamed instead.
MAX_BUFFERED_BODY = 1 << 30


class Body:
    """A request body read from the socket, sized by Content-Length or chunked transfer encoding."""

    def __init__(self, stream: BinaryIO, headers: Message) -> None:
        self._stream = stream
        self.chunked = "chunked" in headers.get("Transfer-Encoding", "").lower()
        declared = headers.get("Content-Length") or "0"
        self.valid_length = self.chunked or declared.isdigit()
        self.length = int(declared) if not self.chunked and self.valid_length else None
        self.consumed = False

    def chunks(self) -> Iterator[bytes]:
        """Yield the body in pieces. A body that ends early raises InvalidInputError."""
        self.consumed = True
        if not self.valid_length:
            raise InvalidInputError("Invalid Content-Length header.")
        try:
            yield from self._chunked() if self.chunked else self._sized()
        except OSError as e:  # the client went away or stalled mid-body
            raise InvalidInputError(f"Request body is truncated ({e.__class__.__name__}).") from e

    def _sized(self) -> Iterator[bytes]:
        left = self.length or 0
        while left:
            block = self._stream.read(min(CHUNK, left))
            if not block:
                raise InvalidInputError("Request body is truncated: the connection closed early.")
            left -= len(block)
            yield block

    def _chunked(self) -> Iterator[bytes]:
        while True:
            line = self._stream.readline(1024)
            if not line:
                raise InvalidInputError("Chunked request body is truncated.")
            size = int(line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self._stream.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return
            data = self._stream.read(size)
            if len(data) != size:
                raise InvalidInputError("Chunked request body is truncated.")
            self._stream.readline(16)
            yield data

    def read(self) -> bytes:
        """The whole body (bounded by MAX_BUFFERED_BODY)."""
        parts, total = [], 0
        for block in self.chunks():
            total += len(block)
            if total > MAX_BUFFERED_BODY:
                raise InvalidInputError("Request body is too large.")
            parts.append(block)
        return b"".join(parts)

    def json(self) -> dict[str, Any]:
        """The body as a JSON object (an empty body is `{}`). Raises InvalidInputError for anything else."""
        try:
            data = json.loads(self.read() or b"{}")
        except ValueError as e:
            raise InvalidInputError(f"Request body is not valid JSON: {e}") from e
        if not isinstance(data, dict):
            raise InvalidInputError("Request body must be a JSON object.")
        return data


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
