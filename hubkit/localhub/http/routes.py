"""Which handler answers which request: the route table, authentication and error mapping."""

from __future__ import annotations

import errno
import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote

from hubkit.localhub.api import collections as api_collections
from hubkit.localhub.api import files as api_files
from hubkit.localhub.api import lfs as api_lfs
from hubkit.localhub.api import repos as api_repos
from hubkit.localhub.api import upload as api_upload
from hubkit.localhub.http import errors, guards
from hubkit.localhub.http.context import HubContext
from hubkit.localhub.http.errors import HubHTTPError
from hubkit.localhub.http.messages import Request, Response
from hubkit.localhub.storage.exceptions import StorageError
from hubkit.localhub.xet import api as api_xet

Handler = Callable[..., Response]
_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}


@dataclass(frozen=True)
class Route:
    """`pattern` segments: literals, `{name}` (one segment), `{types}` (models|datasets|spaces → repo_type),
    `{name.git}` (a segment ending in .git → name), `{path*}`/`{path+}` (the rest, zero/one or more)."""

    method: str
    pattern: tuple[str, ...]
    handler: Handler
    body: str  # the kind of body it takes (`guards.py`): its content type and its size limit
    write: bool = False  # needs a write token for the namespace
    signed: bool = False  # authorized by a URL signature or a Xet token instead of a Hub token

    def match(self, segments: list[str]) -> dict[str, str] | None:
        params: dict[str, str] = {}
        for i, part in enumerate(self.pattern):
            if part in ("{path*}", "{path+}"):
                rest = segments[i:]
                if part == "{path+}" and not rest:
                    return None
                params["path"] = "/".join(unquote(s) for s in rest)
                return params
            if i >= len(segments):
                return None
            segment = segments[i]
            if part == "{types}":
                if segment not in _TYPES:
                    return None
                params["repo_type"] = _TYPES[segment]
            elif part == "{name.git}":
                if not segment.endswith(".git"):
                    return None
                params["name"] = unquote(segment.removesuffix(".git"))
            elif part.startswith("{"):
                params[part[1:-1]] = unquote(segment)
            elif part != segment:
                return None
        return params if len(segments) == len(self.pattern) else None


def _route(method: str, pattern: str, handler: Handler, body: str | None = None, **options: bool) -> Route:
    kind = body or (guards.NO_BODY if method in ("GET", "DELETE") else guards.JSON)
    return Route(method, tuple(pattern.strip("/").split("/")), handler, kind, **options)


def _model(handler: Handler) -> Handler:
    """The same handler for routes where models carry no type prefix (resolve, git-lfs)."""
    return functools.partial(handler, repo_type="model")


REPO = "/api/{types}/{namespace}/{name}"
COLLECTION = "/api/collections/{namespace}/{slug}"
UPLOAD = "/lfs-upload/{types}/{namespace}/{name}/{oid}"
CAS = api_xet.CAS_PREFIX  # the Xet CAS API: authorized by Xet tokens (`xet/tokens.py`), not Hub tokens
ROUTES = [
    _route("POST", "/api/repos/create", api_repos.create_repo, write=True),
    _route("DELETE", "/api/repos/delete", api_repos.delete_repo, guards.JSON, write=True),
    _route("POST", "/api/repos/delete", api_repos.delete_repo, write=True),  # huggingface_hub <1.0
    _route("GET", "/api/whoami-v2", api_repos.whoami),
    _route("POST", "/api/validate-yaml", api_upload.validate_yaml),
    _route("POST", "/api/collections", api_collections.create_collection, write=True),
    _route("GET", "/api/collections", api_collections.list_collections),
    _route("GET", COLLECTION, api_collections.get_collection),
    _route("PATCH", COLLECTION, api_collections.update_collection, write=True),
    _route("DELETE", COLLECTION, api_collections.delete_collection, write=True),
    _route("POST", COLLECTION + "/items", api_collections.add_item, write=True),
    _route("PATCH", COLLECTION + "/items/{item}", api_collections.update_item, write=True),
    _route("DELETE", COLLECTION + "/items/{item}", api_collections.delete_item, write=True),
    _route("GET", "/api/{types}", api_repos.list_repos),
    _route("GET", REPO, api_repos.repo_info),
    _route("GET", REPO + "/revision/{revision}", api_repos.repo_info),
    _route("PUT", REPO + "/settings", api_repos.update_settings, write=True),
    _route("GET", REPO + "/refs", api_repos.list_refs),
    _route("GET", REPO + "/auth-check", api_repos.auth_check),
    _route("GET", "/api/spaces/{namespace}/{name}/runtime", api_repos.space_runtime),
    _route("GET", REPO + "/commits/{revision}", api_repos.list_commits),
    _route("POST", REPO + "/branch/{branch}", api_repos.create_branch, write=True),
    _route(
        "DELETE", REPO + "/branch/{ref}", functools.partial(api_repos.delete_ref, kind="heads"), write=True
    ),
    _route("POST", REPO + "/tag/{revision}", api_repos.create_tag, write=True),
    _route("DELETE", REPO + "/tag/{ref}", functools.partial(api_repos.delete_ref, kind="tags"), write=True),
    _route("GET", REPO + "/tree/{revision}/{path*}", api_files.list_tree),
    _route("POST", REPO + "/paths-info/{revision}", api_files.paths_info, guards.JSON_OR_FORM),
    _route("POST", REPO + "/preupload/{revision}", api_upload.preupload, write=True),
    _route("POST", REPO + "/commit/{revision}", api_upload.commit, guards.COMMIT, write=True),
    _route("GET", REPO + "/xet-write-token/{revision}", functools.partial(api_xet.token, scope="write")),
    _route("GET", REPO + "/xet-read-token/{revision}", functools.partial(api_xet.token, scope="read")),
    _route("POST", "/{types}/{namespace}/{name.git}/info/lfs/objects/batch", api_lfs.lfs_batch),
    _route("POST", "/{namespace}/{name.git}/info/lfs/objects/batch", _model(api_lfs.lfs_batch)),
    _route("POST", "/{types}/{namespace}/{name.git}/info/lfs/objects/verify", api_lfs.lfs_verify, write=True),
    _route("POST", "/{namespace}/{name.git}/info/lfs/objects/verify", _model(api_lfs.lfs_verify), write=True),
    _route("PUT", UPLOAD, api_lfs.lfs_put, guards.LFS_CONTENT, signed=True),
    _route("PUT", UPLOAD + "/part/{part}", api_lfs.lfs_put_part, guards.LFS_CONTENT, signed=True),
    _route("POST", UPLOAD, api_lfs.lfs_complete, signed=True),
    _route("GET", "/lfs-objects/{types}/{namespace}/{name}/{oid}", api_files.cdn_object, signed=True),
    _route("POST", CAS + "/v1/xorbs/{prefix}/{xorb}", api_xet.upload_xorb, guards.XET_OBJECT, signed=True),
    _route("POST", CAS + "/v1/shards", api_xet.upload_shard, guards.XET_OBJECT, signed=True),
    _route(
        "POST",
        CAS + "/v2/shards",
        functools.partial(api_xet.upload_shard, version=2),
        guards.XET_OBJECT,
        signed=True,
    ),
    _route("GET", CAS + "/v1/reconstructions/{file_id}", api_xet.reconstruction, signed=True),
    _route("GET", CAS + "/v1/chunks/{prefix}/{chunk}", api_xet.dedup_query, signed=True),
    _route(
        "GET", CAS + "/xorb-data/{types}/{namespace}/{name}/{xorb}/{span}", api_xet.xorb_data, signed=True
    ),
    _route("GET", "/{types}/{namespace}/{name}/resolve/{revision}/{path+}", api_files.resolve),
    _route("GET", "/{namespace}/{name}/resolve/{revision}/{path+}", _model(api_files.resolve)),
]


