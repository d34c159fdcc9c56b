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
from collections.abc import Iterable, Sequence

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


def _merged(nodes: Sequence[tuple[bytes, int]]) -> tuple[bytes, int]:
    text = "".join(f"{hash_to_hex(h)} : {size}\n" for h, size in nodes)
    return keyed_hash(INTERNAL_NODE_KEY, text.encode()), sum(size for _, size in nodes)


class MerkleTree:
    """The protocol's Merkle tree over (chunk hash, chunk length) pairs, built as they come: a few nodes
    of each level in memory, however many chunks a file has.

    A level's node ends at its 9th child, or at a child from the 3rd on whose hash is 0 modulo 4; what a
    level holds at the end is one node, unless the level has a single node in all: that is the root.
    """

    def __init__(self) -> None:
        self._levels: list[list[tuple[bytes, int]]] = []  # each level's nodes not yet merged
        self._counts: list[int] = []  # how many nodes each level has had

    def add(self, node: tuple[bytes, int], level: int = 0) -> None:
        if level == len(self._levels):
            self._levels.append([])
            self._counts.append(0)
        pending = self._levels[level]
        pending.append(node)
        self._counts[level] += 1
        if len(pending) == _MAX_CHILDREN or (len(pending) > 2 and modulo(node[0], _BRANCHING) == 0):
            self.add(_merged(pending), level + 1)
            pending.clear()

    def root(self) -> bytes:
        """The root hash (zeros when no chunk was added)."""
        level = 0
        while level < len(self._levels):
            pending = self._levels[level]
            if self._counts[level] == 1 and level == len(self._levels) - 1:
                return pending[0][0]
            if pending:
                self.add(_merged(pending), level + 1)
                pending.clear()
            level += 1
        return ZERO_KEY


def merkle_root(chunks: Iterable[tuple[bytes, int]]) -> bytes:
    """The root of the protocol's Merkle tree over (chunk hash, chunk length) pairs (zeros when empty): a
    xorb's hash."""
    tree = MerkleTree()
    for chunk in chunks:
        tree.add(chunk)
    return tree.root()


def file_hash_of_root(root: bytes) -> bytes:
    """A file's hash from its chunks' Merkle root (zeros for an empty file, as the reference gives)."""
    return ZERO_KEY if root == ZERO_KEY else keyed_hash(ZERO_KEY, root)


def verification_hash(chunk_hashes: Sequence[bytes]) -> bytes:
    """The hash a shard gives for one term: proof that its uploader knows the term's chunks."""
    return keyed_hash(VERIFICATION_KEY, b"".join(chunk_hashes))
