"""Xet storage: verified xorbs, registered files and the global dedup index, under `root/xet/`.

- `xorbs/ab/<hash>`: a xorb's chunks as uploaded (footer dropped), beside `<hash>.idx`, its chunks'
  hashes and offsets (44 bytes each). The index is written first and the xorb last, so a xorb that is
  there is complete.
- `files/ab/<hash>.json`: a file's terms, sha256 and size. A file is registered only once every term is
  checked against the stored xorbs (range, length, verification hash), the file hash is recomputed from
  the chunks, and the bytes rebuilt from them hash to the sha256 the shard claims, always, even where the
  repo already holds an object of that sha256. The terms are checked from the shard before any chunk is
  read (no more chunks than the file's size allows: xet-core's are at least ~8 KiB but a file's last),
  then streamed: memory is bounded by a xorb's 8,192 chunks, not by a file's chunk count. The rebuilt bytes
  become the repo's LFS object, so commits, LFS downloads and the Hub's own readers see a Xet file as any
  other; the xorbs serve Xet downloads. (huggingface.co rebuilds on the fly instead of keeping both.)
- `sha256/<sha256>`: the file hash of an object, for the download headers that send clients to Xet; the
  first file registered under it keeps it (every one is checked to rebuild those bytes).
- `dedup/ab/<id>`: the xorbs an uploaded shard brought or its files use (its "dedup set"), one hash a
  line, the first `MAX_DEDUP_CHUNKS` chunks' worth: what a global dedup query answers, as huggingface.co
  answers with the shard a chunk arrived in, so one hit tells a client every xorb of an upload.
- `chunks/ab/<hash>`: the dedup set of every chunk a client may ask the global dedup API about (a file's
  first chunk, and chunks whose hash is 0 modulo 1024); the first upload that held it wins.

Every file is written to a temporary name and renamed into place: a killed server leaves no partial
object, only temporaries, cleared at the next start.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from hubkit.localhub.git.store import atomic_write
from hubkit.localhub.storage.exceptions import InvalidInputError, TooLargeError
from hubkit.localhub.storage.lfs import LfsStore
from hubkit.localhub.xet.hashes import (
    GLOBAL_DEDUP_MODULUS,
    MerkleTree,
    file_hash_of_root,
    hash_to_hex,
    hex_to_hash,
    modulo,
    verification_hash,
)
from hubkit.localhub.xet.shard import ShardFile, Term, read_upload_shard
from hubkit.localhub.xet.xorb import XorbChunk, read_xorb, unpack_chunk

_INDEX_ENTRY = struct.Struct("<32sIII")
MAX_DEDUP_CHUNKS = 1_000_000  # a dedup answer's chunks: ~48 MB of shard for ~64 GB of files
# xet-core's chunker cuts no chunk under 8 KiB (TARGET_CHUNK_SIZE / MINIMUM_CHUNK_DIVISOR) less its hash's
# 64-byte window but a file's last (and, chunking in parallel, a partition's): a file of n bytes is taken
# with up to n // MIN_CHUNK_SIZE + 1 chunks, half that minimum for a margin.
MIN_CHUNK_SIZE = 4 * 1024


@dataclass(frozen=True)
class XetFile:
    """A registered file: its terms as (xorb hash, first chunk, end chunk, unpacked length)."""

    file_hash: str
    sha256: str
    size: int
    terms: tuple[tuple[str, int, int, int], ...]


class XetStore:
    """The Xet objects of one Hub root."""

    def __init__(self, root: Path) -> None:
        self.base = root / "xet"

    def _write(self, target: Path, data: bytes | memoryview) -> None:
        atomic_write(target, data, self.base / "tmp")

    def xorb_file(self, xorb: str) -> Path:
        return self.base / "xorbs" / xorb[:2] / xorb

    # --- xorbs ---------------------------------------------------------------------------------

    def has_xorb(self, xorb: str) -> bool:
        return self.xorb_file(xorb).is_file()

    def put_xorb(self, xorb: str, body: bytes) -> bool:
        """Verify and store an uploaded xorb; False when it was already stored. Raises InvalidInputError
        (nothing stored) when the body is malformed or hashes to another xorb."""
        chunks_section, chunks = read_xorb(body, hex_to_hash(xorb))
        if self.has_xorb(xorb):
            return False
        path = self.xorb_file(xorb)
        index = b"".join(_INDEX_ENTRY.pack(c.hash, c.start, c.end, c.length) for c in chunks)
        self._write(path.with_suffix(".idx"), index)
        self._write(path, chunks_section)
        return True

    def xorb_chunks(self, xorb: str, start: int = 0, end: int | None = None) -> list[XorbChunk]:
        """Chunks [start, end) of a stored xorb, all by default (fewer past its end; none when it is not
        stored), read from its index alone."""
        if not self.has_xorb(xorb):
            return []
        with self.xorb_file(xorb).with_suffix(".idx").open("rb") as f:
            f.seek(start * _INDEX_ENTRY.size)
            data = f.read(-1 if end is None else max(0, end - start) * _INDEX_ENTRY.size)
        return [XorbChunk(*entry) for entry in _INDEX_ENTRY.iter_unpack(data)]

    def xorb_chunk_count(self, xorb: str) -> int:
        if not self.has_xorb(xorb):
            return 0
        return self.xorb_file(xorb).with_suffix(".idx").stat().st_size // _INDEX_ENTRY.size

    def chunk_span(self, xorb: str, start: int, end: int) -> tuple[int, int]:
        """Where the stored bytes of chunks [start, end) of a xorb begin and end."""
        return self.xorb_chunks(xorb, start, start + 1)[0].start, self.xorb_chunks(xorb, end - 1, end)[0].end

    def _file_bytes(self, terms: tuple[Term, ...]) -> Iterator[bytes]:
        """The bytes a file's (checked) terms rebuild, chunk by chunk."""
        for term in terms:
            xorb = hash_to_hex(term.xorb)
            with self.xorb_file(xorb).open("rb") as f:
                for chunk in self.xorb_chunks(xorb, term.start, term.end):
                    f.seek(chunk.start)
                    yield unpack_chunk(f.read(chunk.end - chunk.start))

    # --- files ---------------------------------------------------------------------------------

    def _file_path(self, file_id: str) -> Path:
        return self.base / "files" / file_id[:2] / f"{file_id}.json"

    def file(self, file_id: str) -> XetFile | None:
        try:
            data = json.loads(self._file_path(file_id).read_text())
        except FileNotFoundError:
            return None
        terms = tuple(tuple(t) for t in data["terms"])
        return XetFile(file_id, data["sha256"], data["size"], terms)  # type: ignore[arg-type]

    def file_of_object(self, sha256: str) -> str | None:
        """The Xet file hash of an LFS object uploaded through Xet, or None."""
        try:
            return (self.base / "sha256" / sha256).read_text()
        except FileNotFoundError:
            return None

    def _check_bounds(self, entry: ShardFile, file_id: str, max_size: int) -> int:
        """The file's size as its terms declare it, once it is within `max_size` and names no more chunks
        than that size allows: checked from the shard alone, before a chunk is read."""
        if entry.sha256 is None:
            raise InvalidInputError("A shard's files must carry their sha256 (a git repo names files by it).")
        if len(entry.verifications) != len(entry.terms):
            raise InvalidInputError("A shard's files must carry one verification hash per term.")
        size = sum(term.length for term in entry.terms)
        if size > max_size:
            raise TooLargeError(
                f"File {file_id} is {size} bytes: this local Hub takes objects of at most {max_size} bytes "
                "(hubkit hub serve --max-lfs-size)."
            )
        references = sum(term.end - term.start for term in entry.terms)
        if references > size // MIN_CHUNK_SIZE + 1:
            raise InvalidInputError(
                f"File {file_id} of the shard names {references} chunks for {size} bytes, more than one per "
                f"{MIN_CHUNK_SIZE} bytes: xet-core cuts chunks of about 8 KiB at least; send the ones it cuts."
            )
        return size

    def _check_terms(self, entry: ShardFile, file_id: str) -> bytes:
        """Check each term against the stored xorbs (range, length, verification hash), reading only the
        index entries it names, and the file hash against the chunks'; the file's first chunk hash."""
        tree, first = MerkleTree(), None
        for term, proof in zip(entry.terms, entry.verifications, strict=True):
            xorb = hash_to_hex(term.xorb)
            if not self.has_xorb(xorb):
                raise InvalidInputError(f"The shard names xorb {xorb}, which was never uploaded.")
            chunks = self.xorb_chunks(xorb, term.start, term.end)
            if len(chunks) != term.end - term.start or sum(c.length for c in chunks) != term.length:
                raise InvalidInputError(f"A term of the shard does not match xorb {xorb}'s chunks.")
            if verification_hash([c.hash for c in chunks]) != proof:
                raise InvalidInputError(f"A term's verification hash does not match xorb {xorb}'s chunks.")
            first = first or chunks[0].hash
            for chunk in chunks:
                tree.add((chunk.hash, chunk.length))
        if file_hash_of_root(tree.root()) != entry.file_hash:
            raise InvalidInputError(f"File {file_id} of the shard does not hash to its terms' chunks.")
        return first

    def _register(self, entry: ShardFile, lfs: LfsStore, max_size: int, dedup_set: str) -> XetFile:
        file_id = hash_to_hex(entry.file_hash)
        size = self._check_bounds(entry, file_id, max_size)
        first_chunk = self._check_terms(entry, file_id)
        sha256 = hash_to_hex(entry.sha256 or b"")
        if lfs.size(sha256) != size:
            lfs.write(sha256, size, self._file_bytes(entry.terms))  # verifies the sha256 before it appears
        else:  # the repo holds those bytes already: these terms must still rebuild them
            digest = hashlib.sha256()
            for part in self._file_bytes(entry.terms):
                digest.update(part)
            if digest.hexdigest() != sha256:
                raise InvalidInputError(
                    f"File {file_id} of the shard does not match its oid: its chunks hash to "
                    f"{digest.hexdigest()}, not {sha256}."
                )
        record = [[hash_to_hex(t.xorb), t.start, t.end, t.length] for t in entry.terms]
        self._write(
            self._file_path(file_id), json.dumps({"sha256": sha256, "size": size, "terms": record}).encode()
        )
        if self.file_of_object(sha256) is None:  # an earlier file of those bytes keeps them
            self._write(self.base / "sha256" / sha256, file_id.encode())
        self._index_chunk(first_chunk, dedup_set)  # a file's first chunk: always queryable
        return XetFile(file_id, sha256, size, tuple(tuple(t) for t in record))  # type: ignore[arg-type]

    def _index_chunk(self, chunk: bytes, dedup_set: str) -> None:
        name = hash_to_hex(chunk)
        path = self.base / "chunks" / name[:2] / name
        if not path.is_file():
            self._write(path, dedup_set.encode())

    def _dedup_set(self, xorbs: list[str]) -> tuple[str, bytes]:
        """The dedup set of the stored ones of `xorbs` (in order, each once, up to `MAX_DEDUP_CHUNKS`
        chunks): its id and its listing."""
        kept, chunks = [], 0
        for xorb in dict.fromkeys(xorbs):
            count = self.xorb_chunk_count(xorb)
            if count == 0 or (kept and chunks + count > MAX_DEDUP_CHUNKS):
                continue
            kept.append(xorb)
            chunks += count
        listing = "\n".join(kept).encode()
        return hashlib.sha256(listing).hexdigest(), listing

    def register_shard(self, data: bytes, lfs: LfsStore, max_size: int) -> list[XetFile]:
        """Register an uploaded shard's files, each of at most `max_size` bytes, in a repo (`lfs`: its
        object store) and index its xorbs' chunks for global dedup. Refuses (InvalidInputError) a malformed
        shard, a xorb never uploaded, a term, file hash or sha256 that does not match the chunks, and
        (TooLargeError) a file over `max_size`; files before the failing one stay registered, each checked whole.
        """
        files, xorbs = read_upload_shard(data)
        for listed in xorbs:
            if not self.has_xorb(hash_to_hex(listed.xorb)):
                raise InvalidInputError(
                    f"The shard lists xorb {hash_to_hex(listed.xorb)}, which was never uploaded."
                )
        used = [hash_to_hex(term.xorb) for entry in files for term in entry.terms]
        dedup_set, listing = self._dedup_set([hash_to_hex(listed.xorb) for listed in xorbs] + used)
        registered: list[XetFile] = []
        try:
            for entry in files:
                registered.append(self._register(entry, lfs, max_size, dedup_set))
        finally:
            set_path = self.base / "dedup" / dedup_set[:2] / dedup_set
            if registered and not set_path.is_file():  # what the registered files' first chunks name
                self._write(set_path, listing)
        for listed in xorbs:
            for chunk in self.xorb_chunks(hash_to_hex(listed.xorb)):
                if modulo(chunk.hash, GLOBAL_DEDUP_MODULUS) == 0:
                    self._index_chunk(chunk.hash, dedup_set)
        return registered

    def dedup_xorbs(self, chunk: str) -> list[str]:
        """The xorbs of the dedup set of an indexed chunk (none when it is not indexed)."""
        try:
            set_id = (self.base / "chunks" / chunk[:2] / chunk).read_text()
            listing = (self.base / "dedup" / set_id[:2] / set_id).read_text()
        except FileNotFoundError:
            return []
        return [xorb for xorb in listing.split("\n") if self.has_xorb(xorb)]
