"""Handlers for Xet: the Hub API's token endpoints and the CAS API (spec `api.md`) under `/xet`.

What the real client (huggingface_hub with hf_xet) calls: a token from the Hub, then xorb uploads, a shard
upload (`/v1/shards`, and `/v2/shards`, which hf_xet tries first), reconstructions (`/v2` is not served:
the client falls back to `/v1`),
the global dedup query, and the signed URLs of xorb byte ranges the reconstructions hand out (each serves
the byte range it was made for, and nothing else of the xorb).
"""

from __future__ import annotations

import json
import secrets

from hubkit.localhub.accounts.signed_urls import expires_in
from hubkit.localhub.api.files import byte_range
from hubkit.localhub.api.lfs import store_upload
from hubkit.localhub.http import errors
from hubkit.localhub.http.context import HubContext
from hubkit.localhub.http.messages import Request, Response, json_response
from hubkit.localhub.storage.repos import Repo
from hubkit.localhub.xet.hashes import hex_to_hash, keyed_hash
from hubkit.localhub.xet.shard import dedup_shard
from hubkit.localhub.xet.store import XetFile
from hubkit.localhub.xet.tokens import READ, WRITE

CAS_PREFIX = "/xet"
DEDUP_SHARD_LIFETIME = 7 * 24 * 3600  # how long a client may dedup against a dedup answer


def _checked_hash(text: str, what: str) -> str:
    try:
        hex_to_hash(text)
    except ValueError as e:
        raise errors.bad_request(f"Invalid {what} hash: {e}") from None
    return text


def token(
    ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, revision: str, scope: str
) -> Response:
    """A Xet token for one repo: read for anyone who may see it, write for who may write to it."""
    repo = ctx.repo(req, repo_type, namespace, name, write=scope == WRITE)
    access_token, expires = ctx.xet_tokens.make(repo.ref, scope, ctx.access.signer(req.caller))
    cas_url = req.base_url + CAS_PREFIX
    headers = {
        "X-Xet-Cas-Url": cas_url,
        "X-Xet-Access-Token": access_token,
        "X-Xet-Token-Expiration": str(expires),
    }
    return json_response({"accessToken": access_token, "exp": expires, "casUrl": cas_url}, headers=headers)


def _repo(ctx: HubContext, req: Request, scope: str) -> Repo:
    """The repo a request's Xet token is for, if its signer may still read it (or write to it)."""
    grant = ctx.xet_tokens.verify(req.headers.get("Authorization"), scope)
    caller = ctx.access.caller_of(grant.signer)
    if caller is None:
        raise errors.unauthorized("a Xet token whose Hub token is still accepted: ask the Hub for a new one")
    req.caller = caller
    ref = grant.ref
    return ctx.repo(req, ref.repo_type, ref.namespace, ref.name, write=scope == WRITE)


def upload_xorb(ctx: HubContext, req: Request, prefix: str, xorb: str) -> Response:
    _repo(ctx, req, WRITE)
    if prefix != "default":
        raise errors.bad_request(f"Xorbs are uploaded under the prefix 'default', not {prefix!r}.")
    _checked_hash(xorb, "xorb")
    body = store_upload(ctx, req, req.body.length or 0, b"".join)
    return json_response({"was_inserted": ctx.xet.put_xorb(xorb, body)})


def upload_shard(ctx: HubContext, req: Request, version: int = 1) -> Response:
    """Register an uploaded shard's files. `/v1` answers in JSON; `/v2` (what hf_xet tries first) as a
    stream of progress frames ending in `result`, which the Hub sends only once the shard is registered,
    so a refusal is a status as in `/v1`."""
    repo = _repo(ctx, req, WRITE)
    data = req.body.read()  # metadata only: the upload hook sees the file bytes (xorbs), not this
    for registered in ctx.xet.register_shard(data, repo.lfs, ctx.settings.max_lfs_size):
        ctx.uploads.append((repo.ref.repo_id, registered.sha256, "xet"))
    if version == 1:
        return json_response({"result": 1})
    frames = [
        {"type": "validating", "verified": 1, "total": 1},
        {"type": "committing", "stage": "syncing"},
        {"type": "result"},
    ]
    body = b"".join(json.dumps(frame).encode() + b"\n" for frame in frames)
    return Response(200, {"Content-Type": "application/x-ndjson"}, body)


def _readable_file(ctx: HubContext, repo: Repo, file_id: str) -> XetFile:
    """A registered file the repo holds; the same 404 whether it does not exist or belongs elsewhere."""
    record = ctx.xet.file(_checked_hash(file_id, "file"))
    if record is None or repo.lfs.size(record.sha256) is None:
        raise errors.not_found(f"File {file_id} not found in {repo.ref.repo_id}.")
    return record


