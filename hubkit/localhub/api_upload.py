"""Handlers for writing: validate-yaml, preupload, the NDJSON commit, and the LFS batch/upload/verify API."""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass, field

from hubkit.localhub import errors
from hubkit.localhub.cards import metadata_errors
from hubkit.localhub.context import URL_PREFIXES, HubContext
from hubkit.localhub.exceptions import EntryNotFoundError, InvalidInputError
from hubkit.localhub.gitattributes import is_lfs_upload
from hubkit.localhub.lfs import check_oid
from hubkit.localhub.messages import Request, Response, json_response
from hubkit.localhub.names import COMMIT_SHA, check_path
from hubkit.localhub.repos import AddContent, AddLfs, DeleteFile, DeleteFolder, Operation

LFS_JSON = {"Content-Type": "application/vnd.git-lfs+json"}


def validate_yaml(ctx: HubContext, req: Request) -> Response:
    data = req.body.json()
    problems = metadata_errors(str(data.get("content") or ""))
    status = 400 if problems else 200
    return json_response({"errors": [{"message": p} for p in problems], "warnings": []}, status)


def xet_token(ctx: HubContext, req: Request, **_: str) -> Response:
    raise errors.not_implemented(
        "This local Hub does not speak Xet: set HF_HUB_DISABLE_XET=1 before importing huggingface_hub."
    )


def _list_field(data: dict, key: str) -> list[dict]:
    """`data[key]` as a list of JSON objects (absent: empty). Raises InvalidInputError otherwise."""
    items = data.get(key) or []
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise InvalidInputError(f"'{key}' must be a list of objects.")
    return items


# --- preupload -------------------------------------------------------------------------------------


def preupload(
    ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, revision: str
) -> Response:
    """Tell the client, per file, whether it goes through LFS and what the remote oid is now."""
    repo = ctx.repo(repo_type, namespace, name, req.authenticated)
    commit = repo.resolve(revision)
    patterns = repo.lfs_patterns(commit)
    answers = []
    for item in _list_field(req.body.json(), "files"):
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
        answers.append({"path": path, "uploadMode": mode, "shouldIgnore": False, "oid": remote_oid})
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
    parent = value.get("parentCommit")
    if parent is not None and not (isinstance(parent, str) and COMMIT_SHA.match(parent)):
        raise InvalidInputError(f"Invalid parentCommit {parent!r}: expected a 40-character commit id.")
    payload.parent_commit = parent


def _file(payload: CommitPayload, value: dict) -> None:
    content = value.get("content", "")
    if value.get("encoding") == "base64":
        try:
            data = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError) as e:
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


def parse_commit_payload(body: bytes) -> CommitPayload:
    """Parse the client's NDJSON commit. Raises InvalidInputError for any malformed line."""
    payload = CommitPayload()
    handlers = {
        "file": _file,
        "lfsFile": _lfs_file,
        "deletedFile": _deleted_file,
        "deletedFolder": _deleted_folder,
    }
    for number, line in enumerate(body.splitlines()):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            key, value = item["key"], item["value"]
        except (ValueError, KeyError, TypeError) as e:
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


def commit(
    ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, revision: str
) -> Response:
    repo = ctx.repo(repo_type, namespace, name, req.authenticated)
    payload = parse_commit_payload(req.body.read())
    message = payload.summary + (f"\n\n{payload.description}" if payload.description.strip() else "")
    sha, ref = repo.commit(
        revision,
        payload.operations,
        message,
        ctx.author,
        payload.parent_commit,
        create_pr=req.flag("create_pr"),
    )
    url = ctx.repo_url(repo.ref)
    pr_url = f"{url}/discussions/{ref.rsplit('/', 1)[-1]}" if ref.startswith("refs/pr/") else None
    return json_response(
        {"success": True, "commitOid": sha, "commitUrl": f"{url}/commit/{sha}", "pullRequestUrl": pr_url}
    )


# --- LFS -------------------------------------------------------------------------------------------


def _upload_path(repo_type: str, namespace: str, name: str, oid: str) -> str:
    return f"/lfs-upload/{repo_type}s/{namespace}/{name}/{oid}"


def _signed(ctx: HubContext, path: str, size: int) -> str:
    query = f"size={size}"
    return f"{ctx.endpoint}{path}?{query}&sig={ctx.sign(f'{path}?{query}')}"


def _upload_actions(
    ctx: HubContext, repo_type: str, namespace: str, name: str, oid: str, size: int, multipart: bool
) -> dict:
    path = _upload_path(repo_type, namespace, name, oid)
    verify = {
        "href": f"{ctx.endpoint}/{URL_PREFIXES[repo_type]}{namespace}/{name}.git/info/lfs/objects/verify"
    }
    chunk = ctx.settings.multipart_chunk_size
    if multipart and size >= ctx.settings.multipart_threshold:
        parts = {
            str(n): _signed(ctx, f"{path}/part/{n}", size) for n in range(1, math.ceil(size / chunk) + 1)
        }
        upload = {"href": _signed(ctx, path, size), "header": {"chunk_size": str(chunk), **parts}}
    else:
        upload = {"href": _signed(ctx, path, size)}
    return {"upload": upload, "verify": verify}


