"""Handlers for repositories and refs: create, delete, info, settings, refs, branches, tags, commits."""

from __future__ import annotations

import time

from hubkit.localhub.accounts.limits import ZERO_GPU_PREFIX, check_space_creation
from hubkit.localhub.api.cards import EVAL_RESULTS_DIR, MAX_METADATA_CHARS, card_data, eval_results_items
from hubkit.localhub.http import errors
from hubkit.localhub.http.context import HubContext
from hubkit.localhub.http.messages import Request, Response, json_response
from hubkit.localhub.storage.repos import SPACE_SDKS, FileEntry, RepoMeta, RepoRef, default_initial_files


def iso_time(timestamp: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(timestamp))


def _ref_from_body(req: Request, data: dict) -> RepoRef:
    # Without an organization, the repo goes under the caller's own name (as on the Hub).
    return RepoRef(data.get("type") or "model", data.get("organization") or req.caller.name, data.get("name"))


def create_repo(ctx: HubContext, req: Request) -> Response:
    data = req.body.json()
    ref = _ref_from_body(req, data)
    ctx.access.check_write(req.caller, ref.namespace, f"create a {ref.repo_type} under")
    url = ctx.repo_url(req, ref)
    if ctx.store.exists(ref):
        # The client reads "url" even from a 409 when exist_ok=True.
        raise errors.conflict(f"You already created this {ref.repo_type} repo", url=url)
    sdk, hardware = data.get("sdk"), data.get("hardware")
    if ref.repo_type == "space":
        if sdk not in SPACE_SDKS:
            raise errors.bad_request(f"A Space needs an sdk, one of {', '.join(SPACE_SDKS)}; got {sdk!r}.")
        if hardware is not None and not isinstance(hardware, str):
            raise errors.bad_request(
                f"A Space's hardware is a flavor name such as cpu-basic; got {hardware!r}."
            )
        plan = ctx.settings.limits.plan(ctx.access.plan_of(ref.namespace))
        check_space_creation(plan, sdk, hardware, _zero_gpu_spaces(ctx, ref.namespace))
    creator = req.caller.name or ref.namespace
    ctx.limiter.check_creation(creator, ctx.settings.limits.plan(req.caller.plan))
    private = bool(data.get("private")) or data.get("visibility") in ("private", "protected")
    space = ref.repo_type == "space"
    meta = RepoMeta(private=private, sdk=sdk if space else None, hardware=hardware if space else None)
    ctx.store.create(ref, meta, default_initial_files(ref, meta.sdk), ctx.author(req.caller))
    return json_response({"url": url, "name": ref.repo_id})


def _zero_gpu_spaces(ctx: HubContext, namespace: str) -> int:
    spaces = (ctx.store.get(r).meta for r in ctx.store.list("space") if r.namespace == namespace)
    return sum(1 for meta in spaces if (meta.hardware or "").startswith(ZERO_GPU_PREFIX))


def delete_repo(ctx: HubContext, req: Request) -> Response:
    ref = _ref_from_body(req, req.body.json())
    ctx.repo(req, ref.repo_type, ref.namespace, ref.name)  # may the caller see it, and write there?
    ctx.store.delete(ref)
    return json_response({})


def update_settings(ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str) -> Response:
    repo = ctx.repo(req, repo_type, namespace, name)
    data = req.body.json()
    if "visibility" in data:
        repo.update_meta(private=data["visibility"] in ("private", "protected"))
    elif "private" in data:  # huggingface_hub <1.10
        repo.update_meta(private=bool(data["private"]))
    if "gated" in data:
        if data["gated"] not in ("auto", "manual", False):
            raise errors.bad_request(f'"gated" must be one of [auto, manual, false]; got {data["gated"]!r}.')
        repo.update_meta(gated=data["gated"])
    return json_response({})


def auth_check(ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str) -> Response:
    """Whether the caller may download the repository's files (`HfApi.auth_check`)."""
    ctx.check_download(req, ctx.repo(req, repo_type, namespace, name))
    return json_response({})


def whoami(ctx: HubContext, req: Request) -> Response:
    caller = req.caller
    if caller.name is None:
        raise errors.unauthorized()
    role = "write" if caller.can_write else "read"
    return json_response(
        {
            "type": "user",
            "id": caller.name,
            "name": caller.name,
            "fullname": caller.name,
            "orgs": [{"type": "org", "name": org, "id": org} for org in caller.orgs],
            "auth": {"type": "access_token", "accessToken": {"displayName": "local", "role": role}},
        }
    )


def list_repos(ctx: HubContext, req: Request, repo_type: str) -> Response:
    author, search = req.param("author"), req.param("search") or ""
    refs = [
        r
        for r in ctx.store.list(repo_type)
        if (author is None or r.namespace == author)
        and search.lower() in r.repo_id.lower()
        and ctx.visible(req.caller, r)
    ]
    return json_response([{"id": r.repo_id, "_id": r.repo_id, "author": r.namespace} for r in refs])


