"""The storage root: every repository under `root/repos/{type}s/{namespace}/{name}.git`, one process at a time.

Storage only, like `repos.py`: opening a root takes it for this process and clears what a killed server
left behind (temporary files, half-created repositories, unfinished uploads).
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import threading
from dataclasses import asdict
from pathlib import Path

from hubkit.localhub.git.store import GitDir, atomic_write
from hubkit.localhub.storage.exceptions import RepoExistsError, RepoNotFoundError, RootInUseError
from hubkit.localhub.storage.lfs import LfsStore
from hubkit.localhub.storage.repos import Repo, RepoMeta, RepoRef

# What a server killed mid-write leaves in a repository: temporary files (relative to the git dir) and,
# in the namespace folder, half-created repositories and temporary metadata files.
_LEFTOVERS = (
    "lfs/tmp/*",
    "objects/??/*.lock",
    "objects/??/.tmp-*",
    "refs/**/*.lock",
    "refs/**/.tmp-*",
    "*.lock",
)


class RepoStore:
    """All repositories of a root; `open()` locks `root/.lock` (released however the process dies)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._open: dict[RepoRef, Repo] = {}
        self._root_lock: int | None = None

    def open(self) -> None:
        """Take the root for this process and remove a killed server's leftovers. Raises RootInUseError."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise RootInUseError(f"Another local Hub is serving {self.root}.") from None
        self._root_lock = fd
        for git_dir in (self.root / "repos").glob("*/*/*.git"):
            for pattern in _LEFTOVERS:
                for leftover in git_dir.glob(pattern):
                    leftover.unlink(missing_ok=True)
            LfsStore(git_dir).remove_stale_uploads(None)  # unfinished multipart uploads: their client is gone
        for leftover in [*self.root.glob(".tmp-*"), *self.root.glob("xet/tmp/*")]:
            leftover.unlink(missing_ok=True)
        for namespace in (self.root / "repos").glob("*/*"):
            for leftover in namespace.glob(".tmp-*"):
                leftover.unlink(missing_ok=True)
            for staging in namespace.glob(".creating-*"):
                shutil.rmtree(staging, ignore_errors=True)

    def remove_stale_uploads(self, max_age: float) -> list[Path]:
        """Remove every repository's multipart uploads left unfinished for `max_age` seconds; return them."""
        return [
            folder
            for git_dir in (self.root / "repos").glob("*/*/*.git")
            for folder in LfsStore(git_dir).remove_stale_uploads(max_age)
        ]

    def signing_key(self) -> bytes:
        """The root's key for signed URLs, made on first use (readable by the server's user only)."""
        path = self.root / ".signing-key"
        if not path.is_file():
            atomic_write(path, secrets.token_bytes(32))  # through mkstemp: mode 0600
        return path.read_bytes()

    def close(self) -> None:
        """Let another process serve the root."""
        if self._root_lock is not None:
            os.close(self._root_lock)
            self._root_lock = None

    def _git_path(self, ref: RepoRef) -> Path:
        return self.root / "repos" / f"{ref.repo_type}s" / ref.namespace / f"{ref.name}.git"

    def canonical(self, ref: RepoRef) -> RepoRef:
        """`ref` as its repository spells it: the Hub's repo ids are case-insensitive (`me/Case-Repo` and
        `me/case-repo` are one repository), so a namespace or name in another case finds it."""
        if self._git_path(ref).exists():
            return ref
        base = self.root / "repos" / f"{ref.repo_type}s"
        folded = (ref.namespace.casefold(), f"{ref.name}.git".casefold())
        for namespace in base.glob("*") if base.is_dir() else ():
            if namespace.name.casefold() != folded[0]:
                continue
            for git_dir in namespace.glob("*.git"):
                if git_dir.name.casefold() == folded[1]:
                    return RepoRef(ref.repo_type, namespace.name, git_dir.name.removesuffix(".git"))
        return ref

    def get(self, ref: RepoRef) -> Repo:
        """The repository `ref` (in any case). Raises RepoNotFoundError."""
        with self._lock:
            ref = self.canonical(ref)
            repo = self._open.get(ref)
            if repo is None:
                path = self._git_path(ref)
                if not (path / "HEAD").is_file() or not path.with_suffix(".meta.json").is_file():
                    raise RepoNotFoundError(f"Repository not found: {ref.repo_type}s/{ref.repo_id}")
                repo = self._open[ref] = Repo(ref, path)
            return repo

    def exists(self, ref: RepoRef) -> bool:
        return (self._git_path(self.canonical(ref)) / "HEAD").is_file()

    def create(self, ref: RepoRef, meta: RepoMeta, initial_files: dict[str, bytes], author: str) -> Repo:
        """Create `ref` with one initial commit holding `initial_files`. Raises RepoExistsError."""
        with self._lock:
            path = self._git_path(ref)
            if path.exists() or self.canonical(ref) != ref:
                raise RepoExistsError(f"You already created this {ref.repo_type} repo: {ref.repo_id}")
            staging = path.with_name(f".creating-{ref.name}")
            shutil.rmtree(staging, ignore_errors=True)
            try:
                git = GitDir.init(staging)
                tree = git.write_tree({p: git.write_blob(data) for p, data in initial_files.items()})
                commit = git.write_commit(tree, [], "initial commit", author, meta.created_at)
                git.update_ref("refs/heads/main", commit, None)
                git.close()
                atomic_write(path.with_suffix(".meta.json"), json.dumps(asdict(meta)).encode())
                # The repository appears whole or not at all.
                staging.rename(path)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
            repo = self._open[ref] = Repo(ref, path)
            return repo

    def delete(self, ref: RepoRef) -> None:
        """Delete `ref` and its LFS objects. Raises RepoNotFoundError."""
        repo = self.get(ref)
        with self._lock, repo.lock:
            repo.git.close()
            shutil.rmtree(repo.git.path)
            repo.meta_path.unlink(missing_ok=True)
            self._open.pop(repo.ref, None)

    def list(self, repo_type: str) -> list[RepoRef]:
        base = self.root / "repos" / f"{repo_type}s"
        return [
            RepoRef(repo_type, p.parent.name, p.name.removesuffix(".git"))
            for p in sorted(base.glob("*/*.git"))
            if p.with_suffix(".meta.json").is_file()
        ]
