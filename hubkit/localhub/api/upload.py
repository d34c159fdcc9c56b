"""Handlers for writing: validate-yaml, preupload and the NDJSON commit (LFS content: api_lfs)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from hubkit.localhub.accounts.limits import check_private_storage, private_usage, warn_large_commit
from hubkit.localhub.api.cards import metadata_errors, metadata_warnings
from hubkit.localhub.git import ignore as gitignore
from hubkit.localhub.git.attributes import is_lfs_upload
from hubkit.localhub.http import errors
from hubkit.localhub.http.context import HubContext
from hubkit.localhub.http.messages import (
    Request,
    Response,
    json_response,
    list_field,
    parse_json,
)
from hubkit.localhub.storage.exceptions import EntryNotFoundError, InvalidInputError
from hubkit.localhub.storage.lfs import check_oid
from hubkit.localhub.storage.names import COMMIT_SHA, check_path
from hubkit.localhub.storage.repos import (
    REPO_TYPES,
    AddContent,
    AddLfs,
    DeleteFile,
    DeleteFolder,
    FileEntry,
    Operation,
    Repo,
)
from hubkit.localhub.xet.api import CAS_PREFIX
from hubkit.localhub.xet.convert import give_xet_hashes

# A repository's .gitignore larger than this is not applied (no real one comes near it).
MAX_GITIGNORE = 1 << 20


def validate_yaml(ctx: HubContext, req: Request) -> Response:
    """The Hub's check of a README: 400 with its errors, or 200 with its warnings; in plain text for a
    client that asks for it (`RepoCard.validate` raises the text as its error)."""
    content = str(req.body.json().get("content") or "")
    problems, warnings = metadata_errors(content), metadata_warnings(content)
    status = 400 if problems else 200
    if "text/plain" in (req.headers.get("Accept") or ""):
        lines = [f"- Error: {p}" for p in problems] or [f"- Warning: {w}" for w in warnings]
        text = "\n".join(lines).encode()
        return Response(status, {"Content-Type": "text/plain; charset=utf-8"}, text)
    return json_response(
        {"errors": [{"message": p} for p in problems], "warnings": [{"message": w} for w in warnings]}, status
    )


def _check_readme(operations: list[Operation]) -> None:
    """Refuse a commit whose root README's metadata the Hub would refuse (400, its errors named)."""
    for op in operations:
        if isinstance(op, AddContent) and op.path == "README.md":
            problems = metadata_errors(op.content.decode("utf-8", "replace"))
            if problems:
                # The Hub's words for a git push refused on its metadata, one error a line.
                words = "Sorry, your push was rejected during YAML metadata verification:"
                raise errors.HubHTTPError(
                    400,
                    words + "".join(f"\n - Error: {p}" for p in problems),
                    header_message=f"{words} {' '.join(problems)}",
                )


# --- preupload -------------------------------------------------------------------------------------


def _check_storage(ctx: HubContext, repo: Repo, new_bytes: Callable[[set[str]], int]) -> None:
    """Refuse what would take a private repository's namespace past its plan's private storage;
    `new_bytes` says how many bytes the request adds, given the oids already stored."""
    plan = ctx.settings.limits.plan(ctx.access.plan_of(repo.ref.namespace))
    if not repo.meta.private or plan.private_storage is None:
        return
    namespace = repo.ref.namespace
    refs = [r for t in REPO_TYPES for r in ctx.store.list(t) if r.namespace == namespace]
    private = (r for r in map(ctx.store.get, refs) if r.meta.private)
    used, stored = private_usage(private, ctx.limiter.commit_sizes)
    check_private_storage(plan, namespace, used, new_bytes(stored))


def _gitignore_text(repo: Repo, sent: object, files: dict[str, FileEntry]) -> str:
    """The `.gitignore` that applies: the one the client sent (its commit adds one), else the revision's."""
    if isinstance(sent, str):
        return sent
    entry = files.get(".gitignore")
    if entry is None or entry.size > MAX_GITIGNORE:
        return ""
    return repo.read(entry).decode("utf-8", "replace")


def preupload(
    ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, revision: str
) -> Response:
    """Tell the client, per file, whether it goes through LFS and what the remote oid is now."""
    repo = ctx.repo(req, repo_type, namespace, name)
    commit = repo.resolve(revision)
    patterns = repo.lfs_patterns(commit)
    answers = []
    data = req.body.json()
    items = list_field(data, "files")
    current = repo.files(commit)
    ignore = gitignore.parse(_gitignore_text(repo, data.get("gitIgnore"), current))
    # A file whose path holds one of the same size is most likely re-sent: it is not counted.
    _check_storage(
        ctx,
        repo,
        lambda stored: sum(
            int(i.get("size") or 0)
            for i in items
            if isinstance(i, dict) and getattr(current.get(i.get("path")), "size", None) != i.get("size")
        ),
    )
    for item in items:
        try:
            path = check_path(item["path"])
            size = int(item["size"])
            sample = base64.b64decode(item.get("sample") or "", validate=True)
        except (KeyError, TypeError, ValueError, binascii.Error) as e:
            raise errors.bad_request(f"Invalid preupload entry {item!r}: {e}") from e
        try:
            remote_oid = repo.file(commit, path).oid
        except EntryNotFoundError:
            remote_oid = None
        mode = "lfs" if is_lfs_upload(path, size, sample, patterns) else "regular"
        ignored = gitignore.is_ignored(ignore, path)
        answers.append({"path": path, "uploadMode": mode, "shouldIgnore": ignored, "oid": remote_oid})
    return json_response({"files": answers, "commitOid": commit})