def _sibling(entry: FileEntry, with_blobs: bool) -> dict:
    sibling: dict = {"rfilename": entry.path}
    if with_blobs:
        sibling.update(size=entry.size, blobId=entry.blob_sha)
        if entry.lfs:
            pointer_size = len(entry.lfs.to_bytes())
            sibling["lfs"] = {"sha256": entry.lfs.oid, "size": entry.size, "pointerSize": pointer_size}
    return sibling


def _space_runtime(meta: RepoMeta, paths: set[str]) -> dict:
    # Spaces never run here: the stage only says whether there is an app to run.
    app_file = {"gradio": "app.py", "streamlit": "app.py", "static": "index.html", "docker": "Dockerfile"}
    stage = "RUNNING" if app_file.get(meta.sdk or "") in paths else "NO_APP_FILE"
    return {
        "stage": stage,
        "hardware": {"current": meta.hardware or "cpu-basic", "requested": meta.hardware or "cpu-basic"},
        "storage": None,
        "gcTimeout": 172800,
        "replicas": {"current": 1, "requested": 1},
    }


def repo_info(
    ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, revision: str = "main"
) -> Response:
    repo = ctx.repo(req, repo_type, namespace, name)
    commit = repo.git.read_commit(repo.resolve(revision))
    files = repo.files(commit.sha)
    meta = repo.meta
    info: dict = {
        "_id": f"{repo_type}/{namespace}/{name}",
        "id": repo.ref.repo_id,
        "author": namespace,
        "sha": commit.sha,
        "lastModified": iso_time(commit.timestamp),
        "createdAt": iso_time(meta.created_at),
        "private": meta.private,
        "disabled": False,
        "gated": meta.gated,
        "downloads": 0,
        "likes": 0,
        "tags": [],
        "siblings": [_sibling(e, req.flag("blobs")) for e in files.values()],
        "usedStorage": sum(e.size for e in files.values()),
    }
    if repo_type == "model":
        info["modelId"] = repo.ref.repo_id
    if repo_type == "space":
        info["sdk"] = meta.sdk
        info["runtime"] = _space_runtime(meta, set(files))
    if "README.md" in files:
        data = card_data(repo.read(files["README.md"]).decode("utf-8", "replace"))
        if data is not None:
            info["cardData"] = data
    expand = req.query.get("expand", []) + req.query.get("expand[]", [])
    if repo_type == "model" and "evalResults" in expand:
        # As the Hub: the results files on the main branch, whatever revision was asked for.
        on_main = repo.files(repo.resolve("main"))
        info["evalResults"] = [
            item
            for path, entry in sorted(on_main.items())
            if path.startswith(EVAL_RESULTS_DIR)
            and path.endswith(".yaml")
            and entry.size <= MAX_METADATA_CHARS
            for item in eval_results_items(path, repo.read(entry).decode("utf-8", "replace"))
        ]
    return json_response(info)


def space_runtime(ctx: HubContext, req: Request, namespace: str, name: str) -> Response:
    repo = ctx.repo(req, "space", namespace, name)
    return json_response(_space_runtime(repo.meta, set(repo.files(repo.resolve("main")))))


def list_refs(ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str) -> Response:
    repo = ctx.repo(req, repo_type, namespace, name)

    def refs(kind: str) -> list[dict]:
        names = repo.git.list_refs(f"refs/{kind}/")
        return [{"name": n, "ref": f"refs/{kind}/{n}", "targetCommit": sha} for n, sha in names.items()]

    answer = {"branches": refs("heads"), "converts": [], "tags": refs("tags")}
    if req.flag("include_prs"):
        answer["pullRequests"] = refs("pr")
    return json_response(answer)


def list_commits(
    ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, revision: str
) -> Response:
    repo = ctx.repo(req, repo_type, namespace, name)
    return json_response(
        [
            {
                "id": c.sha,
                "title": c.title,
                "message": c.body,
                "authors": [{"user": c.author.split(" <")[0]}],
                "date": iso_time(c.timestamp),
            }
            for c in repo.log(revision)
        ]
    )


def create_branch(
    ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, branch: str
) -> Response:
    repo = ctx.repo(req, repo_type, namespace, name)
    data = req.body.json()
    repo.create_branch(
        branch, data.get("startingPoint"), bool(data.get("emptyBranch")), ctx.author(req.caller)
    )
    return json_response({})


def create_tag(
    ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, revision: str
) -> Response:
    repo = ctx.repo(req, repo_type, namespace, name)
    data = req.body.json()
    if not isinstance(data.get("tag"), str):
        raise errors.bad_request("Missing 'tag' in the request body.")
    repo.create_tag(data["tag"], revision)
    return json_response({})


def delete_ref(
    ctx: HubContext, req: Request, repo_type: str, namespace: str, name: str, ref: str, *, kind: str
) -> Response:
    """DELETE of a branch (`kind` "heads") or a tag (`kind` "tags")."""
    ctx.repo(req, repo_type, namespace, name).delete_ref(kind, ref)
    return json_response({})
