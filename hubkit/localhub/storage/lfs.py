"""Git LFS object storage: content addressed by sha256, written streamed and verified.

Objects live in the git-lfs layout inside the bare repository (`lfs/objects/ab/cd/<sha256>`);
git itself stores only the small pointer file that names them.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hubkit.localhub.storage.exceptions import InvalidInputError

_OID = re.compile(r"^[0-9a-f]{64}$")
_POINTER = re.compile(
    rb"^version https://git-lfs\.github\.com/spec/v1\noid sha256:([0-9a-f]{64})\nsize (\d+)\n$"
)
# Blobs bigger than this cannot be pointers; skip parsing them.
MAX_POINTER_SIZE = 200


@dataclass(frozen=True)
class LfsPointer:
    """What a git LFS pointer file says: the content's sha256 and size."""

    oid: str
    size: int

    def to_bytes(self) -> bytes:
        return (
            f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.oid}\nsize {self.size}\n".encode()
        )

    @classmethod
    def parse(cls, data: bytes) -> LfsPointer | None:
        """The pointer `data` encodes, or None when `data` is ordinary content."""
        if len(data) > MAX_POINTER_SIZE:
            return None
        match = _POINTER.match(data)
        return cls(match.group(1).decode(), int(match.group(2))) if match else None


def check_oid(oid: str) -> str:
    """Return `oid` if it is a lowercase hex sha256. Raises InvalidInputError otherwise."""
    if not isinstance(oid, str) or not _OID.match(oid):
        raise InvalidInputError(f"Invalid LFS oid {oid!r}: expected a 64-character lowercase hex sha256.")
    return oid


class LfsStore:
    """The LFS objects of one repository."""

    def __init__(self, git_dir: Path) -> None:
        self.base = git_dir / "lfs"

    def path(self, oid: str) -> Path:
        check_oid(oid)
        return self.base / "objects" / oid[:2] / oid[2:4] / oid

    def size(self, oid: str) -> int | None:
        """Size of a stored object, or None if it is not stored."""
        try:
            return self.path(oid).stat().st_size
        except FileNotFoundError:
            return None

    def write(self, oid: str, size: int, chunks: Iterable[bytes]) -> None:
        """Stream `chunks` into the store as object `oid`.

        The bytes go to a temporary file while their sha256 is computed; the object appears only once
        both size and hash match. Raises InvalidInputError (nothing stored) on any mismatch.
        """
        tmp_dir = self.base / "tmp"
        tmp_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=tmp_dir)
        digest = hashlib.sha256()
        try:
            with os.fdopen(fd, "wb") as f:
                for chunk in chunks:
                    digest.update(chunk)
                    f.write(chunk)
            self._publish(Path(tmp), oid, size, digest.hexdigest())
        finally:
            Path(tmp).unlink(missing_ok=True)

    def _publish(self, file: Path, oid: str, size: int, sha256: str) -> None:
        """Move a fully written `file` into place as object `oid`, if its size and hash are the promised ones."""
        written = file.stat().st_size
        if written != size:
            raise InvalidInputError(
                f"LFS upload of {oid} is truncated or too long: got {written} of {size} bytes."
            )
        if sha256 != oid:
            raise InvalidInputError(f"LFS upload does not match its oid: sha256 is {sha256}, expected {oid}.")
        target = self.path(oid)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(file, target)

    # --- multipart -------------------------------------------------------------------------------

    def _incomplete(self, oid: str) -> Path:
        return self.base / "incomplete" / check_oid(oid)

    def write_part(self, oid: str, part_number: int, offset: int, chunks: Iterable[bytes]) -> str:
        """Write one part of a multipart upload at its offset; return its etag (checked on completion)."""
        folder = self._incomplete(oid)
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / "data", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            position = offset
            for chunk in chunks:
                position += os.pwrite(fd, chunk, position)
        finally:
            os.close(fd)
        etag = f"{part_number}-{position - offset}-{secrets.token_hex(8)}"
        (folder / f"{part_number}.etag").write_text(etag)
        return etag

    def remove_stale_uploads(self, max_age: float | None) -> list[Path]:
        """Remove (and return) the unfinished multipart uploads idle for `max_age` seconds (None: all)."""
        removed = []
        now = time.time()
        for folder in sorted((self.base / "incomplete").glob("*")):
            try:
                last_write = max(p.stat().st_mtime for p in [folder, *folder.iterdir()])
            except OSError:  # completed or removed meanwhile
                continue
            if max_age is None or now - last_write > max_age:
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
        return removed

    def complete_multipart(self, oid: str, size: int, part_count: int, etags: list[str]) -> None:
        """Turn parts 1..`part_count` (their etags must match `etags`) into object `oid`, verified like `write`."""
        folder = self._incomplete(oid)
        recorded = [folder / f"{n}.etag" for n in range(1, part_count + 1)]
        if (
            part_count < 1
            or len(etags) != part_count
            or not all(f.is_file() and f.read_text() == etag for f, etag in zip(recorded, etags, strict=True))
        ):
            raise InvalidInputError(f"Multipart upload of {oid} is missing parts or names unknown etags.")
        data = folder / "data"
        try:
            with data.open("rb") as f:
                digest = hashlib.file_digest(f, "sha256")
            self._publish(data, oid, size, digest.hexdigest())
        finally:
            shutil.rmtree(folder, ignore_errors=True)
