"""Xet objects built by hand, as a hostile client would send them, and raw calls to a Hub's CAS API.

Xorbs of uncompressed chunks (scheme 0) and upload shards in the spec's layout; the hashes come from
`hubkit.localhub.xet.hashes`, which the real client's uploads check, since the Hub stores nothing whose
hash it did not recompute.
"""

from __future__ import annotations

import hashlib
import struct

import httpx

from hubkit.localhub import LocalHub
from hubkit.localhub.xet.hashes import (
    chunk_hash,
    file_hash_of_root,
    hash_to_hex,
    hex_to_hash,
    merkle_root,
    verification_hash,
)
from hubkit.localhub.xet.shard import HEADER_TAG

_BOOKEND = b"\xff" * 32 + bytes(16)


def file_hash(chunks: list[tuple[bytes, int]]) -> bytes:
    """A file's Xet hash from its chunks' (hash, length) pairs, as a client computes it."""
    return file_hash_of_root(merkle_root(chunks))


def build_xorb(chunks: list[bytes]) -> tuple[str, bytes]:
    """A xorb of uncompressed chunks and its hash string."""
    body = b"".join(
        bytes([0]) + len(c).to_bytes(3, "little") + bytes([0]) + len(c).to_bytes(3, "little") + c
        for c in chunks
    )
    return hash_to_hex(merkle_root([(chunk_hash(c), len(c)) for c in chunks])), body


def shard(file_id: bytes, terms: list[tuple[str, int, int, int, bytes]], sha256: bytes) -> bytes:
    """An upload shard registering one file of `terms` (xorb, first chunk, end chunk, length, verification
    hash) whose bytes hash to `sha256`."""
    stored_sha = b"".join(sha256[i : i + 8][::-1] for i in range(0, 32, 8))  # the protocol's byte order
    return b"".join(
        [
            HEADER_TAG + struct.pack("<QQ", 2, 0),
            file_id + struct.pack("<II", (1 << 31) | (1 << 30), len(terms)) + bytes(8),
            *(hex_to_hash(x) + struct.pack("<IIII", 0, n, a, b) for x, a, b, n, _ in terms),
            *(proof + bytes(16) for *_, proof in terms),
            stored_sha + bytes(16),
            _BOOKEND,
            _BOOKEND,
        ]
    )


def file_shard(
    xorb_id: str, chunks: list[bytes], *, file_id: bytes | None = None, sha256: bytes | None = None
) -> bytes:
    """An upload shard registering one file made of all of a xorb's `chunks`."""
    hashes = [chunk_hash(c) for c in chunks]
    data = b"".join(chunks)
    file_id = file_id or file_hash([(h, len(c)) for h, c in zip(hashes, chunks, strict=True)])
    term = (xorb_id, 0, len(chunks), len(data), verification_hash(hashes))
    return shard(file_id, [term], sha256 or hashlib.sha256(data).digest())


class Cas:
    """Raw calls to one Hub's CAS API with a Xet token of one repo."""

    def __init__(self, hub: LocalHub | str, repo_id: str, scope: str = "write", token: str = "any") -> None:
        endpoint = hub if isinstance(hub, str) else hub.endpoint
        answer = httpx.get(
            f"{endpoint}/api/models/{repo_id}/xet-{scope}-token/main",
            headers={"Authorization": f"Bearer {token}"},
        )
        answer.raise_for_status()
        self.url, self.token = answer.json()["casUrl"], answer.json()["accessToken"]
        assert answer.headers["X-Xet-Access-Token"] == self.token

    def post(self, path: str, body: bytes, token: str | None = None, timeout: float = 60) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token or self.token}"}
        return httpx.post(f"{self.url}{path}", content=body, headers=headers, timeout=timeout)

    def get(self, path: str, timeout: float = 60, **headers: str) -> httpx.Response:
        headers["Authorization"] = f"Bearer {self.token}"
        return httpx.get(f"{self.url}{path}", headers=headers, timeout=timeout)
