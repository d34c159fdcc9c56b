"""The shard format (spec `shard.md`): file reconstructions and xorb listings, in 48-byte records.

A shard is a 48-byte header (magic tag, version 2, footer size), the file info section (per file: a
header, its terms, one verification entry per term, an optional sha256 record), a bookend, the CAS info
section (per xorb: a header and one entry per chunk), a bookend, and a 200-byte footer that uploads
leave out. All integers are little-endian. The Hub reads uploaded shards (`read_upload_shard`) and writes
the ones the global dedup API answers with (`dedup_shard`).
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

from hubkit.localhub.storage.exceptions import InvalidInputError

MAX_SHARD_SIZE = 64 * 1024 * 1024  # the spec's limit: a client splits bigger batches
RECORD = 48
# The magic tag: b"HFRepoMetaData\0" and 17 fixed bytes (xet-core MDB_SHARD_HEADER_TAG).
HEADER_TAG = b"HFRepoMetaData\x00" + bytes(
    [85, 105, 103, 69, 106, 123, 129, 87, 131, 165, 189, 217, 92, 205, 209, 74, 169]
)
_BOOKEND = b"\xff" * 32 + b"\x00" * 16
_WITH_VERIFICATION = 1 << 31
_WITH_METADATA = 1 << 30
_FOOTER_SIZE = 200


@dataclass(frozen=True)
class Term:
    """Chunks [start, end) of one xorb, `length` bytes once unpacked."""

    xorb: bytes
    start: int
    end: int
    length: int


@dataclass(frozen=True)
class ShardFile:
    """One file a shard registers: its hash, its terms, their verification hashes, its sha256 if given."""

    file_hash: bytes
    terms: tuple[Term, ...]
    verifications: tuple[bytes, ...]
    sha256: bytes | None


@dataclass(frozen=True)
class ShardXorb:
    """A xorb a shard lists: its hash and its chunks' (hash, unpacked length)."""

    xorb: bytes
    chunks: tuple[tuple[bytes, int], ...]


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.offset = data, 0

    def record(self) -> bytes:
        if self.offset + RECORD > len(self.data):
            raise InvalidInputError("The shard ends in the middle of a record.")
        self.offset += RECORD
        return self.data[self.offset - RECORD : self.offset]

    def records(self, count: int) -> list[bytes]:
        if count * RECORD > len(self.data) - self.offset:
            raise InvalidInputError("The shard announces more records than it holds.")
        return [self.record() for _ in range(count)]


def _files(reader: _Reader) -> list[ShardFile]:
    files = []
    while (head := reader.record()) != _BOOKEND:
        if head[:32] == _BOOKEND[:32]:
            raise InvalidInputError("Invalid bookend in the shard's file section.")
        file_hash = head[:32]
        flags, count = struct.unpack_from("<II", head, 32)
        if count == 0:
            raise InvalidInputError("A file in the shard has no terms.")
        terms = []
        for entry in reader.records(count):
            _flags, length, start, end = struct.unpack_from("<IIII", entry, 32)
            if not start < end:
                raise InvalidInputError("A term of the shard names an empty chunk range.")
            terms.append(Term(entry[:32], start, end, length))
        checks = [r[:32] for r in reader.records(count)] if flags & _WITH_VERIFICATION else []
        sha256 = reader.record()[:32] if flags & _WITH_METADATA else None
        files.append(ShardFile(file_hash, tuple(terms), tuple(checks), sha256))
    return files


def _xorbs(reader: _Reader) -> list[ShardXorb]:
    xorbs = []
    while (head := reader.record()) != _BOOKEND:
        (count,) = struct.unpack_from("<I", head, 36)
        entries = reader.records(count)
        chunks = tuple((e[:32], struct.unpack_from("<I", e, 36)[0]) for e in entries)
        xorbs.append(ShardXorb(head[:32], chunks))
    return xorbs