def _fetch_ranges(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The chunk ranges [start, end) a file uses in one xorb, merged where they overlap or touch: the client
    joins consecutive terms of a xorb and looks for one fetch range holding them all."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _kept_chunks(
    ctx: HubContext, term: tuple[str, int, int, int], position: int, first: int, last: int
) -> tuple[int, int, int, int | None]:
    """The chunks [low, high) of a term at byte `position` of its file that hold bytes first..last, their
    length, and where byte `first` lies in the first of them (None when it lies in an earlier term). Only
    a term the range cuts reads its chunks' lengths: the others are kept whole."""
    xorb, start, end, length = term
    if first <= position and position + length - 1 <= last:
        return start, end, length, 0 if position == first else None
    low = high = kept = 0
    skip = None
    for index, chunk in enumerate(ctx.xet.xorb_chunks(xorb, start, end), start):
        if position + chunk.length > first and position <= last:
            if not kept:
                low, skip = index, (first - position if position <= first else None)
            high, kept = index + 1, kept + chunk.length
        position += chunk.length
    return low, high, kept, skip


def reconstruction(ctx: HubContext, req: Request, file_id: str) -> Response:
    """Which chunks of which xorbs make up a file (or the byte range asked for), with signed URLs to the
    byte ranges of them it uses: a URL serves those bytes only, never the rest of a xorb, which may hold
    another repo's files. Its cost is the file's terms, not the chunks of the xorbs they are in."""
    repo = _repo(ctx, req, READ)
    record = _readable_file(ctx, repo, file_id)
    span = byte_range(req, record.size)
    first, last = (0, record.size - 1) if span is None else (span[0], span[0] + span[1] - 1)
    terms, used, skip, position = [], {}, None, 0
    for term in record.terms:
        xorb, length = term[0], term[3]
        if position > last:
            break
        if position + length > first:
            low, high, kept, offset = _kept_chunks(ctx, term, position, first, last)
            skip = offset if skip is None else skip
            terms.append({"hash": xorb, "unpacked_length": kept, "range": {"start": low, "end": high}})
            used.setdefault(xorb, []).append((low, high))
        position += length
    fetch_info = {}
    for xorb, ranges in used.items():
        fetch_info[xorb] = []
        for low, high in _fetch_ranges(ranges):
            start, end = ctx.xet.chunk_span(xorb, low, high)
            path = f"{CAS_PREFIX}/xorb-data/{repo.ref.repo_type}s/{repo.ref.repo_id}/{xorb}/{start}-{end - 1}"
            fetch_info[xorb].append(
                {
                    "range": {"start": low, "end": high},
                    "url": ctx.signed_url(req.base_url, path, req.caller),
                    "url_range": {"start": start, "end": end - 1},
                }
            )
    return json_response({"offset_into_first_range": skip or 0, "terms": terms, "fetch_info": fetch_info})


def xorb_data(
    ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, xorb: str, span: str
) -> Response:
    """The bytes `span` (first-last) of a stored xorb by signed URL, or the part of them a Range asks for
    (hf_xet sends the reconstruction's `url_range`); 416 for any byte outside them."""
    path = f"{CAS_PREFIX}/xorb-data/{repo_type}s/{namespace}/{name}/{xorb}/{span}"
    ctx.signed_repo(req, path, repo_type, namespace, name, upload=False)
    file = ctx.xet.xorb_file(_checked_hash(xorb, "xorb"))
    if not file.is_file():
        raise errors.not_found(f"Xorb {xorb} not found.")
    size = file.stat().st_size
    low, _, high = span.partition("-")  # signed: the Hub wrote it
    allowed_first, allowed_last = int(low), min(int(high), size - 1)
    asked = byte_range(req, size)
    first, length = (allowed_first, allowed_last - allowed_first + 1) if asked is None else asked
    if first < allowed_first or first + length - 1 > allowed_last:
        raise errors.HubHTTPError(
            416,
            f"This URL serves bytes {allowed_first}-{allowed_last} of xorb {xorb}, not the range asked: "
            "ask within them, or ask the Hub for a new reconstruction.",
            headers={"Content-Range": f"bytes */{size}"},
        )
    headers = {
        "Accept-Ranges": "bytes",
        "Content-Type": "application/octet-stream",
        "ETag": f'"{xorb}"',
        "Content-Range": f"bytes {first}-{first + length - 1}/{size}",
    }
    return Response(206, headers, file=file, offset=first, length=length)


def dedup_query(ctx: HubContext, req: Request, prefix: str, chunk: str) -> Response:
    """The global dedup API: for a chunk the Hub indexed, a shard listing every chunk of the xorbs of the
    upload it arrived in (its dedup set), each hash keyed with a fresh key, so that only a client holding
    a chunk's bytes recognises it."""
    _repo(ctx, req, READ)
    if prefix not in ("default-merkledb", "default"):  # the spec's name, and hf_xet 1.6's
        raise errors.bad_request(f"Chunks are looked up under the prefix 'default-merkledb', not {prefix!r}.")
    xorbs = ctx.xet.dedup_xorbs(_checked_hash(chunk, "chunk"))
    if not xorbs:
        raise errors.not_found(f"Chunk {chunk} is not in the dedup index.")
    key, listed = secrets.token_bytes(32), []
    for xorb in xorbs:
        chunks, offset = [], 0
        for c in ctx.xet.xorb_chunks(xorb):
            chunks.append((keyed_hash(key, c.hash), offset, c.length))
            offset += c.length
        listed.append((hex_to_hash(xorb), chunks, ctx.xet.xorb_file(xorb).stat().st_size))
    data = dedup_shard(listed, key, expires_in(DEDUP_SHARD_LIFETIME))
    return Response(200, {"Content-Type": "application/octet-stream"}, data)
