"""A bare git repository written in git's own object format, with no dependency on the git binary.

Only what a Hub needs: loose objects (blob, tree, commit), refs as files, nested trees built from
a flat path map. Everything written here passes `git fsck --strict` and can be cloned by git.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

FILE_MODE = "100644"
TREE_MODE = "40000"
EMPTY_TREE_SHA = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


class GitObjectMissingError(KeyError):
    """An object id that is not in the repository."""


@dataclass(frozen=True)
class TreeEntry:
    """One entry of a git tree: a file (mode 100644) or a subtree (mode 40000)."""

    mode: str
    name: str
    sha: str

    @property
    def is_tree(self) -> bool:
        return self.mode == TREE_MODE


@dataclass(frozen=True)
class Commit:
    """A parsed commit object."""

    sha: str
    tree: str
    parents: tuple[str, ...]
    author: str
    timestamp: int
    message: str

    @property
    def title(self) -> str:
        return self.message.split("\n", 1)[0]

    @property
    def body(self) -> str:
        parts = self.message.split("\n\n", 1)
        return parts[1].rstrip("\n") if len(parts) > 1 else ""


def blob_sha(data: bytes) -> str:
    """The git blob id of `data` (what the Hub calls a regular file's oid)."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename: readers see the old or the new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _tree_sort_key(entry: TreeEntry) -> bytes:
    # git sorts tree entries by name, comparing a subtree's name as if it ended with "/".
    return entry.name.encode() + (b"/" if entry.is_tree else b"")


class GitDir:
    """A bare git directory (`<name>.git`): objects, refs and HEAD."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def init(cls, path: Path, default_branch: str = "main") -> GitDir:
        """Create an empty bare repository at `path` whose HEAD names `default_branch`."""
        for sub in ("objects/info", "objects/pack", "refs/heads", "refs/tags", "info"):
            (path / sub).mkdir(parents=True, exist_ok=True)
        (path / "HEAD").write_text(f"ref: refs/heads/{default_branch}\n")
        (path / "config").write_text(
            "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n"
        )
        (path / "description").write_text("Repository served by hubkit's local Hub.\n")
        return cls(path)

    # --- objects ---------------------------------------------------------------------------------

    def _object_path(self, sha: str) -> Path:
        return self.path / "objects" / sha[:2] / sha[2:]

    def has_object(self, sha: str) -> bool:
        return self._object_path(sha).is_file()

    def write_object(self, kind: str, data: bytes) -> str:
        """Store an object (idempotent) and return its id."""
        raw = f"{kind} {len(data)}".encode() + b"\x00" + data
        sha = hashlib.sha1(raw).hexdigest()
        path = self._object_path(sha)
        if not path.exists():
            atomic_write(path, zlib.compress(raw, 1))
        return sha

    def read_object(self, sha: str) -> tuple[str, bytes]:
        """Return (kind, data) of an object. Raises GitObjectMissingError if it is absent."""
        try:
            raw = zlib.decompress(self._object_path(sha).read_bytes())
        except FileNotFoundError:
            raise GitObjectMissingError(sha) from None
        header, _, data = raw.partition(b"\x00")
        kind, _, _size = header.decode().partition(" ")
        return kind, data

    def write_blob(self, data: bytes) -> str:
        return self.write_object("blob", data)

    def read_blob(self, sha: str) -> bytes:
        kind, data = self.read_object(sha)
        if kind != "blob":
            raise GitObjectMissingError(sha)
        return data

    # --- trees -----------------------------------------------------------------------------------

    def write_tree_entries(self, entries: list[TreeEntry]) -> str:
        body = b"".join(
            f"{e.mode} {e.name}".encode() + b"\x00" + bytes.fromhex(e.sha)
            for e in sorted(entries, key=_tree_sort_key)
        )
        return self.write_object("tree", body)

    def read_tree(self, sha: str) -> list[TreeEntry]:
        kind, data = self.read_object(sha)
        if kind != "tree":
            raise GitObjectMissingError(sha)
        entries, pos = [], 0
        while pos < len(data):
            nul = data.index(b"\x00", pos)
            mode, _, name = data[pos:nul].decode().partition(" ")
            entries.append(TreeEntry(mode, name, data[nul + 1 : nul + 21].hex()))
            pos = nul + 21
        return entries

    def write_tree(self, files: dict[str, str]) -> str:
        """Write nested trees for a flat {path: blob sha} map; return the root tree id."""
        children: dict[str, dict[str, str]] = {}
        entries: list[TreeEntry] = []
        for path, sha in files.items():
            head, sep, rest = path.partition("/")
            if sep:
                children.setdefault(head, {})[rest] = sha
            else:
                entries.append(TreeEntry(FILE_MODE, head, sha))
        entries += [TreeEntry(TREE_MODE, name, self.write_tree(sub)) for name, sub in children.items()]
        return self.write_tree_entries(entries)

    def list_files(self, tree_sha: str, prefix: str = "") -> dict[str, str]:
        """Flatten a tree into {path: blob sha}, recursively."""
        files: dict[str, str] = {}
        for entry in self.read_tree(tree_sha):
            path = prefix + entry.name
            if entry.is_tree:
                files.update(self.list_files(entry.sha, path + "/"))
            else:
                files[path] = entry.sha
        return files

    # --- commits ---------------------------------------------------------------------------------

    def write_commit(self, tree: str, parents: list[str], message: str, author: str, timestamp: int) -> str:
        """Write a commit object. `author` is `Name <email>`; times are UTC."""
        lines = [f"tree {tree}"] + [f"parent {p}" for p in parents]
        lines += [f"author {author} {timestamp} +0000", f"committer {author} {timestamp} +0000"]
        text = "\n".join(lines) + "\n\n" + message.rstrip("\n") + "\n"
        return self.write_object("commit", text.encode())

    def read_commit(self, sha: str) -> Commit:
        kind, data = self.read_object(sha)
        if kind != "commit":
            raise GitObjectMissingError(sha)
        header, _, message = data.decode().partition("\n\n")
        tree, parents, author, timestamp = "", [], "", 0
        for line in header.split("\n"):
            key, _, value = line.partition(" ")
            if key == "tree":
                tree = value
            elif key == "parent":
                parents.append(value)
            elif key == "author":
                name, _, when = value.rpartition(">")
                author = name + ">"
                timestamp = int(when.split()[0])
        return Commit(sha, tree, tuple(parents), author, timestamp, message.rstrip("\n"))

    # --- refs ------------------------------------------------------------------------------------

    def read_ref(self, name: str) -> str | None:
        """The commit id a full ref name (`refs/heads/main`) points to, or None."""
        path = self.path / name
        return path.read_text().strip() if path.is_file() else None

    def write_ref(self, name: str, sha: str) -> None:
        atomic_write(self.path / name, (sha + "\n").encode())

    def delete_ref(self, name: str) -> None:
        (self.path / name).unlink(missing_ok=True)

    def list_refs(self, prefix: str) -> dict[str, str]:
        """{short name: commit id} of the refs under `prefix` (e.g. `refs/heads/`)."""
        base = self.path / prefix
        if not base.is_dir():
            return {}
        return {
            p.relative_to(base).as_posix(): p.read_text().strip()
            for p in sorted(base.rglob("*"))
            if p.is_file() and not p.name.startswith(".tmp-")
        }