def read_upload_shard(data: bytes) -> tuple[list[ShardFile], list[ShardXorb]]:
    """The files and xorbs of an uploaded shard (with or without its footer). Refuses (InvalidInputError)
    one over MAX_SHARD_SIZE, another magic tag or version, a truncated record, a missing bookend, or bytes
    after the last section that are not a footer."""
    if len(data) > MAX_SHARD_SIZE:
        raise InvalidInputError(f"A shard may be at most {MAX_SHARD_SIZE} bytes; this one is {len(data)}.")
    if len(data) < RECORD or data[:32] != HEADER_TAG:
        raise InvalidInputError("This is not a Xet shard (wrong magic tag).")
    version, footer_size = struct.unpack_from("<QQ", data, 32)
    if version != 2 or footer_size not in (0, _FOOTER_SIZE):
        raise InvalidInputError(f"Unsupported shard version {version} (footer of {footer_size} bytes).")
    reader = _Reader(data)
    reader.offset = RECORD
    files, xorbs = _files(reader), _xorbs(reader)
    if len(data) - reader.offset != footer_size:
        raise InvalidInputError("The shard has bytes after its sections that are not its footer.")
    return files, xorbs


def dedup_shard(
    xorbs: list[tuple[bytes, list[tuple[bytes, int, int]], int]], hmac_key: bytes, expiry: int
) -> bytes:
    """A shard answering a global dedup query: xorbs as (hash, chunks, stored size), each chunk as (keyed
    hash, unpacked start, length), with the lookup tables and footer xet-core reads it by.

    The chunk hashes are keyed with `hmac_key` (given in the footer), so that only a client holding a
    chunk's bytes can recognise it. The footer is xet-core's (`MDBShardFileFooter`), of which the spec's
    layout names only some fields: after the section offsets come three lookup tables (file, xorb and
    chunk: a hash's first 8 bytes, sorted, to the record index), then the key, times and sizes.
    """
    body = bytearray(HEADER_TAG + struct.pack("<QQ", 2, _FOOTER_SIZE))
    file_info_offset = len(body)
    body += _BOOKEND
    xorb_info_offset = len(body)
    # The lookup tables name a xorb by its record's index in the section (a header, then its chunks).
    xorb_lookup: list[tuple[bytes, int]] = []
    chunk_lookup: list[tuple[bytes, int, int]] = []
    stored = total = record = 0
    for xorb, chunks, stored_size in xorbs:
        length = sum(n for _, _, n in chunks)
        body += xorb + struct.pack("<IIII", 0, len(chunks), length, stored_size)
        xorb_lookup.append((xorb[:8], record))
        for position, (keyed, start, n) in enumerate(chunks):
            body += keyed + struct.pack("<II", start, n) + bytes(8)
            chunk_lookup.append((keyed[:8], record, position))
        stored, total, record = stored + stored_size, total + length, record + 1 + len(chunks)
    body += _BOOKEND
    file_lookup_offset = len(body)  # no files
    xorb_lookup_offset = len(body)
    by_prefix = lambda entry: int.from_bytes(entry[0], "little")  # noqa: E731  (the lookup tables' order)
    for prefix, index in sorted(xorb_lookup, key=by_prefix):
        body += prefix + struct.pack("<I", index)
    chunk_lookup_offset = len(body)
    for prefix, index, position in sorted(chunk_lookup, key=by_prefix):
        body += prefix + struct.pack("<II", index, position)
    footer_offset = len(body)
    body += struct.pack("<9Q", 1, file_info_offset, xorb_info_offset, file_lookup_offset, 0,
                        xorb_lookup_offset, len(xorbs), chunk_lookup_offset, len(chunk_lookup))  # fmt: skip
    body += hmac_key + struct.pack("<QQ", int(time.time()), expiry) + bytes(48)
    body += struct.pack("<QQQQ", stored, total, total, footer_offset)
    return bytes(body)
