"""The local Hub with faults (`tests/support/faults.py`, through its hooks): each fault strikes as its spec
says, is counted, and leaves storage whole.

How huggingface_hub 2.4 meets each fault (its `utils/_http.py` `http_backoff`: up to 5 retries on 408,
429, 500, 502, 503, 504 and on network errors, sleeping 1, 2, 4, 8, 8 s, or `Retry-After` + 1 s on a
429): LFS batch, PUT and verify go through it, so a few 503s, 429s or cut uploads are retried
unseen; the commit POST of `create_commit` does not (a 500 there reaches the caller at once).
"""

from __future__ import annotations

import hashlib
import http.client
import os
import signal
import subprocess
import threading
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest
from fixtures_hub import serve_faulty, serve_hub
from helpers import assert_hub_fsck_clean
from huggingface_hub import HfApi, get_session, hf_hub_download
from huggingface_hub.errors import HfHubHTTPError

from hubkit.localhub import LocalHub
from hubkit.localhub.git.store import blob_sha
from tests.support.faults import FaultPlan, Faults


def _hub(tmp_path: Path, spec: str) -> tuple[LocalHub, Faults]:
    """A Hub in this process with these faults, and the faults (their counters)."""
    faults = Faults(FaultPlan.parse(spec))
    return LocalHub(tmp_path / "hub", hooks=faults), faults


def _statuses(hub: LocalHub, method: str, fragment: str) -> list[int]:
    return [status for m, path, status in hub.request_log if m == method and fragment in path]


def _lfs_objects(root: Path) -> list[Path]:
    return sorted(p for p in (root / "repos").glob("*/*/*.git/lfs/objects/*/*/*"))


def _lfs_tmp(root: Path) -> list[Path]:
    return sorted(p for p in (root / "repos").glob("*/*/*.git/lfs/tmp/*"))


def test_spec_parsing_and_errors():
    plan = FaultPlan.parse("lfs_503=0.3, lfs_429=1:2,commit_500_after_lfs=1,seed=7,retry_after=3")
    assert plan.seed == 7 and plan.retry_after == 3
    assert plan.rules["lfs_503"].probability == 0.3 and plan.rules["lfs_503"].limit is None
    assert plan.rules["lfs_429"].limit == 2
    assert not plan.crashes and FaultPlan.parse("crash_mid_commit=1:1").crashes
    for bad, words in [
        ("lfs_504=1", "unknown fault"),
        ("lfs_503=2", "from 0 to 1"),
        ("lfs_503", "name=value"),
        ("seed=x", "seed=x"),
        ("retry_after=-1", "0 or more"),
    ]:
        with pytest.raises(ValueError, match=words):
            FaultPlan.parse(bad)


def test_draws_are_reproducible_per_seed_and_independent_of_other_faults():
    def sequence(spec: str, interleave: bool) -> list[bool]:
        faults = Faults(FaultPlan.parse(spec))
        drawn = []
        for _ in range(200):
            if interleave:
                faults.draw("lfs_429")
            drawn.append(faults.draw("lfs_503"))
        return drawn

    first = sequence("lfs_503=0.3,lfs_429=0.5,seed=7", interleave=False)
    assert first == sequence("lfs_503=0.3,lfs_429=0.5,seed=7", interleave=True)
    assert first != sequence("lfs_503=0.3,seed=8", interleave=False)
    assert 30 <= sum(first) <= 90  # 0.3 of 200, within a wide margin
    capped = Faults(FaultPlan.parse("lfs_503=1:2"))
    assert [capped.draw("lfs_503") for _ in range(5)] == [True, True, False, False, False]
    assert capped.stats()["eligible"]["lfs_503"] == 5 and capped.injected["lfs_503"] == 2


def test_an_empty_plan_injects_none(tmp_path):
    hub, faults = _hub(tmp_path, "")
    with hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        api.create_repo("me/calm")
        api.upload_file(path_or_fileobj=os.urandom(30_000), path_in_repo="w.bin", repo_id="me/calm")
        assert not [r for r in hub.request_log if r[2] in (0, 429, 500, 503)]
    stats = faults.stats()
    assert stats["rules"] == {} and set(stats["injected"].values()) == {0}
    assert stats["eligible"]["lfs_503"] >= 1  # the upload was eligible, and passed
    assert stats["eligible"]["commit_500_after_lfs"] == 1  # so was its commit


UPLOADS = {"xet": ("POST", "/xet/v1/xorbs/"), "lfs": ("PUT", "/lfs-upload/")}


