"""Who may do what on a shared local Hub, through the real client: users, organizations, read-only
tokens, private repos, anonymous reads; a shared address needs credentials; URLs follow the Host."""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import refused_status, team_settings
from huggingface_hub import HfApi, get_session, hf_hub_download
from huggingface_hub.errors import RepositoryNotFoundError

from hubkit.errors import LocalHubError
from hubkit.localhub import LocalHub
from hubkit.localhub.accounts.access import load_users

BIN = Path(sys.executable).parent
TOKENS = ("hf_alice_write", "hf_alice_read", "hf_bob_write", "hf_carol_write", "hf_admin")


@pytest.fixture(scope="module")
def team_hub(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("team")
    with LocalHub(folder / "hub", settings=team_settings(folder)) as hub:
        alice = HfApi(endpoint=hub.endpoint, token="hf_alice_write")
        alice.create_repo("alice/public")
        alice.upload_file(path_or_fileobj=b"hello", path_in_repo="a.txt", repo_id="alice/public")
        alice.create_repo("alice/secret", private=True)
        alice.create_repo("lab/private", private=True)
        yield hub


def _api(hub: LocalHub, token: str | bool) -> HfApi:
    return HfApi(endpoint=hub.endpoint, token=token)


def test_a_user_writes_under_their_own_name_and_their_orgs(team_hub):
    alice, carol = _api(team_hub, "hf_alice_write"), _api(team_hub, "hf_carol_write")
    url = alice.create_repo("mine")  # no namespace: the caller's own
    assert url.repo_id == "alice/mine" and url.endpoint == team_hub.endpoint
    carol.upload_file(path_or_fileobj=b"from carol", path_in_repo="c.txt", repo_id="lab/private")
    alice.delete_file("c.txt", repo_id="lab/private")
    assert carol.whoami()["orgs"][0]["name"] == "lab"
    info = carol.model_info("lab/private")
    assert info.private and alice.list_repo_commits("lab/private")[0].authors == ["alice"]
    carol.create_repo("lab/made-by-carol")
    alice.delete_repo("lab/made-by-carol")
    assert not carol.repo_exists("lab/made-by-carol")


def test_a_user_cannot_create_write_or_delete_under_anothers_namespace(team_hub):
    bob, alice = _api(team_hub, "hf_bob_write"), _api(team_hub, "hf_alice_write")
    head = alice.model_info("alice/public").sha
    assert refused_status(lambda: bob.create_repo("alice/planted")) == 403
    assert refused_status(lambda: bob.create_repo("lab/planted")) == 403
    assert (
        refused_status(
            lambda: bob.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id="alice/public")
        )
        == 403
    )
    assert refused_status(lambda: bob.delete_file("a.txt", repo_id="alice/public")) == 403
    assert refused_status(lambda: bob.create_branch("alice/public", branch="b")) == 403
    assert refused_status(lambda: bob.update_repo_settings("alice/public", private=True)) == 403
    assert refused_status(lambda: bob.delete_repo("alice/public")) == 403
    assert alice.model_info("alice/public").sha == head and not alice.model_info("alice/public").private
    assert not alice.repo_exists("alice/planted") and not alice.repo_exists("lab/planted")
    assert bob.create_repo("bobs").repo_id == "bob/bobs"


def test_private_repos_are_not_found_for_everyone_outside_their_namespace(team_hub, tmp_path):
    bob, carol = _api(team_hub, "hf_bob_write"), _api(team_hub, "hf_carol_write")
    anonymous = _api(team_hub, False)
    for api in (bob, carol, anonymous):  # carol is in lab, not alice
        with pytest.raises(RepositoryNotFoundError):
            api.model_info("alice/secret")
        assert not api.repo_exists("alice/secret")
    with pytest.raises(RepositoryNotFoundError):
        bob.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id="alice/secret")
    with pytest.raises(RepositoryNotFoundError):
        bob.delete_repo("alice/secret")
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download(
            "alice/secret",
            ".gitattributes",
            endpoint=team_hub.endpoint,
            token="hf_bob_write",
            cache_dir=tmp_path,
        )
    assert "alice/secret" not in {m.id for m in bob.list_models(author="alice")}
    assert "alice/public" in {m.id for m in bob.list_models(author="alice")}
    assert {m.id for m in _api(team_hub, "hf_alice_write").list_models(author="alice")} >= {
        "alice/public",
        "alice/secret",
    }
    assert _api(team_hub, "hf_admin").model_info("alice/secret").private  # the administrator sees all


def test_read_only_tokens_read_but_cannot_write(team_hub, tmp_path):
    reader = _api(team_hub, "hf_alice_read")
    assert reader.whoami()["auth"]["accessToken"]["role"] == "read"
    assert reader.model_info("alice/secret").private  # reads its user's private repos
    path = hf_hub_download(
        "alice/public", "a.txt", endpoint=team_hub.endpoint, token="hf_alice_read", cache_dir=tmp_path
    )
    assert Path(path).read_bytes() == b"hello"
    assert refused_status(lambda: reader.create_repo("alice/by-reader")) == 403
    assert (
        refused_status(
            lambda: reader.upload_file(path_or_fileobj=b"x", path_in_repo="x", repo_id="alice/public")
        )
        == 403
    )
    assert refused_status(lambda: reader.delete_repo("alice/public")) == 403
    assert _api(team_hub, "hf_alice_write").repo_exists("alice/public")


