"""Handlers for the git-lfs API: batch (which objects to send, with signed URLs), upload, multipart, verify."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TypeVar

from hubkit.localhub.api.files import cdn_path
from hubkit.localhub.http import errors
from hubkit.localhub.http.context import HubContext
from hubkit.localhub.http.messages import Request, Response, json_response, list_field
from hubkit.localhub.storage.exceptions import InvalidInputError
from hubkit.localhub.storage.lfs import check_oid
from hubkit.localhub.storage.repos import Repo, RepoRef

LFS_JSON = {"Content-Type": "application/vnd.git-lfs+json"}
# The most upload URLs one batch answer holds (some 6 MB of JSON): 20,000 parts of 16 MiB are 320 GiB.
MAX_BATCH_URLS = 20_000
_PART = re.compile(r"^[0-9]{1,9}$")
T = TypeVar("T")


def _upload_path(repo_type: str, namespace: str, name: str, oid: str) -> str:
    return f"/lfs-upload/{repo_type}s/{namespace}/{name}/{oid}"


def _part_count(size: int, chunk: int) -> int:
    return -(-size // chunk)  # ceil in integers: a float division is inexact past 2**53


def _is_multipart(ctx: HubContext, size: int, multipart: bool) -> bool:
    return multipart and size >= ctx.settings.multipart_threshold


def _upload_actions(
    ctx: HubContext, req: Request, ref: RepoRef, oid: str, size: int, multipart: bool
) -> dict:
    path = _upload_path(ref.repo_type, ref.namespace, ref.name, oid)
    verify = {"href": f"{ctx.repo_url(req, ref)}.git/info/lfs/objects/verify"}
    href = ctx.signed_url(req.base_url, path, req.caller, size)
    if not _is_multipart(ctx, size, multipart):
        return {"upload": {"href": href}, "verify": verify}
    chunk = ctx.settings.multipart_chunk_size
    parts = {
        str(n): ctx.signed_url(req.base_url, f"{path}/part/{n}", req.caller, size)
        for n in range(1, _part_count(size, chunk) + 1)
    }
    return {"upload": {"href": href, "header": {"chunk_size": str(chunk), **parts}}, "verify": verify}


def _check_upload_batch(ctx: HubContext, objects: list[dict], multipart: bool) -> None:
    """Refuse (413) an upload batch naming an object over `max_lfs_size`, or one whose answer would hold
    more than `MAX_BATCH_URLS` URLs; counted before any URL is made."""
    urls, limit = 0, ctx.settings.max_lfs_size
    for obj in objects:
        size = obj.get("size")
        if not isinstance(size, int) or size < 0:
            continue  # answered with a per-object error
        if size > limit:
            raise errors.payload_too_large(
                f"LFS object {str(obj.get('oid'))[:64]} is {size} bytes: this local Hub takes objects of at most "
                f"{limit} bytes (hubkit hub serve --max-lfs-size)."
            )
        chunk = ctx.settings.multipart_chunk_size
        urls += 1 + (_part_count(size, chunk) if _is_multipart(ctx, size, multipart) else 0)
    if urls > MAX_BATCH_URLS:
        raise errors.payload_too_large(
            f"This LFS batch would need {urls} upload URLs (at most {MAX_BATCH_URLS}): ask for fewer objects at once."
        )


def _batch_object(
    ctx: HubContext, req: Request, repo: Repo, obj: dict, upload: bool, multipart: bool
) -> dict:
    """One object's answer: an error, its download or upload actions, or none (already stored)."""
    oid, size = obj.get("oid"), obj.get("size")
    try:
        check_oid(oid)
    except InvalidInputError as e:
        return {"oid": str(oid), "size": size, "error": {"code": 422, "message": str(e)}}
    if not isinstance(size, int) or size < 0:
        return {"oid": oid, "size": size, "error": {"code": 422, "message": "Invalid size."}}
    stored = repo.lfs.size(oid)
    if not upload:
        if stored is None:
            return {"oid": oid, "size": size, "error": {"code": 404, "message": "Object not found."}}
        path = cdn_path(repo.ref.repo_type, repo.ref.namespace, repo.ref.name, oid)
        href = ctx.signed_url(ctx.cdn_endpoint or req.base_url, path, req.caller)
        return {"oid": oid, "size": stored, "actions": {"download": {"href": href}}}
    if stored == size:
        return {"oid": oid, "size": size}  # already here: no actions, the client skips it
    return {"oid": oid, "size": size, "actions": _upload_actions(ctx, req, repo.ref, oid, size, multipart)}