@pytest.mark.parametrize("protocol", ["xet", "lfs"])
@pytest.mark.parametrize("spec", ["lfs_503=1:1", "lfs_429=1:1,retry_after=0", "drop_mid_upload=1:1"])
def test_the_client_retries_an_upload_fault_and_the_file_arrives_whole(tmp_path, spec, protocol, monkeypatch):
    """The upload faults strike a xorb upload as they strike an LFS PUT; hf_xet and huggingface_hub retry."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", protocol == "lfs")
    data = os.urandom(300_000)
    hub, faults = _hub(tmp_path, spec)
    with hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        api.create_repo("me/flaky")
        api.upload_file(path_or_fileobj=data, path_in_repo="w.safetensors", repo_id="me/flaky")
        name = spec.split("=")[0]
        assert faults.injected[name] == 1
        first = {"lfs_503": 503, "lfs_429": 429, "drop_mid_upload": 0}[name]
        assert _statuses(hub, *UPLOADS[protocol]) == [first, 200]
        path = hf_hub_download("me/flaky", "w.safetensors", endpoint=hub.endpoint, cache_dir=tmp_path / "c")
        assert Path(path).read_bytes() == data
        assert len(api.list_repo_commits("me/flaky")) == 2
    assert _lfs_tmp(tmp_path / "hub") == []


def _batch_href(endpoint: str, repo_id: str, data: bytes) -> str | None:
    response = get_session().post(
        f"{endpoint}/{repo_id}.git/info/lfs/objects/batch",
        json={
            "operation": "upload",
            "transfers": ["basic"],
            "objects": [{"oid": hashlib.sha256(data).hexdigest(), "size": len(data)}],
        },
        headers={"authorization": "Bearer any"},  # an open Hub writes with any token, not without one
    )
    actions = response.json()["objects"][0].get("actions")
    return actions["upload"]["href"] if actions else None


def test_429_carries_retry_after_and_503_stores_nothing(tmp_path):
    data = os.urandom(5000)
    hub, faults = _hub(tmp_path, "lfs_429=1:1,lfs_503=1,retry_after=7")
    with hub:
        HfApi(endpoint=hub.endpoint, token="any").create_repo("me/raw")
        href = _batch_href(hub.endpoint, "me/raw", data)
        first = get_session().put(href, content=data)
        assert first.status_code == 503 and "Fault injected" in first.json()["error"]
        second = get_session().put(href, content=data)
        assert second.status_code == 503
        assert faults.injected == {**faults.injected, "lfs_503": 2, "lfs_429": 0}
    hub, _ = _hub(tmp_path, "lfs_429=1:1,retry_after=7")
    with hub:
        href = _batch_href(hub.endpoint, "me/raw", data)
        limited = get_session().put(href, content=data)
        assert (limited.status_code, limited.headers["retry-after"]) == (429, "7")
        assert _batch_href(hub.endpoint, "me/raw", data) is not None  # still not stored
        assert get_session().put(href, content=data).status_code == 200  # the cap was 1
        assert _batch_href(hub.endpoint, "me/raw", data) is None


def test_a_dropped_upload_gets_no_answer_and_stores_nothing(tmp_path):
    data = os.urandom(200_000)
    hub, faults = _hub(tmp_path, "drop_mid_upload=1")
    with hub:
        HfApi(endpoint=hub.endpoint, token="any").create_repo("me/drop")
        href = urlsplit(_batch_href(hub.endpoint, "me/drop", data))
        connection = http.client.HTTPConnection(href.hostname, href.port, timeout=10)
        with pytest.raises((ConnectionError, http.client.RemoteDisconnected)):
            connection.request("PUT", f"{href.path}?{href.query}", body=data)
            connection.getresponse()
        connection.close()
        assert faults.injected["drop_mid_upload"] == 1
        assert _statuses(hub, "PUT", "/lfs-upload/") == [0]
        assert _batch_href(hub.endpoint, "me/drop", data) is not None
    assert _lfs_objects(tmp_path / "hub") == [] and _lfs_tmp(tmp_path / "hub") == []


def test_commit_500_after_lfs_applies_nothing_and_a_rerun_sends_no_bytes_again(tmp_path):
    data = os.urandom(100_000)
    hub, faults = _hub(tmp_path, "commit_500_after_lfs=1:1")
    with hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        api.create_repo("me/c500")
        api.upload_file(path_or_fileobj=b"small", path_in_repo="notes.txt", repo_id="me/c500")
        head = api.model_info("me/c500").sha
        assert faults.stats()["eligible"]["commit_500_after_lfs"] == 0  # no LFS file: not eligible
        with pytest.raises(HfHubHTTPError) as caught:
            api.upload_file(path_or_fileobj=data, path_in_repo="w.safetensors", repo_id="me/c500")
        assert caught.value.response.status_code == 500
        assert api.model_info("me/c500").sha == head
        assert _lfs_objects(tmp_path / "hub") != []  # the object arrived; the commit did not
        puts = len(_statuses(hub, "PUT", "/lfs-upload/"))
        api.upload_file(path_or_fileobj=data, path_in_repo="w.safetensors", repo_id="me/c500")
        assert len(_statuses(hub, "PUT", "/lfs-upload/")) == puts  # not sent again
        assert [c.title for c in api.list_repo_commits("me/c500")][:2] == [
            "Upload w.safetensors with huggingface_hub",
            "Upload notes.txt with huggingface_hub",
        ]
        assert faults.injected["commit_500_after_lfs"] == 1


def test_crash_faults_are_refused_in_a_shared_process(tmp_path):
    with pytest.raises(ValueError, match=r"serve_faulty\.py"):
        _hub(tmp_path, "crash_mid_commit=1")


@pytest.mark.slow
def test_crash_mid_commit_then_restart_leaves_the_last_commit_and_takes_the_same_commit_again(
    tmp_path, monkeypatch
):
    """A large upload's commit (an LFS file and 100 small ones) is killed after its objects are written
    and before its branch moves; whatever else a kill can leave (git lock files) is planted too.
    (upload_folder's Xet pipeline then retries the commit in ever smaller parts, 23 s of the client's
    waits each: they are skipped.)"""
    import httpx2
    import huggingface_hub.utils._http as client_http

    monkeypatch.setattr(client_http, "time", SimpleNamespace(sleep=lambda _seconds: None))

    root, folder = tmp_path / "hub", tmp_path / "upload"
    (folder / "notes").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(os.urandom(12_000_000))
    for i in range(100):
        (folder / "notes" / f"{i}.txt").write_text(f"note {i}\n")
    process, endpoint = serve_faulty(root, "--faults", "crash_mid_commit=1:1")
    try:
        api = HfApi(endpoint=endpoint, token="any")
        api.create_repo("me/crash")
        head = api.model_info("me/crash").sha
        with pytest.raises(httpx2.TransportError):
            api.upload_folder(repo_id="me/crash", folder_path=folder)
        assert process.wait(30) == -signal.SIGKILL
    finally:
        process.kill()
        process.wait(30)
    assert_hub_fsck_clean(root)
    git_dir = root / "repos" / "models" / "me" / "crash.git"
    # As if killed while writing notes/0.txt's blob (only the killed commit names it) and moving main.
    sha = blob_sha(b"note 0\n")
    loose = git_dir / "objects" / sha[:2] / sha[2:]
    loose.unlink()
    for lock in (git_dir / "refs" / "heads" / "main.lock", loose.with_name(loose.name + ".lock")):
        lock.write_text("left by a killed writer\n")

    process, endpoint = serve_hub(root)
    try:
        api = HfApi(endpoint=endpoint, token="any")
        assert api.model_info("me/crash").sha == head
        api.upload_folder(repo_id="me/crash", folder_path=folder)
        assert len(api.list_repo_commits("me/crash")) == 2
        path = hf_hub_download("me/crash", "model.safetensors", endpoint=endpoint, cache_dir=tmp_path / "c")
        assert Path(path).read_bytes() == (folder / "model.safetensors").read_bytes()
        assert len(api.list_repo_files("me/crash")) == 102
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    assert_hub_fsck_clean(root)


@pytest.mark.slow
def test_a_server_killed_mid_upload_and_restarted_on_its_port_lets_the_client_retry_through(
    tmp_path, classic_lfs
):
    """The server dies halfway through the PUT; a restart on the same port (and root, hence the same
    URL signing key) is in time for the client's backoff, and the upload completes. (Through Xet, whose
    retries the session shortens, hubkit's own retries carry a push through: tests/publish/test_push_faults.py.)"""
    root, data = tmp_path / "hub", os.urandom(3_000_000)
    process, endpoint = serve_faulty(root, "--port", "0", "--faults", "crash_mid_upload=1:1")
    port = endpoint.rsplit(":", 1)[1]
    restarted: list[subprocess.Popen] = []

    def restart_when_dead() -> None:
        process.wait(60)
        restarted.append(serve_hub(root, "--port", port)[0])

    watcher = threading.Thread(target=restart_when_dead)
    watcher.start()
    try:
        api = HfApi(endpoint=endpoint, token="any")
        api.create_repo("me/killed")
        api.upload_file(path_or_fileobj=data, path_in_repo="w.safetensors", repo_id="me/killed")
        watcher.join(60)
        assert process.returncode == -signal.SIGKILL
        assert len(api.list_repo_commits("me/killed")) == 2
        path = hf_hub_download("me/killed", "w.safetensors", endpoint=endpoint, cache_dir=tmp_path / "c")
        assert Path(path).read_bytes() == data
        assert len(_lfs_objects(root)) == 1 and _lfs_tmp(root) == []
    finally:
        process.kill()
        watcher.join(60)
        for p in restarted:
            p.send_signal(signal.SIGTERM)
            p.wait(30)
    assert_hub_fsck_clean(root)
