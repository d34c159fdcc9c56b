"""Withdrawn means withdrawn: a signed upload or download URL expires, and serves only while whoever asked
for it may still make the request (the repo still visible to them, their token still known), also after
a restart; an unfinished upload is removed once none of its URLs can add to it."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from helpers import assert_hub_fsck_clean
from huggingface_hub import HfApi, get_session

from hubkit.localhub import HubSettings, LocalHub
from hubkit.localhub.accounts.access import load_users

MiB = 1024 * 1024
USERS = """
[users.alice]
tokens = ["hf_alice"]

[users.bob]
tokens = ["hf_bob"]
"""


def _download_url(hub: LocalHub, repo_id: str, path: str, token: str | None) -> str:
    """Where the Hub redirects a download of an LFS file (a signed URL on its CDN)."""
    headers = {"authorization": f"Bearer {token}"} if token else {}
    url = f"{hub.endpoint}/{repo_id}/resolve/main/{path}"
    response = get_session().get(url, headers=headers, follow_redirects=False)
    assert response.status_code == 302, response.text
    return response.headers["location"]


def _upload_actions(hub: LocalHub, repo_id: str, data: bytes, token: str, multipart: bool = False) -> dict:
    body = {
        "operation": "upload",
        "transfers": ["basic", "multipart"] if multipart else ["basic"],
        "objects": [{"oid": hashlib.sha256(data).hexdigest(), "size": len(data)}],
    }
    response = get_session().post(
        f"{hub.endpoint}/{repo_id}.git/info/lfs/objects/batch",
        json=body,
        headers={"authorization": f"Bearer {token}"},
    )
    return response.json()["objects"][0]["actions"]["upload"]


def test_a_download_url_stops_when_the_repo_turns_private_and_an_upload_url_when_its_user_goes(tmp_path):
    (tmp_path / "users.toml").write_text(USERS)
    settings = HubSettings(users=load_users(tmp_path / "users.toml"))
    data, payload = os.urandom(20_000), os.urandom(3000)
    with LocalHub(tmp_path / "hub", settings=settings) as hub:
        alice = HfApi(endpoint=hub.endpoint, token="hf_alice")
        alice.create_repo("alice/model")
        alice.upload_file(path_or_fileobj=data, path_in_repo="w.safetensors", repo_id="alice/model")
        anonymous = _download_url(hub, "alice/model", "w.safetensors", None)
        owner = _download_url(hub, "alice/model", "w.safetensors", "hf_alice")
        assert get_session().get(anonymous).content == data
        alice.update_repo_settings("alice/model", private=True)
        withdrawn = get_session().get(anonymous)
        assert withdrawn.status_code == 401 and withdrawn.headers["x-error-code"] == "RepoNotFound"
        assert get_session().get(owner).content == data  # alice still sees her repo
        upload = _upload_actions(hub, "alice/model", payload, "hf_alice")["href"]
        assert "expires=" in upload and "signer=" in upload and "hf_alice" not in upload
        upload_path = upload.removeprefix(hub.endpoint)
    # alice leaves the users file; the Hub restarts on the same root (same signing key, another port).
    (tmp_path / "users.toml").write_text('[users.bob]\ntokens = ["hf_bob"]\n')
    settings = HubSettings(users=load_users(tmp_path / "users.toml"))
    with LocalHub(tmp_path / "hub", settings=settings) as hub:
        response = get_session().put(hub.endpoint + upload_path, content=payload)
        assert response.status_code == 403 and "no longer accepted" in response.json()["error"]
        assert not list(Path(hub.root).rglob(f"lfs/objects/*/*/{hashlib.sha256(payload).hexdigest()}"))
        assert_hub_fsck_clean(Path(hub.root))


def test_a_signed_url_expires_and_cannot_be_extended(tmp_path):
    # The URL lives at least its ttl: 3 s leaves a loaded machine time for the first download.
    with LocalHub(tmp_path / "hub", settings=HubSettings(signed_url_ttl=3)) as hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        api.create_repo("me/target")
        api.upload_file(path_or_fileobj=b"\0" * 5000, path_in_repo="w.bin", repo_id="me/target")
        location = _download_url(hub, "me/target", "w.bin", "any")
        assert get_session().get(location).status_code == 200
        time.sleep(4.1)
        expired = get_session().get(location)
        assert expired.status_code == 403 and "expired" in expired.json()["error"]
        assert get_session().get(location.replace("expires=", "expires=9")).status_code == 403


def test_an_unfinished_upload_is_removed_once_its_urls_expired(tmp_path):
    settings = HubSettings(signed_url_ttl=3, incomplete_upload_timeout=4)
    data = os.urandom(70 * MiB)
    with LocalHub(tmp_path / "hub", settings=settings) as hub:
        HfApi(endpoint=hub.endpoint, token="any").create_repo("me/target")
        part = _upload_actions(hub, "me/target", data, "any", multipart=True)["header"]["1"]
        assert get_session().put(part, content=data[: 16 * MiB]).status_code == 200
        incomplete = Path(hub.root) / "repos" / "models" / "me" / "target.git" / "lfs" / "incomplete"
        assert [p.name for p in incomplete.iterdir()] == [hashlib.sha256(data).hexdigest()]
        deadline = time.monotonic() + 20
        while any(incomplete.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(incomplete.iterdir())
        assert get_session().put(part, content=data[: 16 * MiB]).status_code == 403  # expired
