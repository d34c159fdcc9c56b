"""What the last push of a run to a repo left on the Hub, kept beside the run.

`--dry-run` opens no connection, so it cannot ask the Hub what is there; it compares the plan with
this record instead (`run_dir/.hubkit/pushes/<endpoint+repo hash>.json`, written after every push
that reached the Hub). The record is only a hint for the dry run: a real push always diffs against
the remote itself.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from hubkit.hub.remote import RemoteFile, RemoteRepo
from hubkit.publish.plan import PlannedFile, PushPlan, RepoPlan
from hubkit.runs.state import PUSH_RECORDS_DIR, write_atomically

logger = logging.getLogger(__name__)
RECORDS_DIR = PUSH_RECORDS_DIR


class FileStatus(Enum):
    """A planned file compared with the last recorded push."""

    NEW = "new"
    CHANGED = "changed"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class PushRecord:
    """The repo's files (path → sha256) as of `commit_sha`, the last push from this run directory."""

    endpoint: str
    repo_id: str
    commit_sha: str
    files: dict[str, str]

    def status(self, planned: PlannedFile) -> FileStatus:
        known = self.files.get(planned.path_in_repo)
        if known is None:
            return FileStatus.NEW
        return FileStatus.UNCHANGED if known == planned.hashes.sha256 else FileStatus.CHANGED


def _record_path(run_dir: Path, endpoint: str, repo_id: str, revision: str = "main") -> Path:
    # Hashed: repo ids and URLs hold characters that do not belong in file names. The main branch's key
    # names no revision (records written before branches keep being found).
    ref = repo_id if revision == "main" else f"{repo_id}@{revision}"
    key = hashlib.sha256(f"{endpoint.rstrip('/')}\n{ref}".encode()).hexdigest()[:24]
    return run_dir / RECORDS_DIR / f"{key}.json"


def load_record(run_dir: Path, endpoint: str, repo_id: str, revision: str = "main") -> PushRecord | None:
    """The last push of this run to `repo_id` (branch `revision`) on `endpoint`, or None if there was none (or
    it is unreadable)."""
    path = _record_path(run_dir, endpoint, repo_id, revision)
    try:
        data = json.loads(path.read_text())
        return PushRecord(
            endpoint=data["endpoint"],
            repo_id=data["repo_id"],
            commit_sha=data["commit_sha"],
            files=data["files"],
        )
    except (OSError, json.JSONDecodeError, KeyError, TypeError):
        return None


def records_of_plan(plan: PushPlan, run_dir: Path, endpoint: str) -> dict[str, PushRecord | None]:
    """What the last push recorded of each repo (by id) and branch (``repo@branch``) of `plan`."""
    records = {r.repo_id: load_record(run_dir, endpoint, r.repo_id) for r in plan.repos}
    for branch in plan.branches:
        records[f"{branch.repo_id}@{branch.revision}"] = load_record(
            run_dir, endpoint, branch.repo_id, branch.revision
        )
    return records


def remote_from_record(record: PushRecord | None, repo_id: str) -> RemoteRepo:
    """What a dry run takes the remote to be: the files of the last recorded push (sizes unknown)."""
    if record is None:
        return RemoteRepo(repo_id=repo_id, head_sha=None)
    files = {
        path: RemoteFile(path=path, size=-1, git_sha1="", lfs_sha256=sha256)
        for path, sha256 in record.files.items()
    }
    return RemoteRepo(repo_id=repo_id, head_sha=record.commit_sha, files=files)


def save_record(run_dir: Path, endpoint: str, plan: RepoPlan, commit_sha: str) -> Path | None:
    """Record that `plan`'s files are on the Hub at `commit_sha`, the repo's head after a push or an
    up-to-date check; the record's path, or None when the run directory is not writable (the push itself
    succeeded; only a later dry run knows less)."""
    previous = load_record(run_dir, endpoint, plan.repo_id, plan.revision)
    # A push only adds and updates: files recorded earlier and not in this plan are still there.
    files = dict(previous.files) if previous else {}
    files.update({f.path_in_repo: f.hashes.sha256 for f in plan.files})
    path = _record_path(run_dir, endpoint, plan.repo_id, plan.revision)
    recorded = PushRecord(endpoint=endpoint, repo_id=plan.repo_id, commit_sha=commit_sha, files=files)
    if recorded == previous:
        return path  # an unchanged push: the record says so already (not written again)
    record = {"endpoint": endpoint, "repo_id": plan.repo_id, "commit_sha": commit_sha, "files": files}
    try:
        write_atomically(path, json.dumps(record, indent=1, sort_keys=True) + "\n")
    except OSError as e:
        logger.warning(
            "could not record the push in the run directory (%s): a dry run will list every file as new",
            e.strerror,
        )
        return None
    return path


def _sweep_record_path(run_dir: Path, endpoint: str, sweep: str) -> Path:
    key = hashlib.sha256(f"{endpoint.rstrip('/')}\nsweep {sweep}".encode()).hexdigest()[:24]
    return run_dir / RECORDS_DIR / f"sweep-{key}.json"


def save_sweep_record(run_dir: Path, endpoint: str, sweep: str, repo_ids: tuple[str, ...]) -> None:
    """Record the repos the last push planned for the run's sweep (its page, the other runs' cards), which
    a dry run names; each one's files are recorded as any repo's (`save_record`)."""
    path = _sweep_record_path(run_dir, endpoint, sweep)
    try:
        write_atomically(
            path, json.dumps({"endpoint": endpoint, "sweep": sweep, "repos": list(repo_ids)}) + "\n"
        )
    except OSError as e:
        logger.warning("could not record the sweep's repos in the run directory (%s)", e.strerror)


def load_sweep_record(run_dir: Path, endpoint: str, sweep: str) -> tuple[str, ...] | None:
    """The repos the last push from this run directory planned for `sweep`, or None when none is recorded."""
    try:
        repos = json.loads(_sweep_record_path(run_dir, endpoint, sweep).read_text())["repos"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError):
        return None
    return tuple(r for r in repos if isinstance(r, str)) if isinstance(repos, list) else None
