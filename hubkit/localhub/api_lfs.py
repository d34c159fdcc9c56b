"""Handlers for the git-lfs API: batch (which objects to send, with signed URLs), upload, multipart, verify."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

from hubkit.localhub import errors
from hubkit.localhub.context import URL_PREFIXES, HubContext
from hubkit.localhub.exceptions import InvalidInputError
from hubkit.localhub.lfs import check_oid
from hubkit.localhub.messages import Request, Response, json_response, list_field

LFS_JSON = {"Content-Type": "application/vnd.git-lfs+json"}


def _upload_path(repo_type: str, namespace: str, name: str, oid: str) -> str:
    return f"/lfs-upload/{repo_type}s/{namespace}/{name}/{oid}"


def _signed(ctx: HubContext, req: Request, path: str, size: int) -> str:
    query = f"size={size}"
    return f"{req.base_url}{path}?{query}&sig={ctx.sign(f'{path}?{query}')}"


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
    chunk = ctx.settings.multipart_chunk_size
    if multipart and size >= ctx.settings.multipart_threshold:
        parts = {
            str(n): _signed(ctx, req, f"{path}/part/{n}", size) for n in range(1, math.ceil(size / chunk) + 1)
        }
        upload = {"href": _signed(ctx, req, path, size), "header": {"chunk_size": str(chunk), **parts}}
    else:
        upload = {"href": _signed(ctx, req, path, size)}
    return {"upload": upload, "verify": verify}


def lfs_batch(ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str) -> Response:
    """The git-lfs batch API: which objects to send (with signed URLs) and which are already here."""
    data = req.body.json()
    operation = data.get("operation")
    if operation not in ("upload", "download"):
        raise errors.bad_request("LFS batch operation must be 'upload' or 'download'.")
    repo = ctx.repo(req, repo_type, namespace, name, write=operation == "upload")
    multipart = "multipart" in (data.get("transfers") or [])
    objects = []
    for obj in list_field(data, "objects"):
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
                href = f"{ctx.cdn_endpoint or req.base_url}{cdn_path}?sig={ctx.sign(cdn_path)}"
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


def _check_upload_signature(ctx: HubContext, req: Request, path: str) -> int:
    """The size a signed upload URL was issued for. Raises 403 when the signature is wrong."""
    size = req.param("size")
    if size is None or not size.isdigit() or not ctx.signature_ok(f"{path}?size={size}", req.param("sig")):
        raise errors.forbidden(
            "Invalid or missing signature for this upload URL: ask the LFS batch API for one."
        )
    return int(size)


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
    size = _check_upload_signature(ctx, req, _upload_path(repo_type, namespace, name, oid))
    repo = ctx.signed_repo(repo_type, namespace, name)
    body = _upload_body(ctx, req, size)
    with _drained_on_error(body):
        repo.lfs.write(oid, size, body)
    return json_response({})


def lfs_put_part(
    ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, oid: str, part: str
) -> Response:
    size = _check_upload_signature(ctx, req, f"{_upload_path(repo_type, namespace, name, oid)}/part/{part}")
    if not part.isdigit() or int(part) < 1:
        raise errors.bad_request(f"Invalid part number {part!r}.")
    repo = ctx.signed_repo(repo_type, namespace, name)
    offset = (int(part) - 1) * ctx.settings.multipart_chunk_size
    length = min(ctx.settings.multipart_chunk_size, max(size - offset, 0))
    body = _upload_body(ctx, req, length)
    with _drained_on_error(body):
        etag = repo.lfs.write_part(oid, int(part), offset, body)
    return json_response({}, headers={"ETag": etag})


def lfs_complete(
    ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, oid: str
) -> Response:
    size = _check_upload_signature(ctx, req, _upload_path(repo_type, namespace, name, oid))
    repo = ctx.signed_repo(repo_type, namespace, name)
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
    repo = ctx.repo(req, repo_type, namespace, name)
    data = req.body.json()
    oid, size = data.get("oid"), data.get("size")
    stored = repo.lfs.size(check_oid(oid))
    if stored is None or stored != size:
        raise errors.not_found(f"LFS object {oid} of size {size} was not uploaded.")
    return json_response({}, headers=LFS_JSON)
