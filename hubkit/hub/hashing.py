"""Content hashes of files as the Hub names them, computed once per version of a file.

The Hub names an LFS file by the sha256 of its content and a regular file by its git blob sha1. Within
one push (or one watch, or one training run's pushes) a file is hashed once per version, a version being
its identity on disk (device, inode, size, mtime): each push owns a `FileHashCache`, hashes computed
while a file was read for another reason (an adapter validated in one read) are remembered in it, and
it reads a file only when no hash of that version is known. Large files get no git sha1 unless asked
for: the Hub stores them in LFS, where only the sha256 names them.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

# Files this small get their git blob sha1 at once (the Hub may store them as regular files, named by it);
# bigger ones are LFS files in practice (weights by their suffix, anything of 10 MiB or more whatever its
# name), named by their sha256 alone, and get the sha1 only if a remote regular file asks for it.
EAGER_GIT_SHA1_BYTES = 1024 * 1024
READ_CHUNK_BYTES = 8 * 1024 * 1024
_REMEMBERED_VERSIONS = 4096


@dataclass(frozen=True)
class FileHashes:
    """Content identity of a file as the Hub sees it: `sha256` is the LFS oid; `git_sha1` the git blob id,
    None when it was not computed (large files, stored in LFS)."""

    size: int
    sha256: str
    git_sha1: str | None = None


@dataclass(frozen=True)
class FileVersion:
    """What identifies one version of a file on disk without reading it."""

    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> FileVersion:
        """The version of `path` now (symlinks followed).

        Raises:
            OSError: the file cannot be stat'ed.
        """
        stat = path.stat()
        return cls(stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


class FileHashCache:
    """Hashes of the file versions one push has seen (bounded; least recently used dropped first).

    Thread-safe: adapters are read and remembered on several threads at once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hashes: OrderedDict[FileVersion, FileHashes] = OrderedDict()

    def _get(self, version: FileVersion) -> FileHashes | None:
        with self._lock:
            hashes = self._hashes.get(version)
            if hashes is not None:
                self._hashes.move_to_end(version)
            return hashes

    def remember(self, version: FileVersion, hashes: FileHashes) -> None:
        """Record the hashes of one file version (when its bytes were read), computed elsewhere (e.g. while
        validating it).

        Raises:
            ValueError: the sizes differ.
        """
        if hashes.size != version.size:
            raise ValueError(f"hashes of {hashes.size} bytes cannot describe a {version.size}-byte file")
        with self._lock:
            known = self._hashes.get(version)
            if known is not None and known.git_sha1 is not None and hashes.git_sha1 is None:
                hashes = known  # keep the richer entry
            self._hashes[version] = hashes
            self._hashes.move_to_end(version)
            while len(self._hashes) > _REMEMBERED_VERSIONS:
                self._hashes.popitem(last=False)

    def hash_file(self, path: Path, *, git_sha1: bool | None = None) -> FileHashes:
        """The hashes of a file on disk (symlinks followed), read only if this version's are not known yet;
        the git blob sha1 too when `git_sha1`, None: only for small files (below `EAGER_GIT_SHA1_BYTES`).

        Raises:
            OSError: the file cannot be read.
        """
        version = FileVersion.of(path)
        want_git = version.size < EAGER_GIT_SHA1_BYTES if git_sha1 is None else git_sha1
        known = self._get(version)
        if known is not None and (known.git_sha1 is not None or not want_git):
            return known
        hashes = _read_hashes(path, version.size, want_git)
        if FileVersion.of(path) == version and hashes.size == version.size:  # not rewritten while read
            self.remember(version, hashes)
        return hashes


def hash_bytes(data: bytes, *, sha256: str | None = None) -> FileHashes:
    """Hash in-memory content the way the Hub does (sha256 and git blob sha1); `sha256`: the content's,
    when it is known already (only the git sha1 is computed)."""
    git = hashlib.sha1(f"blob {len(data)}\0".encode())
    git.update(data)
    sha256 = sha256 or hashlib.sha256(data).hexdigest()
    return FileHashes(size=len(data), sha256=sha256, git_sha1=git.hexdigest())


def hash_file(path: Path, *, git_sha1: bool | None = None) -> FileHashes:
    """The hashes of a file on disk, read now (see `FileHashCache.hash_file` to read each version once).

    Raises:
        OSError: the file cannot be read.
    """
    size = path.stat().st_size
    return _read_hashes(path, size, size < EAGER_GIT_SHA1_BYTES if git_sha1 is None else git_sha1)


def _read_hashes(path: Path, size: int, git_sha1: bool) -> FileHashes:
    sha256 = hashlib.sha256()
    git = hashlib.sha1(f"blob {size}\0".encode()) if git_sha1 else None
    read = 0
    with path.open("rb") as f:
        while chunk := f.read(READ_CHUNK_BYTES):
            sha256.update(chunk)
            if git is not None:
                git.update(chunk)
            read += len(chunk)
    return FileHashes(size=read, sha256=sha256.hexdigest(), git_sha1=git.hexdigest() if git else None)