def lfs_batch(ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str) -> Response:
    """The git-lfs batch API: which objects to send (with signed URLs) and which are already here."""
    data = req.body.json()
    operation = data.get("operation")
    if operation not in ("upload", "download"):
        raise errors.bad_request("LFS batch operation must be 'upload' or 'download'.")
    upload = operation == "upload"
    repo = ctx.repo(req, repo_type, namespace, name, write=upload)
    multipart = "multipart" in (data.get("transfers") or [])
    requested = list_field(data, "objects")
    if upload:
        _check_upload_batch(ctx, requested, multipart)
    objects = [_batch_object(ctx, req, repo, obj, upload, multipart) for obj in requested]
    return json_response({"transfer": "basic", "objects": objects, "hash_algo": "sha256"}, headers=LFS_JSON)


def store_upload(ctx: HubContext, req: Request, size: int, write: Callable[[Iterator[bytes]], T]) -> T:
    """Store an upload's body (an LFS object or part, a Xet xorb) with `write`, through the Hub's hooks."""
    body = ctx.hooks.upload(req.body.chunks(), size)
    try:
        return write(body)
    except OSError:  # a full disk: read the rest of the body too
        for _ in body:
            pass
        raise


def lfs_put(ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, oid: str) -> Response:
    path = _upload_path(repo_type, namespace, name, oid)
    repo, grant = ctx.signed_repo(req, path, repo_type, namespace, name, upload=True)
    size = grant.size or 0
    req.body.limit_to(size, f"The upload of LFS object {oid}")
    store_upload(ctx, req, size, lambda body: repo.lfs.write(oid, size, body))
    ctx.uploads.append((repo.ref.repo_id, oid, "lfs"))
    return json_response({})


def lfs_put_part(
    ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, oid: str, part: str
) -> Response:
    path = f"{_upload_path(repo_type, namespace, name, oid)}/part/{part}"
    repo, grant = ctx.signed_repo(req, path, repo_type, namespace, name, upload=True)
    size, chunk = grant.size or 0, ctx.settings.multipart_chunk_size
    if not _PART.match(part) or not 1 <= int(part) <= _part_count(size, chunk):
        raise errors.bad_request(f"Invalid part number {part!r}.")
    offset = (int(part) - 1) * chunk
    length = min(chunk, size - offset)
    req.body.limit_to(length, f"Part {part} of LFS object {oid}")
    etag = store_upload(ctx, req, length, lambda body: repo.lfs.write_part(oid, int(part), offset, body))
    return json_response({}, headers={"ETag": etag})


def lfs_complete(
    ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, oid: str
) -> Response:
    path = _upload_path(repo_type, namespace, name, oid)
    repo, grant = ctx.signed_repo(req, path, repo_type, namespace, name, upload=True)
    size = grant.size or 0
    data = req.body.json()
    try:
        parts = sorted(data["parts"], key=lambda p: int(p["partNumber"]))
        etags = [str(p["etag"]) for p in parts]
    except (KeyError, TypeError, ValueError) as e:
        raise errors.bad_request("Multipart completion needs 'parts': [{partNumber, etag}, ...].") from e
    if data.get("oid") != oid:
        raise errors.bad_request("Multipart completion names another oid than its URL.")
    part_count = _part_count(size, ctx.settings.multipart_chunk_size)
    repo.lfs.complete_multipart(oid, size, part_count, etags)
    ctx.uploads.append((repo.ref.repo_id, oid, "lfs"))
    return json_response({})


def lfs_verify(ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str) -> Response:
    repo = ctx.repo(req, repo_type, namespace, name)
    data = req.body.json()
    oid, size = data.get("oid"), data.get("size")
    stored = repo.lfs.size(check_oid(oid))
    if stored is None or stored != size:
        raise errors.not_found(f"LFS object {oid} of size {size} was not uploaded.")
    return json_response({}, headers=LFS_JSON)