def test_anonymous_callers_read_public_repos_only_and_unknown_tokens_are_refused(team_hub, tmp_path):
    anonymous = _api(team_hub, False)
    assert anonymous.model_info("alice/public").id == "alice/public"
    path = hf_hub_download(
        "alice/public", "a.txt", endpoint=team_hub.endpoint, token=False, cache_dir=tmp_path
    )
    assert Path(path).read_bytes() == b"hello"
    assert refused_status(lambda: anonymous.create_repo("alice/anon")) == 401
    assert get_session().get(f"{team_hub.endpoint}/api/whoami-v2").status_code == 401
    assert refused_status(lambda: _api(team_hub, "hf_unknown").model_info("alice/public")) == 401


def test_tokens_never_reach_the_logs(team_hub, caplog):
    with caplog.at_level(logging.DEBUG, logger="hubkit.localhub"):
        for token in TOKENS:
            _api(team_hub, token).repo_exists("alice/public")
        _api(team_hub, "hf_alice_write").upload_file(
            path_or_fileobj=os.urandom(20_000), path_in_repo="w.bin", repo_id="alice/public"
        )
    text = caplog.text + repr(team_hub.request_log) + repr(team_hub.settings)
    assert "/xet/v2/shards" in caplog.text  # the log was on
    assert "sig=" not in caplog.text
    for token in TOKENS:
        assert token not in text


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ('[users.a]\ntokens = ["t"]\n[users.b]\ntokens = ["t"]\n', "listed twice"),
        ('[users.a]\ntokens = ["t"]\norgs = ["b"]\n[users.b]\ntokens = ["u"]\n', "both a user and"),
        ('[users.a]\ntoken = ["t"]\n', "may hold only"),
        ('[users."a b"]\ntokens = ["t"]\n', "Invalid user name"),
        ('[users.a]\ntokens = ["sha256:abc"]\n', "64 hex digits"),
        ("not toml [", "Cannot read"),
    ],
)
def test_a_bad_users_file_is_refused_with_the_reason(tmp_path, content, words):
    (tmp_path / "users.toml").write_text(content)
    with pytest.raises(ValueError, match=words):
        load_users(tmp_path / "users.toml")


def _serve_fails(tmp_path: Path, *args: str) -> str:
    """Run `hubkit hub serve` expecting a refusal; return its one-line message."""
    result = subprocess.run(
        [str(BIN / "hubkit"), "hub", "serve", "--root", str(tmp_path / "hub"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip().count("\n") == 0, result.stderr
    return result.stderr


def test_a_shared_address_without_credentials_is_refused(tmp_path):
    with pytest.raises(LocalHubError, match="--token or --users"):
        LocalHub(tmp_path / "hub", host="0.0.0.0").start()
    assert "Refusing to serve 0.0.0.0" in _serve_fails(tmp_path, "--host", "0.0.0.0")
    (tmp_path / "users.toml").write_text('[users.a]\ntokens = ["t", "t"]\n')
    assert "listed twice" in _serve_fails(
        tmp_path, "--host", "0.0.0.0", "--users", str(tmp_path / "users.toml")
    )


def test_a_hub_bound_to_every_address_answers_with_the_address_the_client_used(tmp_path):
    data = os.urandom(200_000)
    with LocalHub(tmp_path / "hub", host="0.0.0.0", token="hf_admin") as hub:
        assert "0.0.0.0" not in hub.endpoint and hub.endpoint.startswith(f"http://{socket.gethostname()}:")
        endpoint = "http://127.0.0.7:" + hub.endpoint.rsplit(":", 1)[1]  # not the printed address
        api = HfApi(endpoint=endpoint, token="hf_admin")
        url = api.create_repo("team/model")
        assert url.endpoint == endpoint
        info = api.upload_file(path_or_fileobj=data, path_in_repo="w.safetensors", repo_id="team/model")
        assert info.commit_url.startswith(f"{endpoint}/team/model/commit/")
        path = hf_hub_download(
            "team/model", "w.safetensors", endpoint=endpoint, token="hf_admin", cache_dir=tmp_path
        )
        assert Path(path).read_bytes() == data

        other = os.urandom(1000)
        batch = (
            get_session()
            .post(
                f"{endpoint}/team/model.git/info/lfs/objects/batch",
                json={
                    "operation": "upload",
                    "transfers": ["basic", "multipart"],
                    "objects": [{"oid": hashlib.sha256(other).hexdigest(), "size": len(other)}],
                },
                headers={"authorization": "Bearer hf_admin"},
            )
            .json()
        )
        actions = batch["objects"][0]["actions"]
        assert actions["upload"]["href"].startswith(f"{endpoint}/lfs-upload/")
        assert actions["verify"]["href"].startswith(f"{endpoint}/team/model.git/")
        served = {c for _, _, c in hub.request_log}
        assert 401 not in served and 500 not in served
