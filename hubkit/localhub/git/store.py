"""A bare git repository, read and written through dulwich (git's whole object store in pure Python).

Objects are read whether loose or packed (a `git gc` or `git repack` by an administrator changes
nothing for clients) and written loose; refs, packed or not, move by compare-and-swap under git's
own lock files. Everything written passes `git fsck --strict` and can be cloned by git.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dulwich.objects import Blob, Tree
from dulwich.objects import Commit as GitCommit
from dulwich.repo import Repo as DulwichRepo

FILE_MODE = 0o100644
TREE_MODE = 0o040000
# Only what a bare repo served over HTTP needs: no reflogs (the Hub keeps none).
_CONFIG = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n"


class GitObjectMissingError(KeyError):
    """An object id that is not in the repository (or is not of the kind asked for)."""


@dataclass(frozen=True)
class TreeEntry:
    """One entry of a git tree: a file or a subtree."""

    name: str
    sha: str
    is_tree: bool


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
        return self.message.partition("\n\n")[2].rstrip("\n")


def blob_sha(data: bytes) -> str:
    """The git blob id of `data` (what the Hub calls a regular file's oid)."""
    return Blob.from_string(data).id.decode()


def atomic_write(path: Path, data: bytes | memoryview, tmp_dir: Path | None = None) -> None:
    """Write `data` to `path` through a temporary file (`.tmp-*` beside it, or in `tmp_dir`) and a rename:
    readers see the old or the new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if tmp_dir is not None:
        tmp_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=tmp_dir or path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class GitDir:
    """A bare git directory (`<name>.git`): objects, refs and HEAD. Safe to share between threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._repo = DulwichRepo(str(path))
        # dulwich's object store caches open packs; one thread at a time uses it.
        self._lock = threading.RLock()
        self._written: list[str] | None = None

    @classmethod
    def init(cls, path: Path, default_branch: str = "main") -> GitDir:
        """Create an empty bare repository at `path` whose HEAD names `default_branch`."""
        path.mkdir(parents=True)
        DulwichRepo.init_bare(str(path), default_branch=default_branch.encode()).close()
        (path / "config").write_text(_CONFIG)
        (path / "description").write_text("Repository served by hubkit's local Hub.\n")
        return cls(path)

    # --- objects ---------------------------------------------------------------------------------

    def _loose_path(self, sha: str) -> Path:
        return self.path / "objects" / sha[:2] / sha[2:]

    def _add(self, obj: Blob | Tree | GitCommit) -> str:
        sha = obj.id.decode()
        with self._lock:
            if self._written is not None and not self._loose_path(sha).exists():
                self._written.append(sha)
            self._repo.object_store.add_object(obj)
        return sha

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Objects written inside are removed again if the block fails (a full disk leaves nothing behind).

        Only one transaction at a time per repository: callers hold the repository's lock.
        """
        self._written = []
        try:
            yield
        except BaseException:
            for sha in self._written:
                self._loose_path(sha).unlink(missing_ok=True)
                with contextlib.suppress(OSError):  # the folder, when this object was its only one
                    self._loose_path(sha).parent.rmdir()
            raise
        finally:
            self._written = None

    def _read(self, sha: str, kind: type) -> Blob | Tree | GitCommit:
        with self._lock:
            try:
                obj = self._repo.object_store[sha.encode()]
            except (KeyError, ValueError, AssertionError):
                raise GitObjectMissingError(sha) from None
        if not isinstance(obj, kind):
            raise GitObjectMissingError(sha)
        return obj

    def commit_by_prefix(self, prefix: str) -> str | None:
        """The one commit whose id starts with `prefix` (hex), or None: none, or more than one."""
        with self._lock:
            found = [sha.decode() for sha in self._repo.object_store.iter_prefix(prefix.encode())]
        commits = [sha for sha in found if self.is_commit(sha)]
        return commits[0] if len(commits) == 1 else None

    def is_commit(self, sha: str) -> bool:
        try:
            self._read(sha, GitCommit)
        except GitObjectMissingError:
            return False
        return True

    def write_blob(self, data: bytes) -> str:
        return self._add(Blob.from_string(data))

    def read_blob(self, sha: str) -> bytes:
        return self._read(sha, Blob).as_raw_string()

    # --- trees -----------------------------------------------------------------------------------

    def read_tree(self, sha: str) -> list[TreeEntry]:
        tree = self._read(sha, Tree)
        return [TreeEntry(e.path.decode(), e.sha.decode(), e.mode == TREE_MODE) for e in tree.iteritems()]

    def write_tree(self, files: dict[str, str]) -> str:
        """Write nested trees for a flat {path: blob sha} map; return the root tree id."""
        children: dict[str, dict[str, str]] = {}
        tree = Tree()
        for path, sha in files.items():
            head, sep, rest = path.partition("/")
            if sep:
                children.setdefault(head, {})[rest] = sha
            else:
                tree.add(head.encode(), FILE_MODE, sha.encode())
        for name, sub in children.items():
            tree.add(name.encode(), TREE_MODE, self.write_tree(sub).encode())
        return self._add(tree)

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
        commit = GitCommit()
        commit.tree = tree.encode()
        commit.parents = [p.encode() for p in parents]
        commit.author = commit.committer = author.encode()
        commit.author_time = commit.commit_time = timestamp
        commit.author_timezone = commit.commit_timezone = 0
        commit.message = (message.rstrip("\n") + "\n").encode()
        return self._add(commit)

    def read_commit(self, sha: str) -> Commit:
        commit = self._read(sha, GitCommit)
        return Commit(
            sha=sha,
            tree=commit.tree.decode(),
            parents=tuple(p.decode() for p in commit.parents),
            author=commit.author.decode("utf-8", "replace"),
            timestamp=commit.author_time,
            message=commit.message.decode("utf-8", "replace").rstrip("\n"),
        )

    # --- refs ------------------------------------------------------------------------------------

    def read_ref(self, name: str) -> str | None:
        """The commit id a full ref name (`refs/heads/main`) points to, loose or packed, or None."""
        with self._lock:
            sha = self._repo.refs.read_ref(name.encode())
        return sha.decode() if sha else None

    def update_ref(self, name: str, new: str, old: str | None) -> bool:
        """Point `name` at `new` if it still points at `old` (None: if it does not exist). Atomic."""
        with self._lock:
            if old is None:
                return self._repo.refs.add_if_new(name.encode(), new.encode())
            return self._repo.refs.set_if_equals(name.encode(), old.encode(), new.encode())

    def delete_ref(self, name: str) -> None:
        with self._lock:
            self._repo.refs.remove_if_equals(name.encode(), None)

    def list_refs(self, prefix: str) -> dict[str, str]:
        """{short name: commit id} of the refs under `prefix` (e.g. `refs/heads/`), loose or packed."""
        with self._lock:
            refs = self._repo.refs.as_dict(prefix.rstrip("/").encode())
        return {name.decode(): sha.decode() for name, sha in sorted(refs.items())}

    def close(self) -> None:
        with self._lock:
            self._repo.close()
