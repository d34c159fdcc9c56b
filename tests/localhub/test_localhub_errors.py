"""Bad input gets the Hub's status code and error, and leaves the repository exactly as it was."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from huggingface_hub import CommitOperationAdd, HfApi, get_session, hf_hub_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)


def _state(local_hub, hub_api, repo_id: str) -> tuple[str, list[tuple[str, str]], list[str]]:
    """Head commit, files with their oids, and every object file on disk: all must stay unchanged."""
    sha = hub_api.model_info(repo_id).sha
    files = sorted(
        (e.path, e.blob_id) for e in hub_api.list_repo_tree(repo_id, recursive=True) if hasattr(e, "blob_id")
    )
    git_dir = Path(local_hub.root) / "repos" / "models" / f"{repo_id}.git"
    objects = sorted(
        str(p.relative_to(git_dir)) for p in git_dir.rglob("*") if p.is_file() and "refs" not in p.parts
    )
    return sha, files, objects


@pytest.fixture(scope="module")
def repo(hub_api) -> str:
    """One repo for the module: every test compares its state before and after, so they can share it."""
    repo_id = f"hubkit-test/errors-{uuid.uuid4().hex[:8]}"
    hub_api.create_repo(repo_id)
    hub_api.upload_file(path_or_fileobj=b"hello\n", path_in_repo="a/hello.txt", repo_id=repo_id)
    hub_api.upload_file(path_or_fileobj=os.urandom(2048), path_in_repo="w.safetensors", repo_id=repo_id)
    return repo_id


def _auth(local_hub) -> dict[str, str]:
    return {"authorization": f"Bearer {local_hub.token}"}


def _post_commit(local_hub, repo_id: str, lines: list[dict], revision: str = "main"):
    body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    return get_session().post(
        f"{local_hub.endpoint}/api/models/{repo_id}/commit/{revision}",
        content=body,
        headers={**_auth(local_hub), "content-type": "application/x-ndjson"},
    )


HEADER = {"key": "header", "value": {"summary": "bad commit", "description": ""}}
GOOD_FILE = {
    "key": "file",
    "value": {"path": "ok.txt", "content": base64.b64encode(b"ok").decode(), "encoding": "base64"},
}


@pytest.mark.parametrize(
    "payload",
    [
        {"name": "a--b"},
        {"name": ".."},
        {"name": "x" * 97},
        {"name": "bad/name"},
        {"name": "ok-name", "organization": "-bad"},
        {"name": "ok-name", "type": "kernel"},
        {"name": "ok-name", "type": "space"},  # a Space needs an sdk
        {"name": None},
    ],
)
def test_invalid_repo_ids_are_refused_and_nothing_is_created(local_hub, payload):
    before = sorted(p.relative_to(local_hub.root) for p in Path(local_hub.root).rglob("*"))
    response = get_session().post(
        f"{local_hub.endpoint}/api/repos/create", json=payload, headers=_auth(local_hub)
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]
    assert sorted(p.relative_to(local_hub.root) for p in Path(local_hub.root).rglob("*")) == before


def test_invalid_repo_id_in_a_url_is_a_400(local_hub):
    response = get_session().get(f"{local_hub.endpoint}/api/models/hubkit-test/bad..name")
    assert response.status_code == 400


@pytest.mark.parametrize(
    "path", ["../evil.txt", "/abs.txt", "a/../../b.txt", ".git/config", "a//b.txt", "a/./b", ""]
)
def test_commit_with_an_unsafe_path_writes_nothing(local_hub, hub_api, repo, path):
    before = _state(local_hub, hub_api, repo)
    bad = {
        "key": "file",
        "value": {"path": path, "content": base64.b64encode(b"x").decode(), "encoding": "base64"},
    }
    response = _post_commit(local_hub, repo, [HEADER, GOOD_FILE, bad])
    assert response.status_code == 400, response.text
    assert _state(local_hub, hub_api, repo) == before


@pytest.mark.parametrize(
    "lines",
    [
        [
            HEADER,
            {"key": "file", "value": {"path": "a/hello.txt/x", "content": "eA==", "encoding": "base64"}},
        ],
        [HEADER, {"key": "file", "value": {"path": "a", "content": "eA==", "encoding": "base64"}}],
        [HEADER, {"key": "rename", "value": {"path": "x"}}],
        [HEADER, {"key": "file", "value": {"path": "x", "content": "!!!", "encoding": "base64"}}],
        [HEADER, {"key": "lfsFile", "value": {"path": "x.bin", "algo": "sha256", "oid": "zz", "size": 1}}],
        [{"key": "header", "value": {"summary": "", "description": ""}}, GOOD_FILE],
        [HEADER, {"key": "header", "value": {"summary": "twice"}}],
        [HEADER, {"key": "header", "value": {"summary": "x", "parentCommit": "not-a-sha"}}],
        [{"key": "header", "value": {"summary": "a\u0000b"}}, GOOD_FILE],
    ],
    ids=[
        "under-a-file",
        "over-a-folder",
        "unknown-key",
        "bad-base64",
        "bad-oid",
        "empty-summary",
        "second-header",
        "bad-parent",
        "nul-in-message",
    ],
)
def test_malformed_commit_payloads_write_nothing(local_hub, hub_api, repo, lines):
    before = _state(local_hub, hub_api, repo)
    assert _post_commit(local_hub, repo, lines).status_code == 400
    assert _state(local_hub, hub_api, repo) == before


def test_unknown_repo_revision_and_entry_map_to_the_clients_errors(local_hub, hub_api, repo):
    before = _state(local_hub, hub_api, repo)
    with pytest.raises(RepositoryNotFoundError):
        hub_api.model_info("hubkit-test/no-such-repo")
    with pytest.raises(RevisionNotFoundError):
        hub_api.model_info(repo, revision="no-such-branch")
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(repo, "a/hello.txt", revision="no-such-branch")
    with pytest.raises(EntryNotFoundError):
        hf_hub_download(repo, "a/missing.txt")
    with pytest.raises(EntryNotFoundError):
        list(hub_api.list_repo_tree(repo, path_in_repo="no/such/folder"))
    with pytest.raises(RevisionNotFoundError):
        hub_api.upload_file(
            path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=repo, revision="no-such-branch"
        )
    with pytest.raises(EntryNotFoundError, match="A file with this name doesn't exist"):
        hub_api.delete_file("a/missing.txt", repo_id=repo)
    assert _state(local_hub, hub_api, repo) == before


def test_stale_parent_commit_gets_412(local_hub, hub_api, repo):
    old = hub_api.model_info(repo).sha
    hub_api.upload_file(path_or_fileobj=b"moved", path_in_repo="moved.txt", repo_id=repo)
    before = _state(local_hub, hub_api, repo)
    with pytest.raises(HfHubHTTPError) as caught:
        hub_api.create_commit(
            repo, [CommitOperationAdd("late.txt", b"late")], commit_message="late", parent_commit=old
        )
    assert caught.value.response.status_code == 412
    assert _state(local_hub, hub_api, repo) == before


def _lfs_upload_action(local_hub, repo_id: str, oid: str, size: int) -> dict:
    response = get_session().post(
        f"{local_hub.endpoint}/{repo_id}.git/info/lfs/objects/batch",
        json={"operation": "upload", "transfers": ["basic"], "objects": [{"oid": oid, "size": size}]},
        headers={**_auth(local_hub), "accept": "application/vnd.git-lfs+json"},
    )
    assert response.status_code == 200
    return response.json()["objects"][0]


def _lfs_commit(local_hub, repo_id: str, oid: str, size: int):
    lfs_line = {"key": "lfsFile", "value": {"path": "big.bin", "algo": "sha256", "oid": oid, "size": size}}
    return _post_commit(local_hub, repo_id, [HEADER, lfs_line])


def test_truncated_lfs_upload_stores_nothing(local_hub, hub_api, repo):
    before = _state(local_hub, hub_api, repo)
    data = os.urandom(100_000)
    oid = hashlib.sha256(data).hexdigest()
    href = _lfs_upload_action(local_hub, repo, oid, len(data))["actions"]["upload"]["href"]
    url = urlsplit(href)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    connection.putrequest("PUT", f"{url.path}?{url.query}")
    connection.putheader("Content-Length", str(len(data)))
    connection.endheaders()
    connection.send(data[: len(data) // 2])
    connection.sock.shutdown(1)  # the client goes away halfway through
    assert connection.getresponse().status == 400
    connection.close()

    assert "actions" in _lfs_upload_action(local_hub, repo, oid, len(data))  # still missing
    assert _lfs_commit(local_hub, repo, oid, len(data)).status_code == 400
    assert _state(local_hub, hub_api, repo) == before


def test_lfs_upload_with_a_wrong_sha256_is_refused(local_hub, hub_api, repo):
    before = _state(local_hub, hub_api, repo)
    data = os.urandom(4096)
    claimed = hashlib.sha256(b"something else").hexdigest()
    href = _lfs_upload_action(local_hub, repo, claimed, len(data))["actions"]["upload"]["href"]
    response = get_session().put(href, content=data)
    assert response.status_code == 400 and "does not match" in response.json()["error"]

    assert _lfs_commit(local_hub, repo, claimed, len(data)).status_code == 400
    assert _state(local_hub, hub_api, repo) == before


def test_lfs_upload_url_needs_its_signature(local_hub, repo):
    data = b"x" * 10
    href = _lfs_upload_action(local_hub, repo, hashlib.sha256(data).hexdigest(), 10)["actions"]["upload"][
        "href"
    ]
    assert get_session().put(href.replace("sig=", "sig=0"), content=data).status_code == 403
    assert get_session().put(href.replace("size=10", "size=11"), content=data).status_code == 403


def test_missing_or_wrong_token_is_refused_and_nothing_changes(local_hub, hub_api, repo, make_repo_id):
    other, private = make_repo_id("other"), make_repo_id("private")
    before = _state(local_hub, hub_api, repo)
    anonymous = HfApi(endpoint=local_hub.endpoint, token=False)
    wrong = HfApi(endpoint=local_hub.endpoint, token="hf_wrong")
    for api in (anonymous, wrong):
        with pytest.raises(HfHubHTTPError) as caught:
            api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=repo)
        assert caught.value.response.status_code == 401
        with pytest.raises(HfHubHTTPError) as caught:
            api.create_repo(other)
        assert caught.value.response.status_code == 401
    assert not hub_api.repo_exists(other)
    assert _state(local_hub, hub_api, repo) == before

    # Public reads need no token; a wrong token is refused even there; private repos are hidden.
    assert anonymous.model_info(repo).sha == before[0]
    with pytest.raises(HfHubHTTPError) as caught:
        wrong.model_info(repo)
    assert caught.value.response.status_code == 401
    hub_api.create_repo(private, private=True)
    with pytest.raises(RepositoryNotFoundError):
        anonymous.model_info(private)
    assert hub_api.model_info(private).private


def test_the_server_still_answers_after_bad_input(hub_api, repo):
    hub_api.upload_file(path_or_fileobj=b"fine", path_in_repo="fine.txt", repo_id=repo)
    assert "fine.txt" in hub_api.list_repo_files(repo)


WRITE_URLS = [
    ("POST", "/api/repos/create"),
    ("DELETE", "/api/repos/delete"),
    ("POST", "/api/validate-yaml"),
    ("PUT", "/api/models/{repo}/settings"),
    ("POST", "/api/models/{repo}/branch/fuzz"),
    ("POST", "/api/models/{repo}/tag/main"),
    ("POST", "/api/models/{repo}/paths-info/main"),
    ("POST", "/api/models/{repo}/preupload/main"),
    ("POST", "/api/models/{repo}/commit/main"),
    ("POST", "/{repo}.git/info/lfs/objects/batch"),
    ("POST", "/{repo}.git/info/lfs/objects/verify"),
]
BODIES = [
    b"",
    b"not json",
    b"[]",
    b'"text"',
    b"3",
    b"{}",
    b'{"files": [1]}',
    b'{"objects": [1], "operation": "upload"}',
    b'{"paths": [1]}',
    b'{"startingPoint": 7}',
    b'{"tag": ["x"]}',
    b'{"name": {"a": 1}, "type": []}',
]


@pytest.mark.parametrize(("method", "url"), WRITE_URLS, ids=[u for _, u in WRITE_URLS])
def test_malformed_bodies_get_a_4xx_never_a_5xx(local_hub, hub_api, repo, method, url):
    before = _state(local_hub, hub_api, repo)
    for body in BODIES:
        response = get_session().request(
            method, local_hub.endpoint + url.format(repo=repo), content=body, headers=_auth(local_hub)
        )
        assert response.status_code < 500, (body, response.status_code, response.text)
    assert _state(local_hub, hub_api, repo) == before


@pytest.mark.parametrize(
    "url",
    [
        "/api/models/{repo}/revision/%00",
        "/api/models/{repo}/revision/x%0D%0ASet-Cookie:%20a=b",
        "/api/models/{repo}/revision/..%2F..%2Fconfig",
        "/api/models/{repo}/tree/main/%2E%2E",
        "/api/models/{repo}/tree/main/a%00b",
        "/api/models/{repo}/commits/HEAD",
        "/{repo}/resolve/main/..%2F..%2Fconfig",
        "/{repo}/resolve/main/.git/config",
        "/{repo}/resolve/refs%2Fheads%2F..%2F..%2FHEAD/a/hello.txt",
        "/{repo}/resolve/0000000000000000000000000000000000000000/a/hello.txt",
        "/lfs-objects/models/{repo}/" + "0" * 64,
        "/lfs-objects/models/{repo}/..",
        "/api/unknown",
    ],
)
def test_hostile_read_urls_get_a_4xx(local_hub, repo, url):
    response = get_session().get(local_hub.endpoint + url.format(repo=repo))
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    assert "set-cookie" not in response.headers  # nothing from the URL becomes a header of its own


def test_multipart_completion_with_unknown_etags_stores_nothing(tmp_path):
    from hubkit.localhub import HubSettings, LocalHub

    data = os.urandom(3000)
    oid = hashlib.sha256(data).hexdigest()
    settings = HubSettings(multipart_threshold=1000, multipart_chunk_size=1000)
    with LocalHub(tmp_path / "hub", settings=settings) as hub:
        HfApi(endpoint=hub.endpoint, token="any").create_repo("me/parts")
        response = get_session().post(
            f"{hub.endpoint}/me/parts.git/info/lfs/objects/batch",
            json={
                "operation": "upload",
                "transfers": ["basic", "multipart"],
                "objects": [{"oid": oid, "size": 3000}],
            },
            headers={"authorization": "Bearer any"},  # an open Hub writes with any token, not without one
        )
        upload = response.json()["objects"][0]["actions"]["upload"]
        assert upload["header"]["chunk_size"] == "1000"
        etags = [
            get_session()
            .put(upload["header"][str(n)], content=data[(n - 1) * 1000 : n * 1000])
            .headers["etag"]
            for n in (1, 2, 3)
        ]
        for parts in (
            [],
            [{"partNumber": 1, "etag": etags[0]}],
            [{"partNumber": n, "etag": "x"} for n in (1, 2, 3)],
        ):
            response = get_session().post(upload["href"], json={"oid": oid, "parts": parts})
            assert response.status_code == 400, response.text
        verify = get_session().post(
            f"{hub.endpoint}/me/parts.git/info/lfs/objects/verify",
            json={"oid": oid, "size": 3000},
            headers={"authorization": "Bearer any"},
        )
        assert verify.status_code == 404


def test_a_malformed_content_length_gets_a_400(local_hub, repo):
    url = urlsplit(local_hub.endpoint)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    connection.putrequest("POST", f"/api/models/{repo}/paths-info/main")
    connection.putheader("Content-Length", "not-a-number")
    connection.endheaders()
    assert connection.getresponse().status == 400
    connection.close()


def test_a_xet_write_token_needs_a_hub_token_and_a_read_token_does_not(local_hub, repo):
    url = f"{local_hub.endpoint}/api/models/{repo}/xet-%s-token/main"
    assert get_session().get(url % "write").status_code == 401
    granted = get_session().get(url % "write", headers=_auth(local_hub))
    assert granted.status_code == 200 and granted.json()["casUrl"] == f"{local_hub.endpoint}/xet"
    assert get_session().get(url % "read").status_code == 200  # a public repo: anyone reads it
