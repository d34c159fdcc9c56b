"""Repositories on disk: one bare git repository (plus its LFS objects) per Hub repo.

Storage only: nothing here knows about HTTP. Every change to a repository happens under that
repository's lock, and a branch moves only after all of the commit's objects are written, so a
crash or a refused request never leaves a half-made commit behind.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from hubkit.localhub.git.attributes import DEFAULT_GITATTRIBUTES, lfs_patterns
from hubkit.localhub.git.rules import check_special_file
from hubkit.localhub.git.store import Commit, GitDir, atomic_write, blob_sha
from hubkit.localhub.storage.exceptions import (
    EntryNotFoundError,
    InvalidInputError,
    ParentCommitMismatchError,
    RefExistsError,
    RevisionNotFoundError,
)
from hubkit.localhub.storage.lfs import LfsPointer, LfsStore, check_oid
from hubkit.localhub.storage.names import (
    COMMIT_SHA,
    PR_REF,
    REF_NAME,
    SHORT_SHA,
    check_name,
    check_path,
    check_ref_name,
)

REPO_TYPES = ("model", "dataset", "space")
SPACE_SDKS = ("gradio", "streamlit", "docker", "static")


@dataclass(frozen=True)
class RepoRef:
    """Which repository: type, namespace and name, validated."""

    repo_type: str
    namespace: str
    name: str

    def __post_init__(self) -> None:
        if self.repo_type not in REPO_TYPES:
            raise InvalidInputError(
                f"Invalid repo type {self.repo_type!r}: use one of {', '.join(REPO_TYPES)}."
            )
        check_name(self.namespace, "namespace")
        check_name(self.name, "repo name")

    @property
    def repo_id(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class FileEntry:
    """A file in a commit. `oid` is what the Hub reports: the sha256 for LFS files, else the blob id."""

    path: str
    blob_sha: str
    size: int
    lfs: LfsPointer | None = None

    @property
    def oid(self) -> str:
        return self.lfs.oid if self.lfs else self.blob_sha


@dataclass(frozen=True)
class FolderEntry:
    """A directory in a commit."""

    path: str
    tree_sha: str


# --- commit operations (one per NDJSON line of a Hub commit) --------------------------------------


@dataclass(frozen=True)
class AddContent:
    path: str
    content: bytes


@dataclass(frozen=True)
class AddLfs:
    path: str
    oid: str
    size: int | None  # None for a copy: the stored object's size is used


@dataclass(frozen=True)
class DeleteFile:
    path: str


@dataclass(frozen=True)
class DeleteFolder:
    path: str


Operation = AddContent | AddLfs | DeleteFile | DeleteFolder


@dataclass
class RepoMeta:
    """What the Hub keeps beside the git data (stored as `<name>.meta.json`)."""

    private: bool = False
    sdk: str | None = None
    hardware: str | None = None  # a Space's requested hardware flavor (zero-a10g: ZeroGPU)
    gated: str | bool = False  # "auto" or "manual": only its namespace's members download its files
    created_at: int = field(default_factory=lambda: int(time.time()))


class Repo:
    """One repository: read snapshots, commit, manage refs. Safe to share between threads."""

    def __init__(self, ref: RepoRef, git_path: Path) -> None:
        self.ref = ref
        self.git = GitDir(git_path)
        self.lfs = LfsStore(git_path)
        self.meta_path = git_path.with_suffix(".meta.json")
        self.lock = threading.RLock()
        self._blob_info: dict[str, tuple[int, LfsPointer | None]] = {}

    @property
    def meta(self) -> RepoMeta:
        return RepoMeta(**json.loads(self.meta_path.read_text()))

    def update_meta(self, **changes: object) -> None:
        with self.lock:
            meta = replace(self.meta, **changes)
            atomic_write(self.meta_path, json.dumps(asdict(meta)).encode())

    # --- revisions -------------------------------------------------------------------------------

    def resolve(self, revision: str) -> str:
        """The commit id of a branch, tag, `refs/...` name, or full or short (7+ hex digits, unambiguous)
        commit id. Raises RevisionNotFoundError."""
        if not isinstance(revision, str):
            raise InvalidInputError(f"Invalid revision {revision!r}.")
        if COMMIT_SHA.match(revision):
            if self.git.is_commit(revision):
                return revision
        elif REF_NAME.match(revision) and ".." not in revision and not revision.startswith("/"):
            full = (
                [revision]
                if revision.startswith("refs/")
                else [f"refs/heads/{revision}", f"refs/tags/{revision}"]
            )
            for ref in full:
                if sha := self.git.read_ref(ref):
                    return sha
            # A short commit id, as git and the Hub take one (a branch or tag of that name comes first).
            if SHORT_SHA.match(revision) and (sha := self.git.commit_by_prefix(revision)):
                return sha
        raise RevisionNotFoundError(f"Invalid rev id: {revision}")

    def log(self, revision: str) -> list[Commit]:
        """Commits reachable from `revision` by first parents, newest first."""
        commits, sha = [], self.resolve(revision)
        while sha:
            commit = self.git.read_commit(sha)
            commits.append(commit)
            sha = commit.parents[0] if commit.parents else ""
        return commits

    # --- reading files ---------------------------------------------------------------------------

    def _entry(self, path: str, blob_sha: str) -> FileEntry:
        info = self._blob_info.get(blob_sha)
        if info is None:
            data = self.git.read_blob(blob_sha)
            pointer = LfsPointer.parse(data)
            info = (pointer.size if pointer else len(data), pointer)
            self._blob_info[blob_sha] = info
        return FileEntry(path, blob_sha, info[0], info[1])

    def files(self, commit: str) -> dict[str, FileEntry]:
        """Every file of a commit, by path."""
        tree = self.git.read_commit(commit).tree
        return {path: self._entry(path, sha) for path, sha in self.git.list_files(tree).items()}

    def _find(self, commit: str, path: str) -> FileEntry | FolderEntry | None:
        found = self._walk(self.git.read_commit(commit).tree, path)
        if found is None:
            return None
        sha, is_tree = found
        return FolderEntry(path, sha) if is_tree else self._entry(path, sha)

    def _walk(self, tree: str, path: str) -> tuple[str, bool] | None:
        """The id at `path` under `tree`, and whether it is a tree; None if there is nothing there."""
        sha, is_tree = tree, True
        for part in path.split("/") if path else []:
            entry = next((e for e in self.git.read_tree(sha) if e.name == part), None) if is_tree else None
            if entry is None:
                return None
            sha, is_tree = entry.sha, entry.is_tree
        return sha, is_tree

    def last_commits(self, commit: str, paths: list[str], limit: int = 1000) -> dict[str, Commit]:
        """The newest commit, along first parents from `commit`, that changed each path (its blob or its
        tree), as the Hub's `lastCommit`; a path unchanged over `limit` commits gets the oldest one read."""
        pending, found = set(paths), {}
        current = self.git.read_commit(commit)
        for _ in range(limit):
            parent = self.git.read_commit(current.parents[0]) if current.parents else None
            for path in sorted(pending):
                if parent is None or self._walk(current.tree, path) != self._walk(parent.tree, path):
                    found[path] = current
                    pending.discard(path)
            if not pending or parent is None:
                break
            current = parent
        return found | dict.fromkeys(pending, current)

    def file(self, commit: str, path: str) -> FileEntry:
        """The file at `path`. Raises EntryNotFoundError (naming the commit) if there is none."""
        entry = self._find(commit, path)
        if not isinstance(entry, FileEntry):
            raise EntryNotFoundError(f"Entry not found: {path}", commit=commit)
        return entry

    def read(self, entry: FileEntry) -> bytes:
        """The content of a regular (non-LFS) file."""
        return self.git.read_blob(entry.blob_sha)

    def paths_info(self, commit: str, paths: list[str]) -> list[FileEntry | FolderEntry]:
        """Entries for those of `paths` that exist (files or folders), in the order asked."""
        found = (self._find(commit, path.strip("/")) for path in paths)
        return [entry for entry in found if entry is not None]

    def tree(self, commit: str, path: str, recursive: bool) -> list[FileEntry | FolderEntry]:
        """The entries under folder `path` ("" for the root). Raises EntryNotFoundError if it is no folder."""
        folder = self._find(commit, path)
        if not isinstance(folder, FolderEntry):
            raise EntryNotFoundError(f"Folder not found: {path}", commit=commit)
        entries: list[FileEntry | FolderEntry] = []
        pending = [(folder.tree_sha, f"{path}/" if path else "")]
        while pending:
            tree_sha, prefix = pending.pop(0)
            for e in self.git.read_tree(tree_sha):
                if e.is_tree:
                    entries.append(FolderEntry(prefix + e.name, e.sha))
                    if recursive:
                        pending.append((e.sha, f"{prefix}{e.name}/"))
                else:
                    entries.append(self._entry(prefix + e.name, e.sha))
        return entries

    def lfs_patterns(self, commit: str) -> list[str]:
        try:
            return lfs_patterns(self.read(self.file(commit, ".gitattributes")).decode("utf-8", "replace"))
        except EntryNotFoundError:
            return []

    # --- writing ---------------------------------------------------------------------------------

    def commit(
        self,
        branch: str,
        operations: list[Operation],
        message: str,
        author: str,
        parent_commit: str | None = None,
        create_pr: bool = False,
        before_ref_update: Callable[[], None] | None = None,
    ) -> tuple[str, str]:
        """Apply `operations` on top of `branch` as one commit; return (commit id, ref it landed on).

        Every operation is checked before the first object is written. With `create_pr`, the commit
        lands on a new `refs/pr/N` started from the branch head. `before_ref_update` is called once
        the commit's objects are written and before the branch moves (`HubHooks.ref_update`). Refuses a bad
        path, an LFS object never uploaded or a revision that is no branch (InvalidInputError), a deletion
        of a missing path (EntryNotFoundError), a `parent_commit` that is no longer the branch head
        (ParentCommitMismatchError), and a branch that does not exist (RevisionNotFoundError).
        """
        with self.lock:
            ref = branch if PR_REF.match(branch) else f"refs/heads/{branch}"
            head = self.git.read_ref(ref)
            if head is None:
                if COMMIT_SHA.match(branch) or self.git.read_ref(f"refs/tags/{branch}"):
                    raise InvalidInputError(f"Cannot commit to {branch!r}: commits go to a branch.")
                raise RevisionNotFoundError(f"Invalid rev id: {branch}")
            if parent_commit is not None and parent_commit != head:
                raise ParentCommitMismatchError(
                    f"A commit has happened since {parent_commit}: the head of {branch} is now {head}."
                )
            files = {path: entry.blob_sha for path, entry in self.files(head).items()}
            new_blobs = self._apply(files, operations, head)
            # The branch moves last, in one atomic step: a crash or a full disk before it leaves the
            # repository at its previous commit (and a failure removes the objects written so far).
            with self.git.transaction():
                for data in new_blobs:
                    self.git.write_blob(data)
                tree = self.git.write_tree(files)
                sha = self.git.write_commit(tree, [head], message, author, int(time.time()))
                if before_ref_update is not None:
                    before_ref_update()
                expected: str | None = head
                if create_pr:
                    number = 1 + max((int(n) for n in self.git.list_refs("refs/pr/")), default=0)
                    ref, expected = f"refs/pr/{number}", None
                if not self.git.update_ref(ref, sha, expected):
                    raise ParentCommitMismatchError(f"{ref} moved while committing: try again.")
            return sha, ref

    def _apply(self, files: dict[str, str], operations: list[Operation], head: str) -> list[bytes]:
        """Apply operations to the {path: blob} map in memory; return the blobs to write."""
        blobs = []
        for op in operations:
            path = check_path(op.path)
            if isinstance(op, AddContent | AddLfs):
                data = op.content if isinstance(op, AddContent) else self._pointer_for(op, path)
                check_special_file(path, data)  # .gitmodules, .gitattributes: what git reads in them
                self._check_no_file_folder_clash(files, path)
                files[path] = blob_sha(data)
                blobs.append(data)
            elif isinstance(op, DeleteFile) and files.pop(path, None) is not None:
                continue
            else:
                # A folder; or a file's delete naming a folder, which the Hub takes as the folder's
                # (the client sends a path without a trailing slash as a file).
                inside = [p for p in files if p.startswith(path + "/")]
                if not inside:
                    kind = "file" if isinstance(op, DeleteFile) else "folder"
                    raise EntryNotFoundError(f"A {kind} with this name doesn't exist: {path}", commit=head)
                for p in inside:
                    del files[p]
        return blobs

    def _pointer_for(self, op: AddLfs, path: str) -> bytes:
        """The pointer blob of an LFS addition, whose object must already be uploaded."""
        stored = self.lfs.size(check_oid(op.oid))
        if stored is None or (op.size is not None and op.size != stored):
            raise InvalidInputError(
                f"LFS object {op.oid} for {path} was not uploaded (or has another size): "
                "upload it through the LFS batch API first."
            )
        return LfsPointer(op.oid, stored).to_bytes()

    @staticmethod
    def _check_no_file_folder_clash(files: dict[str, str], path: str) -> None:
        # git cannot hold a file and a folder of the same name: `a` and `a/b` would make a broken tree.
        parts = path.split("/")
        for depth in range(1, len(parts)):
            if "/".join(parts[:depth]) in files:
                raise InvalidInputError(f"Cannot add {path}: {'/'.join(parts[:depth])} is a file.")
        if path not in files and any(p.startswith(path + "/") for p in files):
            raise InvalidInputError(f"Cannot add file {path}: a folder of that name exists.")

    def create_branch(self, name: str, start: str | None, empty: bool, author: str) -> str:
        """Create branch `name` at revision `start` (default: main), or on a new empty commit."""
        ref = f"refs/heads/{check_ref_name(name)}"

        def target() -> str:
            if empty:
                tree = self.git.write_tree({})
                return self.git.write_commit(tree, [], f"Create branch {name}", author, int(time.time()))
            return self.resolve(start or "main")

        return self._create_ref(ref, target, f"Reference {ref} already exists")

    def create_tag(self, name: str, revision: str) -> str:
        """Create tag `name` at `revision` (a missing revision is refused before the tag's name, as on the Hub)."""
        self.resolve(revision)
        ref = f"refs/tags/{check_ref_name(name)}"
        return self._create_ref(ref, lambda: self.resolve(revision), f"Tag already exists: {name}")

    def _create_ref(self, ref: str, target: Callable[[], str], exists: str) -> str:
        """Point the new `ref` at `target()` (computed once `ref` is known to be free); return that commit.
        Raises RefExistsError (message `exists`)."""
        with self.lock:
            if self.git.read_ref(ref):
                raise RefExistsError(exists)
            sha = target()
            if not self.git.update_ref(ref, sha, None):
                raise RefExistsError(exists)
            return sha

    def delete_ref(self, kind: str, name: str) -> None:
        """Delete branch (`kind="heads"`) or tag (`"tags"`) `name`. Raises RevisionNotFoundError."""
        with self.lock:
            ref = f"refs/{kind}/{check_ref_name(name)}"
            if self.git.read_ref(ref) is None:
                raise RevisionNotFoundError(f"Invalid rev id: {name}")
            if ref == "refs/heads/main":
                raise InvalidInputError("Cannot delete refs/heads/main: it is the repo's default branch.")
            self.git.delete_ref(ref)


def default_initial_files(ref: RepoRef, sdk: str | None) -> dict[str, bytes]:
    """What the Hub puts in a new repo's first commit: .gitattributes, and a README for a Space."""
    files = {".gitattributes": DEFAULT_GITATTRIBUTES.encode()}
    if ref.repo_type == "space":
        app_file = {"gradio": "app.py", "streamlit": "app.py"}.get(sdk or "")
        front = [f"title: {ref.name}", "emoji: 🚀", f"sdk: {sdk}"]
        if app_file:
            front.append(f"app_file: {app_file}")
        front.append("pinned: false")
        files["README.md"] = ("---\n" + "\n".join(front) + "\n---\n").encode()
    return files
