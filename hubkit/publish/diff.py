"""Compare a repo plan with the remote: which planned files are new or changed.

A remote LFS file is compared by sha256, a regular file by git blob sha1 (the ids the Hub reports
in its tree listing; a large planned file gets its sha1 only if a remote regular file asks for it).
Remote files the plan does not mention are left alone: a push only adds and updates, so pushing a
subset of steps never deletes the others.
"""

from __future__ import annotations

from dataclasses import dataclass

from hubkit.hub.hashing import hash_file
from hubkit.hub.remote import RemoteFile, RemoteRepo
from hubkit.publish.plan import PlannedFile, RepoPlan


@dataclass(frozen=True)
class RepoDiff:
    """What one commit must upload to bring `remote` to `plan`."""

    plan: RepoPlan
    remote: RemoteRepo
    changed: tuple[PlannedFile, ...]  # new or different content, in plan order
    unchanged: tuple[PlannedFile, ...]

    @property
    def is_empty(self) -> bool:
        return not self.changed

    @property
    def upload_size(self) -> int:
        return sum(f.size for f in self.changed)

    @property
    def changed_steps(self) -> tuple[int, ...]:
        return tuple(sorted({f.step for f in self.changed if f.step is not None}))


def is_same_content(planned: PlannedFile, remote: RemoteFile | None) -> bool:
    """True when the remote file holds exactly the planned bytes."""
    if remote is None or remote.size != planned.size:
        return False
    if remote.lfs_sha256 is not None:
        return remote.lfs_sha256 == planned.hashes.sha256
    git_sha1 = planned.hashes.git_sha1
    if git_sha1 is None and planned.local_path is not None:
        # A large file (hashed for LFS only) that the remote holds as a regular file: rare, worth one read.
        git_sha1 = hash_file(planned.local_path, git_sha1=True).git_sha1
    return remote.git_sha1 == git_sha1


def diff_repo(plan: RepoPlan, remote: RemoteRepo, known: RepoDiff | None = None) -> RepoDiff:
    """Split the plan's files into changed and unchanged against `remote` (as `read_remote` read it);
    `is_empty` means the push has nothing to do for this repo. `known`: a diff of part of this plan against
    the same remote (the adapter repo's weights, sent ahead), whose files are not compared again."""
    seen: dict[str, bool] = {}
    if known is not None and known.remote is remote:  # compared against this very listing
        seen = {f.path_in_repo: False for f in known.changed} | {
            f.path_in_repo: True for f in known.unchanged
        }
    changed: list[PlannedFile] = []
    unchanged: list[PlannedFile] = []
    for planned in plan.files:
        same = seen.get(planned.path_in_repo)
        if same is None:
            same = is_same_content(planned, remote.files.get(planned.path_in_repo))
        (unchanged if same else changed).append(planned)
    return RepoDiff(plan=plan, remote=remote, changed=tuple(changed), unchanged=tuple(unchanged))