def _without_namespace(segments: list[str]) -> bool:
    """Whether a path is a repo route whose id has no namespace (`/api/models/gpt2[/tree/main]`)."""
    if segments[:1] != ["api"] or len(segments) < 3 or segments[1] not in _TYPES:
        return False
    return len(segments) == 3 or segments[3] in _REPO_ROUTES


def _bucket(segments: list[str]) -> str | None:
    """The Hub's rate-limit bucket of a path: "api" (its API and the git LFS batch), "resolvers" (file
    downloads), or None (uploads and Xet go to other services)."""
    if segments[:1] == ["api"]:
        return "api"
    if "resolve" in segments[1:4]:
        return "resolvers"
    return "api" if any(s.endswith(".git") for s in segments[:3]) else None


def _count_call(ctx: HubContext, req: Request) -> dict[str, str]:
    """Count an API call against its caller's quota: the rate-limit headers of the answer; 429 past it."""
    bucket = _bucket(req.segments)
    if bucket is None:
        return {}
    caller = req.caller
    plan = ctx.settings.limits.plan(caller.plan) if caller.name else None
    headers, over = ctx.limiter.api_headers(bucket, caller.name or f"ip:{req.client}", plan)
    if over:
        raise ctx.limiter.api_refusal(bucket, headers)
    return headers


# What follows a repo id in the routes under REPO (`/api/{types}/{namespace}/{name}/...`).
_REPO_ROUTES = {
    r.pattern[4] for r in ROUTES if r.pattern[:4] == tuple(REPO.strip("/").split("/")) and len(r.pattern) > 4
}


def dispatch(ctx: HubContext, req: Request, hosts: guards.HostRule) -> Response:
    """Answer one request; every refusal becomes the Hub's status code and error body.

    Before a handler runs: the Host must name this server (`hosts`), the body be of its route's type and
    within its limit, the caller be within its API quota (every answer then carries the rate-limit
    headers), and be allowed to write, for a write.
    """
    method = "GET" if req.method == "HEAD" else req.method
    rate_headers: dict[str, str] = {}
    try:
        guards.check_host(hosts, req.headers.get("Host"))
        for route in ROUTES:
            if route.method != method or (params := route.match(req.segments)) is None:
                continue
            guards.check_body(ctx.settings, req, route.body)
            req.write = route.write
            if not route.signed:
                req.caller = ctx.access.authenticate(req.headers.get("Authorization"))
                rate_headers = _count_call(ctx, req)
                if route.write:
                    ctx.access.check_write(req.caller)  # the namespace is checked where the repo is known
            response = route.handler(ctx, req, **params)
            break
        else:
            if _without_namespace(req.segments):
                # A repo id without a namespace (`gpt2`) names no repository here: the client's
                # repo_exists() and friends read RepoNotFound, as from the Hub.
                raise errors.repo_not_found(f"Repository not found: /{'/'.join(req.segments[1:])}")
            raise errors.not_found(f"Not found: {req.method} /{'/'.join(req.segments)}")
    except HubHTTPError as e:
        response = e.to_response()
    except StorageError as e:
        response = errors.from_storage(e).to_response()
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        # Every write path cleans up after itself.
        message = "The local Hub's disk is full: nothing was stored. Free space on the server, then retry."
        response = HubHTTPError(507, message).to_response()
    response.headers.update(rate_headers)
    # Every answer names its request, as the Hub's do (the client prints it with an error).
    response.headers["X-Request-Id"] = f"Root=1-{uuid.uuid4().hex}"
    return response
