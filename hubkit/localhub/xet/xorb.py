"""The xorb format (spec `xorb.md`): a series of chunks, each an 8-byte header and its compressed bytes.

Header: version (0), compressed length (3 bytes, little-endian), compression scheme (0 none, 1 LZ4
frame, 2 LZ4 frame of the bytes grouped by position modulo 4), uncompressed length (3 bytes). xet-core
appends a footer (ident `XETBLOB`: the chunks' hashes and offsets again) that the hash does not cover; it
is not kept, and everything served is the chunks the hash was checked against.
"""

from __future__ import annotations

from dataclasses import dataclass

from hubkit.localhub.storage.exceptions import InvalidInputError
from hubkit.localhub.xet.hashes import chunk_hash, hash_to_hex, merkle_root

HEADER_SIZE = 8
# The spec bounds a serialized xorb at 64 MiB, but xet-core cuts a xorb at 64 MiB of *unpacked* chunk
# bytes (MAX_XORB_BYTES) and then adds an 8-byte header to each of up to 8,192 chunks (and, in older
# clients, a footer of ~40 bytes a chunk): a xorb of incompressible weights can pass 64 MiB by a few KB.
MAX_XORB_SIZE = 65 * 1024 * 1024
MAX_CHUNK_SIZE = 128 * 1024
# xet-core cuts a xorb at 8,192 chunks (MAX_XORB_CHUNKS) as at 64 MiB: a xorb's index, its hashing and
# every reconstruction over it are bounded by this, not by how small a sender makes its chunks.
MAX_XORB_CHUNKS = 8 * 1024
_FOOTER_IDENT = b"XETBLOB"
_NONE, _LZ4, _BG4_LZ4 = 0, 1, 2


@dataclass(frozen=True)
class XorbChunk:
    """One chunk of a stored xorb: its hash, where its header starts and its bytes end, its length unpacked."""

    hash: bytes
    start: int
    end: int
    length: int


def _ungroup(data: bytes) -> bytes:
    """Undo the 4-byte grouping: group k holds every byte at a position ≡ k (mod 4), in order."""
    out = bytearray(len(data))
    offset = 0
    for k in range(4):
        size = len(range(k, len(data), 4))
        out[k::4] = data[offset : offset + size]
        offset += size
    return bytes(out)


def _lz4(data: bytes, length: int) -> bytes:
    import lz4.frame  # only a Hub serving Xet needs it

    try:
        # Bounded: a small frame cannot expand into more than the chunk's promised length.
        with lz4.frame.LZ4FrameDecompressor() as decompressor:
            out = decompressor.decompress(data, max_length=length + 1)
    except RuntimeError as e:
        raise InvalidInputError(f"A chunk's LZ4 frame is corrupt: {e}") from None
    return out


def unpack(scheme: int, data: bytes, length: int) -> bytes:
    """A chunk's bytes from its stored form. Raises InvalidInputError for an unknown scheme or a length
    that differs from the header's."""
    if scheme == _NONE:
        raw = data
    elif scheme == _LZ4:
        raw = _lz4(data, length)
    elif scheme == _BG4_LZ4:
        raw = _ungroup(_lz4(data, length))
    else:
        raise InvalidInputError(f"Unknown chunk compression scheme {scheme}.")
    if len(raw) != length:
        raise InvalidInputError(f"A chunk unpacks to {len(raw)} bytes, its header says {length}.")
    return raw


def _header(body: bytes, offset: int) -> tuple[int, int, int]:
    """(stored length, scheme, unpacked length) of the chunk header at `offset`."""
    header = body[offset : offset + HEADER_SIZE]
    if len(header) < HEADER_SIZE or header[0] != 0:
        raise InvalidInputError(f"Invalid chunk header at byte {offset} of the xorb.")
    stored = int.from_bytes(header[1:4], "little")
    unpacked = int.from_bytes(header[5:8], "little")
    if not 0 < unpacked <= MAX_CHUNK_SIZE or stored > MAX_CHUNK_SIZE + 1024:
        raise InvalidInputError(f"A chunk at byte {offset} of the xorb claims an impossible size.")
    return stored, header[4], unpacked


def unpack_chunk(stored_chunk: bytes) -> bytes:
    """The bytes of one stored chunk (its header and its packed bytes)."""
    stored, scheme, length = _header(stored_chunk, 0)
    return unpack(scheme, stored_chunk[HEADER_SIZE : HEADER_SIZE + stored], length)


def read_xorb(body: bytes, expected_hash: bytes) -> tuple[memoryview, list[XorbChunk]]:
    """The chunk section of an uploaded xorb and its chunks, once every chunk is unpacked and hashed and the
    xorb's Merkle hash equals `expected_hash`. Refuses (InvalidInputError) a malformed chunk, more than
    MAX_XORB_CHUNKS chunks (at the first one over), trailing bytes that are not xet-core's footer, no chunk
    at all, or another hash (a client cannot store bytes under a hash they do not have).
    """
    if len(body) > MAX_XORB_SIZE:
        raise InvalidInputError(f"A xorb may be at most {MAX_XORB_SIZE} bytes; this one is {len(body)}.")
    chunks: list[XorbChunk] = []
    offset = 0
    while offset < len(body) and not body.startswith(_FOOTER_IDENT, offset):
        if len(chunks) == MAX_XORB_CHUNKS:
            raise InvalidInputError(
                f"A xorb holds at most {MAX_XORB_CHUNKS} chunks (xet-core's MAX_XORB_CHUNKS); this one "
                "holds more: split it."
            )
        stored, scheme, length = _header(body, offset)
        end = offset + HEADER_SIZE + stored
        if end > len(body):
            raise InvalidInputError("The xorb ends inside a chunk.")
        raw = unpack(scheme, body[offset + HEADER_SIZE : end], length)
        chunks.append(XorbChunk(chunk_hash(raw), offset, end, length))
        offset = end
    if not chunks:
        raise InvalidInputError("A xorb must hold at least one chunk.")
    actual = merkle_root([(c.hash, c.length) for c in chunks])
    if actual != expected_hash:
        raise InvalidInputError(
            f"The xorb's content hashes to {hash_to_hex(actual)}, not {hash_to_hex(expected_hash)}."
        )
    return memoryview(body)[:offset], chunks  # not a copy of up to 65 MiB
