"""huggingface.co's limits on the local Hub, through the real client: commits per repository, API calls
with the rate-limit headers, repository creations, Spaces by plan, private storage, files per commit."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
from fixtures_hub import serve_hub
from huggingface_hub import CommitOperationAdd, HfApi, get_session
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils import parse_ratelimit_headers

from hubkit.localhub import HubSettings, LocalHub
from hubkit.localhub.accounts.access import load_users
from hubkit.localhub.accounts.limits import HubLimits

BIN = Path(sys.executable).parent
USERS = """
[users.alice]
tokens = ["hf_alice"]

[users.bob]
tokens = ["hf_bob"]
plan = "pro"
"""


def _hub(tmp_path: Path, spec: str = "", **settings) -> LocalHub:
    (tmp_path / "users.toml").write_text(USERS)
    limits = HubLimits().with_settings(spec)
    users = load_users(tmp_path / "users.toml")
    return LocalHub(
        tmp_path / "hub", settings=HubSettings(token="hf_admin", users=users, limits=limits, **settings)
    )


def _refusal(call) -> HfHubHTTPError:
    with pytest.raises(HfHubHTTPError) as caught:
        call()
    return caught.value


def test_the_commit_past_the_limit_is_refused_429_with_retry_after_in_the_hubs_words(tmp_path):
    with _hub(tmp_path, "commits_per_repo=3,commit_window=2") as hub:
        api = HfApi(endpoint=hub.endpoint, token="hf_admin")  # the operator too: the limit is the repo's
        api.create_repo("me/busy")
        api.create_repo("me/other")
        for n in range(3):
            api.upload_file(path_or_fileobj=f"{n}".encode(), path_in_repo="n.txt", repo_id="me/busy")
        head = api.model_info("me/busy").sha
        error = _refusal(
            lambda: api.upload_file(path_or_fileobj=b"3", path_in_repo="n.txt", repo_id="me/busy")
        )
        response = error.response
        assert response.status_code == 429
        assert 1 <= int(response.headers["Retry-After"]) <= 2
        words = "You have exceeded the rate limit for repository commits (3 per 2 seconds). You can retry this action in about"
        assert response.json()["error"].startswith(words)
        assert response.headers["X-Error-Message"].startswith(words) and words in str(error)
        assert api.model_info("me/busy").sha == head  # nothing committed
        api.upload_file(path_or_fileobj=b"x", path_in_repo="n.txt", repo_id="me/other")  # per repository
        time.sleep(int(response.headers["Retry-After"]))
        api.upload_file(path_or_fileobj=b"3", path_in_repo="n.txt", repo_id="me/busy")  # the window slid


def test_api_answers_carry_the_rate_limit_headers_and_429_past_the_quota(tmp_path):
    # The raw calls go through a client of their own: the process's shared one may be paced by hubkit
    # (`hubkit.hub.pacing`), which would wait for the window instead of meeting the 429 asserted here.
    with _hub(tmp_path, "free.api_calls=4,api_window=60") as hub, httpx2.Client() as session:

        def get(token: str | None, path: str = "/api/whoami-v2"):
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            return session.get(f"{hub.endpoint}{path}", headers=headers)

        first = get("hf_alice")
        assert first.headers["RateLimit"] == '"api";r=3;t=60'
        assert first.headers["RateLimit-Policy"] == '"fixed window";"api";q=4;w=60'
        for _ in range(3):
            assert get("hf_alice").status_code == 200
        refused = get("hf_alice")
        assert refused.status_code == 429
        info = parse_ratelimit_headers(refused.headers)
        assert info is not None and (info.remaining, info.limit, info.window_seconds) == (0, 4, 60)
        assert refused.json()["error"].startswith(
            "We had to rate limit you, you hit the quota of 4 api requests per 1 minutes period."
        )
        # Another account has its own count; PRO's quota is production's; anonymous callers count per IP.
        assert get("hf_bob").headers["RateLimit-Policy"] == '"fixed window";"api";q=2500;w=60'
        assert get(None, "/api/models/alice/none").headers["RateLimit-Policy"].endswith("q=500;w=60")
        resolve = get("hf_bob", "/bob/none/resolve/main/x")
        assert resolve.headers["RateLimit"].startswith('"resolvers";r=11999;')
        # The client's own error names the limit from the headers, and its retry reads them.
        with pytest.raises(HfHubHTTPError, match="reached your 'api' rate limit"):
            HfApi(endpoint=hub.endpoint, token="hf_alice").create_repo("alice/one-more")


def test_a_free_accounts_gradio_space_is_refused_as_the_hub_refuses_it(tmp_path):
    with _hub(tmp_path) as hub:
        alice = HfApi(endpoint=hub.endpoint, token="hf_alice")
        for sdk in ("gradio", "docker"):
            error = _refusal(
                lambda sdk=sdk: alice.create_repo("alice/demo", repo_type="space", space_sdk=sdk)
            )
            assert error.response.status_code == 402
            assert "hosting Gradio and Docker Spaces on free cpu-basic requires a PRO subscription" in str(
                error
            )
        alice.create_repo("alice/page", repo_type="space", space_sdk="static")
        for n in range(2):
            alice.create_repo(
                f"alice/zero-{n}", repo_type="space", space_sdk="gradio", space_hardware="zero-a10g"
            )
        third = _refusal(
            lambda: alice.create_repo(
                "alice/zero-2", repo_type="space", space_sdk="gradio", space_hardware="zero-a10g"
            )
        )
        assert third.response.status_code == 403 and "ZeroGPU" in str(third)
        assert [s.id for s in alice.list_spaces(author="alice")] == [
            "alice/page",
            "alice/zero-0",
            "alice/zero-1",
        ]
        bob = HfApi(endpoint=hub.endpoint, token="hf_bob")  # PRO
        bob.create_repo("bob/demo", repo_type="space", space_sdk="gradio")
        assert bob.get_space_runtime("bob/demo").hardware == "cpu-basic"


def test_private_storage_past_the_plans_quota_is_refused_403_before_any_upload(tmp_path):
    with _hub(tmp_path, "free.private_storage=4500") as hub:
        alice = HfApi(endpoint=hub.endpoint, token="hf_alice")
        alice.create_repo("alice/secret", private=True)  # its .gitattributes: 1.5 kB
        alice.create_repo("alice/open")
        alice.upload_file(path_or_fileobj=b"a" * 1500, path_in_repo="a.bin", repo_id="alice/secret")
        alice.upload_file(
            path_or_fileobj=b"a" * 1500, path_in_repo="a.bin", repo_id="alice/secret"
        )  # the same
        head, uploads = alice.model_info("alice/secret").sha, len(hub.uploads)
        error = _refusal(
            lambda: alice.upload_file(
                path_or_fileobj=b"b" * 2000, path_in_repo="b.bin", repo_id="alice/secret"
            )
        )
        assert error.response.status_code == 403
        assert error.response.headers["X-Error-Message"] == (
            "Private repository storage limit reached, please upgrade your plan"
        )
        assert alice.model_info("alice/secret").sha == head and len(hub.uploads) == uploads
        alice.upload_file(path_or_fileobj=b"b" * 5000, path_in_repo="b.bin", repo_id="alice/open")  # public
        # The quota is the account's: a second private repo shares it.
        alice.create_repo("alice/secret-2", private=True)
        assert (
            _refusal(
                lambda: alice.upload_file(
                    path_or_fileobj=b"c" * 2000, path_in_repo="c.bin", repo_id="alice/secret-2"
                )
            ).response.status_code
            == 403
        )


def test_repo_creations_past_the_limit_are_refused_429(tmp_path):
    with _hub(tmp_path, "free.repo_creations=2") as hub:
        alice = HfApi(endpoint=hub.endpoint, token="hf_alice")
        alice.create_repo("alice/one")
        alice.create_repo("alice/two")
        error = _refusal(lambda: alice.create_repo("alice/three"))
        assert error.response.status_code == 429 and "Retry-After" in error.response.headers
        assert "rate limit for repository creation (2 per hour)" in str(error)
        assert not alice.repo_exists("alice/three")
        HfApi(endpoint=hub.endpoint, token="hf_bob").create_repo("bob/one")  # per account


def test_a_commit_of_more_files_than_recommended_is_logged_as_a_warning(tmp_path, caplog):
    with _hub(tmp_path, "commit_files_warning=3") as hub:
        api = HfApi(endpoint=hub.endpoint, token="hf_admin")
        api.create_repo("me/many")
        with caplog.at_level(logging.WARNING, logger="hubkit.localhub.accounts.limits"):
            adds = [CommitOperationAdd(f"f{n}.txt", f"{n}".encode()) for n in range(3)]
            api.create_commit("me/many", adds, commit_message="three")
            assert not caplog.records
            adds = [CommitOperationAdd(f"g{n}.txt", f"{n}".encode()) for n in range(4)]
            api.create_commit("me/many", adds, commit_message="four")  # accepted, as the Hub accepts it
        assert "adds 4 files: the Hub recommends at most 3" in caplog.text


def test_limits_off_add_no_header_and_refuse_nothing(tmp_path):
    settings = HubSettings(token="hf_admin", plan="free", limits=HubLimits.off())
    with LocalHub(tmp_path / "hub", settings=settings) as hub:
        api = HfApi(endpoint=hub.endpoint, token="hf_admin")
        api.create_repo("me/demo", repo_type="space", space_sdk="gradio")
        answer = get_session().get(
            f"{hub.endpoint}/api/whoami-v2", headers={"Authorization": "Bearer hf_admin"}
        )
        assert "RateLimit" not in answer.headers


def test_serve_takes_the_limits_as_flags_and_refuses_a_bad_one_in_one_line(tmp_path):
    bad = subprocess.run(
        [str(BIN / "hubkit"), "hub", "serve", "--root", str(tmp_path / "x"), "--limit", "commits=3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode != 0 and not (tmp_path / "x").exists()
    assert [line for line in bad.stderr.splitlines() if line.strip()] == [
        "Error: Unknown limit 'commits' in 'commits=3': see `hubkit hub serve --help`."
    ]
    process, endpoint = serve_hub(
        tmp_path / "hub", "--plan", "free", "--limit", "commits_per_repo=1,free.api_calls=50"
    )
    try:
        api = HfApi(endpoint=endpoint, token="any")
        api.create_repo("hubkit-user/one")
        api.upload_file(path_or_fileobj=b"1", path_in_repo="n.txt", repo_id="hubkit-user/one")
        error = _refusal(
            lambda: api.upload_file(path_or_fileobj=b"2", path_in_repo="n.txt", repo_id="hubkit-user/one")
        )
        assert error.response.status_code == 429 and "(1 per hour)" in str(error)
        assert error.response.headers["RateLimit-Policy"] == '"fixed window";"api";q=50;w=300'
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_a_users_file_with_an_unknown_plan_is_refused_in_one_line(tmp_path):
    users = tmp_path / "users.toml"
    users.write_text('[users.alice]\ntokens = ["hf_alice"]\nplan = "gold"\n')
    with pytest.raises(ValueError) as caught:
        load_users(users)
    assert str(caught.value) == (
        f"{users}: [users.alice]: plan must be one of free, pro, team, enterprise; got 'gold'."
    )
