"""Handlers for reading files: tree listing, paths-info, resolve (download) and the LFS "CDN"."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs

from hubkit.localhub.api.repos import iso_time
from hubkit.localhub.http import errors
from hubkit.localhub.http.context import HubContext
from hubkit.localhub.http.messages import Request, Response, json_response
from hubkit.localhub.storage.names import check_path
from hubkit.localhub.storage.repos import FileEntry, FolderEntry, Repo, RepoRef

_RANGE = re.compile(r"^bytes=([0-9]{0,19})-([0-9]{0,19})$")


def _entry_json(ctx: HubContext, entry: FileEntry | FolderEntry) -> dict:
    if isinstance(entry, FolderEntry):
        return {"type": "directory", "oid": entry.tree_sha, "size": 0, "path": entry.path}
    item: dict = {"type": "file", "oid": entry.blob_sha, "size": entry.size, "path": entry.path}
    if entry.lfs:
        item["lfs"] = {"oid": entry.lfs.oid, "size": entry.size, "pointerSize": len(entry.lfs.to_bytes())}
        if xet_hash := ctx.xet.file_of_object(entry.lfs.oid):
            item["xetHash"] = xet_hash
    return item


def _xet_headers(ctx: HubContext, req: Request, ref: RepoRef, revision: str, oid: str) -> dict[str, str]:
    """The headers that send a Xet client to Xet for an object uploaded through it, with where to ask for
    a read token. None for an object uploaded through LFS: every client downloads it whole."""
    xet_hash = ctx.xet.file_of_object(oid)
    if xet_hash is None:
        return {}
    token_url = f"{req.base_url}/api/{ref.repo_type}s/{ref.repo_id}/xet-read-token/{revision}"
    return {"X-Xet-Hash": xet_hash, "Link": f'<{token_url}>; rel="xet-auth"'}


def _entries_json(ctx: HubContext, repo: Repo, commit: str, entries: list, expand: bool) -> list[dict]:
    """The entries as the Hub lists them; with `expand`, each with the last commit that changed it."""
    items = [_entry_json(ctx, e) for e in entries]
    if expand:
        last = repo.last_commits(commit, [e.path for e in entries])
        for item in items:
            c = last[item["path"]]
            item["lastCommit"] = {"id": c.sha, "title": c.title, "date": iso_time(c.timestamp)}
    return items


def _clean_path(path: str) -> str:
    return check_path(path) if path else ""


def list_tree(
    ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, revision: str, path: str = ""
) -> Response:
    repo = ctx.repo(req, repo_type, namespace, name)
    commit = repo.resolve(revision)
    entries = repo.tree(commit, _clean_path(path.strip("/")), recursive=req.flag("recursive"))
    return json_response(_entries_json(ctx, repo, commit, entries, req.flag("expand")))


def paths_info(
    ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, revision: str
) -> Response:
    repo = ctx.repo(req, repo_type, namespace, name)
    if "json" in req.headers.get("Content-Type", ""):
        data = req.body.json()
        paths, expand = data.get("paths", []), data.get("expand") in (True, "true", "True", "1")
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise errors.bad_request("'paths' must be a list of strings.")
    else:
        form = parse_qs(req.body.read().decode("utf-8", "replace"), keep_blank_values=True)
        paths, expand = form.get("paths", []), form.get("expand", [""])[0].lower() in ("true", "1")
    commit = repo.resolve(revision)
    entries = repo.paths_info(commit, [_clean_path(p.strip("/")) for p in paths])
    return json_response(_entries_json(ctx, repo, commit, entries, expand))


def byte_range(req: Request, size: int) -> tuple[int, int] | None:
    """(start, length) of a `Range: bytes=a-b` header, None for the whole file; 416 when unsatisfiable."""
    header = req.headers.get("Range")
    if not header:
        return None
    match = _RANGE.match(header.strip())
    if not match or match.groups() == ("", ""):
        raise errors.range_not_satisfiable(size)
    first, last = match.groups()
    if first == "":  # suffix range: the last N bytes
        start = max(0, size - int(last))
        end = size - 1
    else:
        start = int(first)
        end = min(int(last), size - 1) if last else size - 1
    if start >= size or end < start:
        raise errors.range_not_satisfiable(size)
    return start, end - start + 1


def file_response(
    req: Request, headers: dict[str, str], size: int, file: Path | None, data: bytes
) -> Response:
    """200 or 206 for the bytes of `file` (or `data`), honouring a Range header."""
    headers = {"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream", **headers}
    span = byte_range(req, size)
    status, (start, length) = (200, (0, size)) if span is None else (206, span)
    if span is not None:
        headers["Content-Range"] = f"bytes {start}-{start + length - 1}/{size}"
    if file is not None:
        return Response(status, headers, file=file, offset=start, length=length)
    return Response(status, headers, data[start : start + length])


def cdn_path(repo_type: str, namespace: str, name: str, oid: str) -> str:
    return f"/lfs-objects/{repo_type}s/{namespace}/{name}/{oid}"


def resolve(
    ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, revision: str, path: str
) -> Response:
    """A file at a revision: regular files inline, LFS files by a 302 to the CDN (as huggingface.co does)."""
    repo = ctx.repo(req, repo_type, namespace, name)
    ctx.check_download(req, repo)
    commit = repo.resolve(revision)
    entry = repo.file(commit, _clean_path(path))
    headers = {"X-Repo-Commit": commit}
    if entry.lfs is None:
        headers["ETag"] = f'"{entry.blob_sha}"'
        return file_response(req, headers, entry.size, None, repo.read(entry))
    oid = entry.lfs.oid
    headers.update({"ETag": f'"{oid}"', "X-Linked-Etag": f'"{oid}"', "X-Linked-Size": str(entry.size)})
    headers.update(_xet_headers(ctx, req, repo.ref, commit, oid))
    if ctx.cdn_endpoint:
        url_path = cdn_path(repo_type, namespace, name, oid)
        headers["Location"] = ctx.signed_url(ctx.cdn_endpoint, url_path, req.caller)
        return Response(302, headers)
    return file_response(req, headers, entry.size, repo.lfs.path(oid), b"")


def cdn_object(
    ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, oid: str
) -> Response:
    """An LFS object by signed URL (no token: the URL stands for its signer, who must still see the repo)."""
    path = cdn_path(repo_type, namespace, name, oid)
    repo, _ = ctx.signed_repo(req, path, repo_type, namespace, name, upload=False)
    size = repo.lfs.size(oid)
    if size is None:
        raise errors.not_found(f"LFS object {oid} not found.")
    return file_response(req, {"ETag": f'"{oid}"'}, size, repo.lfs.path(oid), b"")
