"""Handlers for the git-lfs API: batch (which objects to send, with signed URLs), upload, multipart, verify."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

from hubkit.localhub import errors
from hubkit.localhub.context import URL_PREFIXES, HubContext
from hubkit.localhub.exceptions import InvalidInputError
from hubkit.localhub.lfs import check_oid
from hubkit.localhub.messages import Request, Response, json_response, list_field

LFS_JSON = {"Content-Type": "application/vnd.git-lfs+json"}
# The most upload URLs one batch answer holds (some 6 MB of JSON): 20,000 parts of 16 MiB are 320 GiB.
MAX_BATCH_URLS = 20_000
_PART = re.compile(r"^[0-9]{1,9}$")


def _upload_path(repo_type: str, namespace: str, name: str, oid: str) -> str:
    return f"/lfs-upload/{repo_type}s/{namespace}/{name}/{oid}"


def _part_count(size: int, chunk: int) -> int:
    return -(-size // chunk)  # ceil in integers: a float division is inexact past 2**53


def _is_multipart(ctx: HubContext, size: int, multipart: bool) -> bool:
    return multipart and size >= ctx.settings.multipart_threshold


def _upload_actions(
    ctx: HubContext,
    req: Request,
    repo_type: str,
    namespace: str,
    name: str,
    oid: str,
    size: int,
    multipart: bool,
) -> dict:
    path = _upload_path(repo_type, namespace, name, oid)
    verify = {
        "href": f"{req.base_url}/{URL_PREFIXES[repo_type]}{namespace}/{name}.git/info/lfs/objects/verify"
    }
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


def lfs_batch(ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str) -> Response:
    """The git-lfs batch API: which objects to send (with signed URLs) and which are already here."""
    data = req.body.json()
    operation = data.get("operation")
    if operation not in ("upload", "download"):
        raise errors.bad_request("LFS batch operation must be 'upload' or 'download'.")
    repo = ctx.repo(req, repo_type, namespace, name, write=operation == "upload")
    multipart = "multipart" in (data.get("transfers") or [])
    requested = list_field(data, "objects")
    if operation == "upload":
        _check_upload_batch(ctx, requested, multipart)
    objects = []
    for obj in requested:
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
                href = ctx.signed_url(ctx.cdn_endpoint or req.base_url, cdn_path, req.caller)
                objects.append({"oid": oid, "size": stored, "actions": {"download": {"href": href}}})
        elif stored == size:
            objects.append({"oid": oid, "size": size})  # already here: no actions, the client skips it
        else:
            objects.append(
                {
                    "oid": oid,
                    "size": size,
                    "actions": _upload_actions(ctx, req, repo_type, namespace, name, oid, size, multipart),
                }
            )
    return json_response({"transfer": "basic", "objects": objects, "hash_algo": "sha256"}, headers=LFS_JSON)


def _upload_body(ctx: HubContext, req: Request, size: int) -> Iterator[bytes]:
    """The body of an LFS upload, through the fault mode: a 503/429 instead, or a body cut halfway."""
    refusal = ctx.faults.upload_status()
    if refusal is not None:
        for _ in req.body.chunks():  # read it all, so that the client sees the answer, not a reset
            pass
        status, headers = refusal
        raise errors.HubHTTPError(status, f"Fault injected by the local Hub: {status}.", headers=headers)
    return ctx.faults.upload_body(req.body.chunks(), size)


@contextlib.contextmanager
def _drained_on_error(body: Iterator[bytes]) -> Iterator[None]:
    """When storing fails (a full disk), read the rest of the body, so that the client gets the answer."""
    try:
        yield
    except OSError:
        for _ in body:
            pass
        raise


def lfs_put(ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, oid: str) -> Response:
    path = _upload_path(repo_type, namespace, name, oid)
    repo, grant = ctx.signed_repo(req, path, repo_type, namespace, name, upload=True)
    size = grant.size or 0
    req.body.limit_to(size, f"The upload of LFS object {oid}")
    body = _upload_body(ctx, req, size)
    with _drained_on_error(body):
        repo.lfs.write(oid, size, body)
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
    body = _upload_body(ctx, req, length)
    with _drained_on_error(body):
        etag = repo.lfs.write_part(oid, int(part), offset, body)
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
    return json_response({})


def lfs_verify(ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str) -> Response:
    repo = ctx.repo(req, repo_type, namespace, name)
    data = req.body.json()
    oid, size = data.get("oid"), data.get("size")
    stored = repo.lfs.size(check_oid(oid))
    if stored is None or stored != size:
        raise errors.not_found(f"LFS object {oid} of size {size} was not uploaded.")
    return json_response({}, headers=LFS_JSON)