# --- commit ----------------------------------------------------------------------------------------


@dataclass
class CommitPayload:
    """A parsed NDJSON commit: its header, then one operation per line."""

    summary: str = ""
    description: str = ""
    parent_commit: str | None = None
    operations: list[Operation] = field(default_factory=list)


def _header(payload: CommitPayload, value: dict) -> None:
    payload.summary = str(value.get("summary") or "").strip()
    payload.description = str(value.get("description") or "")
    message = payload.summary + payload.description
    if "\x00" in message:
        raise InvalidInputError("A commit message cannot contain NUL characters.")
    try:
        message.encode()
    except UnicodeEncodeError:  # a lone surrogate from JSON ("\ud800")
        raise InvalidInputError("A commit message must be valid Unicode.") from None
    parent = value.get("parentCommit")
    if parent is not None and not (isinstance(parent, str) and COMMIT_SHA.match(parent)):
        raise InvalidInputError(f"Invalid parentCommit {parent!r}: expected a 40-character commit id.")
    payload.parent_commit = parent


def _file(payload: CommitPayload, value: dict) -> None:
    content = value.get("content", "")
    if value.get("encoding") == "base64":
        try:
            data = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError, TypeError) as e:
            raise InvalidInputError(f"Invalid base64 content for {value.get('path')!r}.") from e
    else:
        data = str(content).encode()
    payload.operations.append(AddContent(check_path(value.get("path")), data))


def _lfs_file(payload: CommitPayload, value: dict) -> None:
    if value.get("algo", "sha256") != "sha256":
        raise InvalidInputError("Only sha256 LFS oids are supported.")
    size = value.get("size")
    if size is not None and (not isinstance(size, int) or size < 0):
        raise InvalidInputError(f"Invalid LFS size {size!r}.")
    payload.operations.append(AddLfs(check_path(value.get("path")), check_oid(value.get("oid")), size))


def _deleted_file(payload: CommitPayload, value: dict) -> None:
    payload.operations.append(DeleteFile(check_path(value.get("path"))))


def _deleted_folder(payload: CommitPayload, value: dict) -> None:
    payload.operations.append(DeleteFolder(check_path(str(value.get("path") or "").rstrip("/"))))


def parse_commit_payload(lines: Iterable[bytes]) -> CommitPayload:
    """Parse the client's NDJSON commit, line by line as it arrives. Raises InvalidInputError for any
    malformed line."""
    payload = CommitPayload()
    handlers = {
        "file": _file,
        "lfsFile": _lfs_file,
        "deletedFile": _deleted_file,
        "deletedFolder": _deleted_folder,
    }
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            item = parse_json(line, f"Line {number + 1} of the commit")
            key, value = item["key"], item["value"]
        except (KeyError, TypeError) as e:
            raise InvalidInputError(
                f"Line {number + 1} of the commit is not a {{key, value}} JSON object."
            ) from e
        if not isinstance(value, dict):
            raise InvalidInputError(f"Line {number + 1} of the commit: value must be an object.")
        if key == "header":
            if number != 0:
                raise InvalidInputError("The commit header must be the first line.")
            _header(payload, value)
        elif key in handlers:
            handlers[key](payload, value)
        else:
            raise InvalidInputError(f"Unknown commit operation {key!r}.")
    if not payload.summary:
        raise InvalidInputError("A commit needs a summary (the commit message).")
    return payload


def _added_bytes(repo: Repo, operations: list[Operation], stored: set[str]) -> int:
    """Bytes a commit adds: its regular files, and its LFS objects not already stored."""
    total = 0
    for op in operations:
        if isinstance(op, AddContent):
            total += len(op.content)
        elif isinstance(op, AddLfs) and op.oid not in stored:
            stored.add(op.oid)
            total += op.size if op.size is not None else repo.lfs.size(op.oid) or 0
    return total


def commit(
    ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, revision: str
) -> Response:
    repo = ctx.repo(req, repo_type, namespace, name)
    ctx.limiter.check_commit(f"{repo_type}/{repo.ref.repo_id}".lower())
    payload = parse_commit_payload(req.body.lines())
    _check_readme(payload.operations)
    _check_storage(ctx, repo, lambda stored: _added_bytes(repo, payload.operations, stored))
    added = sum(isinstance(op, (AddContent, AddLfs)) for op in payload.operations)
    warn_large_commit(ctx.settings.limits, repo.ref.repo_id, added)
    ctx.hooks.commit(repo, payload.operations)
    message = payload.summary + (f"\n\n{payload.description}" if payload.description.strip() else "")
    sha, ref = repo.commit(
        revision,
        payload.operations,
        message,
        ctx.author(req.caller),
        payload.parent_commit,
        create_pr=req.flag("create_pr"),
        before_ref_update=lambda: ctx.hooks.ref_update(repo),
    )
    lfs_oids = [op.oid for op in payload.operations if isinstance(op, AddLfs)]
    give_xet_hashes(ctx, repo, req.caller, req.base_url + CAS_PREFIX, lfs_oids)
    url = ctx.repo_url(req, repo.ref)
    pr_url = f"{url}/discussions/{ref.rsplit('/', 1)[-1]}" if ref.startswith("refs/pr/") else None
    return json_response(
        {"success": True, "commitOid": sha, "commitUrl": f"{url}/commit/{sha}", "pullRequestUrl": pr_url}
    )
