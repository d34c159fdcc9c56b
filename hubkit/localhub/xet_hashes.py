"""The Xet protocol's hashes (huggingface/xet-core, spec `hashing.md` and `api.md`).

Every hash is 32 bytes. A chunk's is its bytes' blake3 keyed with DATA_KEY; a xorb's is the root of a
Merkle tree over its chunks' (hash, length) pairs whose node boundaries follow the hashes themselves; a
file's is the same tree's root over all its chunks, hashed again with a key of zeros; a term's
verification hash is the blake3 (VERIFICATION_KEY) of its chunks' raw hashes, which only a client that
knows those chunks can give.

As a string (in URLs and JSON) a hash is NOT its bytes in hex: each 8-byte quarter is read as a
little-endian integer and printed as 16 hex digits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

DATA_KEY = bytes(
    [102, 151, 245, 119, 91, 149, 80, 222, 49, 53, 203, 172, 165, 151, 24, 28,
     157, 228, 33, 16, 155, 235, 43, 88, 180, 208, 176, 75, 147, 173, 242, 41]
)  # fmt: skip
INTERNAL_NODE_KEY = bytes(
    [1, 126, 197, 199, 165, 71, 41, 150, 253, 148, 102, 102, 180, 138, 2, 230,
     93, 221, 83, 111, 55, 199, 109, 210, 248, 99, 82, 230, 74, 83, 113, 63]
)  # fmt: skip
VERIFICATION_KEY = bytes(
    [127, 24, 87, 214, 206, 86, 237, 102, 18, 127, 249, 19, 231, 165, 195, 243,
     164, 205, 38, 213, 181, 219, 73, 230, 65, 36, 152, 127, 40, 251, 148, 195]
)  # fmt: skip
ZERO_KEY = bytes(32)
# A node of the tree has 2 to 9 children; a child whose hash is 0 modulo 4 ends its node.
_BRANCHING = 4
_MAX_CHILDREN = 2 * _BRANCHING + 1
# Chunks a client may look up in the global dedup index: 0 modulo this (and every file's first chunk).
GLOBAL_DEDUP_MODULUS = 1024
_HEX_HASH = re.compile(r"^[0-9a-f]{64}$")


def hash_to_hex(digest: bytes) -> str:
    """The protocol's string form of a 32-byte hash."""
    return "".join(f"{int.from_bytes(digest[i : i + 8], 'little'):016x}" for i in range(0, 32, 8))


def hex_to_hash(text: str) -> bytes:
    """The 32 bytes a hash string stands for. Raises ValueError for anything but 64 lowercase hex digits."""
    if not isinstance(text, str) or not _HEX_HASH.match(text):
        raise ValueError(f"Invalid Xet hash {str(text)[:80]!r}: expected 64 lowercase hex digits.")
    return b"".join(int(text[i : i + 16], 16).to_bytes(8, "little") for i in range(0, 64, 16))


def modulo(digest: bytes, divisor: int) -> int:
    """A hash modulo `divisor`, as the protocol takes it: its last 8 bytes as a little-endian integer."""
    return int.from_bytes(digest[24:32], "little") % divisor


def keyed_hash(key: bytes, data: bytes) -> bytes:
    import blake3  # only a Hub a Xet client talks to needs it (verl's environment serves LFS without it)

    return blake3.blake3(data, key=key).digest()


def chunk_hash(data: bytes) -> bytes:
    return keyed_hash(DATA_KEY, data)


def _next_cut(nodes: Sequence[tuple[bytes, int]], start: int) -> int:
    remaining = len(nodes) - start
    if remaining <= 2:
        return len(nodes)
    end = start + min(_MAX_CHILDREN, remaining)
    for i in range(start + 2, end):
        if modulo(nodes[i][0], _BRANCHING) == 0:
            return i + 1
    return end


def _merged(nodes: Sequence[tuple[bytes, int]]) -> tuple[bytes, int]:
    text = "".join(f"{hash_to_hex(h)} : {size}\n" for h, size in nodes)
    return keyed_hash(INTERNAL_NODE_KEY, text.encode()), sum(size for _, size in nodes)


def merkle_root(chunks: Sequence[tuple[bytes, int]]) -> bytes:
    """The root of the protocol's Merkle tree over (chunk hash, chunk length) pairs (zeros when empty)."""
    nodes = list(chunks)
    if not nodes:
        return ZERO_KEY
    while len(nodes) > 1:
        merged, start = [], 0
        while start < len(nodes):
            cut = _next_cut(nodes, start)
            merged.append(_merged(nodes[start:cut]))
            start = cut
        nodes = merged
    return nodes[0][0]


def xorb_hash(chunks: Sequence[tuple[bytes, int]]) -> bytes:
    return merkle_root(chunks)


def file_hash(chunks: Sequence[tuple[bytes, int]]) -> bytes:
    """A file's hash from its chunks (zeros for an empty file, as the reference implementation gives)."""
    return keyed_hash(ZERO_KEY, merkle_root(chunks)) if chunks else ZERO_KEY


def verification_hash(chunk_hashes: Sequence[bytes]) -> bytes:
    """The hash a shard gives for one term: proof that its uploader knows the term's chunks."""
    return keyed_hash(VERIFICATION_KEY, b"".join(chunk_hashes))
