"""What a push wants each Hub repo to contain, built from local files only (no network).

A `PushPlan` is a list of `RepoPlan`s (the adapter repo, the merged model's, the Space), each a list of
`PlannedFile`s with the hashes the Hub uses to name content: the sha256 of LFS files and the git blob
sha1 of regular files (`hubkit.hub.hashing`: each version of a file is read once; adapters are hashed
in the read that checks them). Everything here is frozen: uploading never mutates the plan (the upload
state lives in `hubkit.publish.request.RepoReport`).

A planned file is made from what vetting wrote (`PlannedFile.from_vetted`, `hubkit.safety`), and carries
the kind it was vetted as: a repo plan refuses a file whose place in the repo is not of that kind, so
nothing reaches a plan by its name alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from hubkit.errors import PublishError
from hubkit.hub.hashing import FileHashCache, FileHashes, hash_bytes
from hubkit.hub.repo_types import RepoType
from hubkit.runs.manifest import is_hub_id
from hubkit.safety import Kind, VettedFile, kind_of


def _check_path_in_repo(path_in_repo: str) -> None:
    parts = PurePosixPath(path_in_repo).parts
    if (
        not path_in_repo
        or path_in_repo.startswith("/")
        or "\\" in path_in_repo
        or ".." in parts
        or "." in parts
    ):
        raise PublishError(f"invalid path in repo {path_in_repo!r}: use a relative POSIX path")


def is_repo_id(value: object) -> bool:
    """Whether `value` is OWNER/NAME (a repo without a namespace would need a network call to resolve)."""
    return isinstance(value, str) and value.count("/") == 1 and is_hub_id(value)


def check_repo_id(repo_id: str) -> None:
    """Refuse anything but OWNER/NAME (`is_repo_id`).

    Raises:
        PublishError: naming the bad id.
    """
    if not is_repo_id(repo_id):
        raise PublishError(f"invalid repo id {repo_id!r}: use OWNER/NAME, e.g. me/qwen3-4b-grpo")


@dataclass(frozen=True)
class PlannedFile:
    """One file a repo should hold: where it goes, the kind it was vetted as, where its bytes come from,
    and its hashes.

    Exactly one of `local_path` (a file on disk: safetensors weights, whose header was vetted) and
    `content` (bytes vetting wrote: configs, tokenizer files, cards) is set.
    """

    path_in_repo: str
    kind: Kind
    hashes: FileHashes
    local_path: Path | None = None
    content: bytes | None = field(default=None, repr=False)
    step: int | None = None  # the checkpoint the file belongs to, for commit messages and listings

    def __post_init__(self) -> None:
        _check_path_in_repo(self.path_in_repo)
        if (self.local_path is None) == (self.content is None):
            raise ValueError("PlannedFile needs exactly one of local_path and content")

    @classmethod
    def from_vetted(
        cls,
        vetted: VettedFile,
        hashes: FileHashCache,
        *,
        path_in_repo: str | None = None,
        step: int | None = None,
    ) -> PlannedFile:
        """What vetting wrote, planned at `path_in_repo` (default: the vetted file's).

        Weights are planned from disk (hashed through the push's cache) and only when their saved
        header is the one vetting wrote; an adapter's weights, rewritten or hashed in the read that
        checked them, are planned by `hubkit.publish.adapter_repo` from the prepared adapter.

        Raises:
            ValueError: weights whose header vetting would change (the caller must publish a rewrite).
        """
        path_in_repo = path_in_repo or vetted.path_in_repo
        if vetted.data is not None:
            hashes_of = hash_bytes(vetted.data, sha256=vetted.sha256)  # vetting hashed what it wrote
            return cls(path_in_repo, vetted.kind, hashes_of, content=vetted.data, step=step)
        if vetted.on_disk is not None:
            source = vetted.on_disk
        elif vetted.weights is not None and vetted.weights.saved_header_kept:
            source = vetted.weights.path
        else:
            raise ValueError(f"{path_in_repo}: its saved header is not the one vetting writes")
        return cls(path_in_repo, vetted.kind, hashes.hash_file(source), local_path=source, step=step)

    @property
    def size(self) -> int:
        return self.hashes.size

    def read_bytes(self) -> bytes:
        """The file's content (large files are read from disk by the uploader, not through this)."""
        return self.content if self.content is not None else self.local_path.read_bytes()  # type: ignore[union-attr]


@dataclass(frozen=True)
class RepoPlan:
    """The desired content of one Hub repo. Files not listed are left as they are on the remote."""

    repo_id: str
    files: tuple[PlannedFile, ...]
    repo_type: RepoType = "model"
    private: bool = False
    title: str = "hubkit push"  # first words of the commit message
    space_sdk: str | None = None  # a Space's SDK ("gradio"), which the Hub needs to create the repo
    revision: str = "main"  # the branch the files go to (a checkpoint's: `hubkit.publish.revisions`)

    def __post_init__(self) -> None:
        check_repo_id(self.repo_id)
        if (self.repo_type == "space") != (self.space_sdk is not None):
            raise ValueError("a Space repo plan needs its space_sdk, and only a Space repo has one")
        seen: set[str] = set()
        for planned in self.files:
            if kind_of(planned.path_in_repo, self.repo_type) != planned.kind:
                raise PublishError(
                    f"{planned.path_in_repo} cannot be published as {planned.kind.called} in a {self.repo_type} "
                    "repo: hubkit publishes known kinds of file, each in its place"
                )
            if planned.path_in_repo in seen:
                raise PublishError(f"{planned.path_in_repo} is planned twice for {self.repo_id}")
            seen.add(planned.path_in_repo)

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def steps(self) -> tuple[int, ...]:
        return tuple(sorted({f.step for f in self.files if f.step is not None}))


@dataclass(frozen=True)
class CollectionItemPlan:
    """A change to a sweep's Hub Collection, made after every commit of the push (not a commit): a repo
    added with its note, or an item's note brought up to date (`hubkit.publish.sweep`)."""

    collection: str  # its slug
    repo_id: str
    repo_type: RepoType
    note: str
    item_object_id: str | None = None  # the item whose note changes; None: the repo is added


@dataclass(frozen=True)
class PushPlan:
    """Everything one `hubkit push` wants to publish: one `RepoPlan` per repo (a sweep's page and the
    sibling runs' cards among them), one per checkpoint branch of the adapter repo
    (`hubkit.publish.revisions`), and the sweep's Collection changes."""

    repos: tuple[RepoPlan, ...]
    branches: tuple[RepoPlan, ...] = ()
    collection_items: tuple[CollectionItemPlan, ...] = ()
    sweep: str = ""  # the run's sweep, when it has one
    sweep_repos: tuple[str, ...] = ()  # the repos of `repos` that are the sweep's: its page, sibling cards

    def __post_init__(self) -> None:
        ids = [r.repo_id for r in self.repos]
        if len(set(ids)) != len(ids):
            raise PublishError(f"a push plan names the same repo twice: {ids}")