def lfs_batch(ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str) -> Response:
    """The git-lfs batch API: which objects to send (with signed URLs) and which are already here."""
    repo = ctx.repo(repo_type, namespace, name, req.authenticated)
    data = req.body.json()
    operation = data.get("operation")
    if operation not in ("upload", "download"):
        raise errors.bad_request("LFS batch operation must be 'upload' or 'download'.")
    if operation == "upload" and ctx.settings.token and not req.authenticated:
        raise errors.unauthorized()
    multipart = "multipart" in (data.get("transfers") or [])
    objects = []
    for obj in _list_field(data, "objects"):
        oid, size = obj.get("oid"), obj.get("size")
        try:
            check_oid(oid)
        except InvalidInputError as e:
            objects.append({"oid": str(oid), "size": size, "error": {"code": 422, "message": str(e)}})
            continue
        if not isinstance(size, int) or size < 0:
            objects.append({"oid": oid, "size": size, "error": {"code": 422, "message": "Invalid size."}})
            continue
        stored = repo.lfs.size(oid)
        if operation == "download":
            if stored is None:
                objects.append(
                    {"oid": oid, "size": size, "error": {"code": 404, "message": "Object not found."}}
                )
            else:
                cdn_path = f"/lfs-objects/{repo_type}s/{namespace}/{name}/{oid}"
                href = f"{ctx.cdn_endpoint or ctx.endpoint}{cdn_path}?sig={ctx.sign(cdn_path)}"
                objects.append({"oid": oid, "size": stored, "actions": {"download": {"href": href}}})
        elif stored == size:
            objects.append({"oid": oid, "size": size})  # already here: no actions, the client skips it
        else:
            objects.append(
                {
                    "oid": oid,
                    "size": size,
                    "actions": _upload_actions(ctx, repo_type, namespace, name, oid, size, multipart),
                }
            )
    return json_response({"transfer": "basic", "objects": objects, "hash_algo": "sha256"}, headers=LFS_JSON)


def _check_upload_signature(ctx: HubContext, req: Request, path: str) -> int:
    """The size a signed upload URL was issued for. Raises 403 when the signature is wrong."""
    size = req.param("size")
    if size is None or not size.isdigit() or not ctx.signature_ok(f"{path}?size={size}", req.param("sig")):
        raise errors.forbidden(
            "Invalid or missing signature for this upload URL: ask the LFS batch API for one."
        )
    return int(size)


def lfs_put(ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, oid: str) -> Response:
    size = _check_upload_signature(ctx, req, _upload_path(repo_type, namespace, name, oid))
    repo = ctx.repo(repo_type, namespace, name, authenticated=True)
    repo.lfs.write(oid, size, req.body.chunks())
    return json_response({})


def lfs_put_part(
    ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, oid: str, part: str
) -> Response:
    _check_upload_signature(ctx, req, f"{_upload_path(repo_type, namespace, name, oid)}/part/{part}")
    if not part.isdigit() or int(part) < 1:
        raise errors.bad_request(f"Invalid part number {part!r}.")
    repo = ctx.repo(repo_type, namespace, name, authenticated=True)
    offset = (int(part) - 1) * ctx.settings.multipart_chunk_size
    etag = repo.lfs.write_part(oid, int(part), offset, req.body.chunks())
    return json_response({}, headers={"ETag": etag})


def lfs_complete(
    ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, oid: str
) -> Response:
    size = _check_upload_signature(ctx, req, _upload_path(repo_type, namespace, name, oid))
    repo = ctx.repo(repo_type, namespace, name, authenticated=True)
    data = req.body.json()
    try:
        parts = sorted(data["parts"], key=lambda p: int(p["partNumber"]))
        etags = [str(p["etag"]) for p in parts]
    except (KeyError, TypeError, ValueError) as e:
        raise errors.bad_request("Multipart completion needs 'parts': [{partNumber, etag}, ...].") from e
    if data.get("oid") != oid:
        raise errors.bad_request("Multipart completion names another oid than its URL.")
    part_count = math.ceil(size / ctx.settings.multipart_chunk_size)
    repo.lfs.complete_multipart(oid, size, part_count, etags)
    return json_response({})


def lfs_verify(ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str) -> Response:
    repo = ctx.repo(repo_type, namespace, name, req.authenticated)
    data = req.body.json()
    oid, size = data.get("oid"), data.get("size")
    stored = repo.lfs.size(check_oid(oid))
    if stored is None or stored != size:
        raise errors.not_found(f"LFS object {oid} of size {size} was not uploaded.")
    return json_response({}, headers=LFS_JSON)
