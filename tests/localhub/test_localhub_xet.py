"""The local Hub's Xet: the real huggingface_hub + hf_xet client uploads and downloads through it with no
setting changed, a client with `HF_HUB_DISABLE_XET=1` still takes classic LFS, and every xorb, shard and
token a client sends is checked before anything is stored.

The refusal tests build xorbs and shards by hand (`xet_wire.py`). What a client sharing the Hub with
others may try (another user's bytes, another file's sha256, memory) is in test_localhub_xet_hostile.py.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from helpers import team_settings, uploaded
from huggingface_hub import hf_hub_download, snapshot_download
from xet_wire import Cas, build_xorb, file_hash, file_shard

from hubkit.localhub import HubSettings, LocalHub
from hubkit.localhub.xet.hashes import chunk_hash, hash_to_hex, verification_hash
from hubkit.localhub.xet.xorb import MAX_XORB_SIZE

LFS_BATCH = "/info/lfs/objects/batch"


def _paths(hub: LocalHub, start: int, method: str, fragment: str) -> list[str]:
    return [
        path
        for m, path, status in hub.request_log[start:]
        if m == method and fragment in path and 200 <= status < 300
    ]


def test_the_client_uploads_and_downloads_through_xet_with_no_setting(
    local_hub, hub_api, new_repo_id, tmp_path
):
    hub_api.create_repo(new_repo_id)
    weights = os.urandom(400_000) + bytes(300_000)  # several chunks, one of them compressible
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.bin").write_bytes(os.urandom(150_000))
    (folder / "sub" / "b.safetensors").write_bytes(os.urandom(90_000))
    start, uploads = len(local_hub.request_log), len(local_hub.uploads)

    hub_api.upload_file(path_or_fileobj=weights, path_in_repo="w.bin", repo_id=new_repo_id)
    hub_api.upload_folder(folder_path=folder, repo_id=new_repo_id)

    assert _paths(local_hub, start, "POST", "/xet/v1/xorbs/default/")
    assert len(_paths(local_hub, start, "POST", "/xet/v2/shards")) == 2
    assert _paths(local_hub, start, "POST", LFS_BATCH) == [] and _paths(local_hub, start, "PUT", "/") == []
    assert {p for _, _, p in local_hub.uploads[uploads:]} == {"xet"} and len(
        uploaded(local_hub, uploads)
    ) == 3

    start = len(local_hub.request_log)
    path = hf_hub_download(new_repo_id, "w.bin", cache_dir=tmp_path / "cache")
    snapshot = Path(snapshot_download(new_repo_id, cache_dir=tmp_path / "snapshot"))
    assert Path(path).read_bytes() == weights
    assert (snapshot / "sub" / "b.safetensors").read_bytes() == (
        folder / "sub" / "b.safetensors"
    ).read_bytes()
    assert (snapshot / "a.bin").read_bytes() == (folder / "a.bin").read_bytes()
    assert _paths(local_hub, start, "GET", "/xet-read-token/")
    assert len(set(_paths(local_hub, start, "GET", "/xet/v1/reconstructions/"))) == 3
    assert _paths(local_hub, start, "GET", "/xet/xorb-data/")
    assert not [p for p in _paths(local_hub, start, "GET", "/lfs-objects/")]  # no whole-file download
    tree = {f.path: f for f in hub_api.list_repo_tree(new_repo_id, recursive=True)}
    assert len(tree["w.bin"].xet_hash) == 64  # the listing names the Xet file too


def test_a_file_repeating_one_chunk_downloads_whole(local_hub, hub_api, new_repo_id, tmp_path):
    """Every chunk the same (a padded file): one xorb of one chunk, referenced by ~100 terms, which the
    client joins; each fetch range the Hub hands out must hold the terms it joins."""
    hub_api.create_repo(new_repo_id)
    data = b" " * 15_000_000 + b"{}"
    hub_api.upload_file(path_or_fileobj=data, path_in_repo="padded.bin", repo_id=new_repo_id)
    assert Path(hf_hub_download(new_repo_id, "padded.bin", cache_dir=tmp_path / "c")).read_bytes() == data
    part = httpx.get(
        f"{local_hub.endpoint}/{new_repo_id}/resolve/main/padded.bin",
        headers={"Range": "bytes=14999990-15000001", "Authorization": f"Bearer {local_hub.token}"},
        follow_redirects=True,
    )
    assert part.content == data[14_999_990:]


_CLASSIC_CLIENT = """
import os, sys
from pathlib import Path
from huggingface_hub import HfApi, hf_hub_download
api = HfApi()
repo, folder = sys.argv[1], Path(sys.argv[2])
api.create_repo(repo)
api.upload_file(path_or_fileobj=str(folder / "lfs.bin"), path_in_repo="lfs.bin", repo_id=repo)
for name in ("lfs.bin", sys.argv[3]):
    source = sys.argv[4] if name != "lfs.bin" else repo
    data = Path(hf_hub_download(source, name, cache_dir=folder / "cache")).read_bytes()
    assert data == (folder / name).read_bytes(), name
"""


def test_a_client_with_xet_disabled_takes_lfs_and_reads_xet_uploads(
    local_hub, hub_api, make_repo_id, tmp_path
):
    xet_repo, lfs_repo = make_repo_id(), make_repo_id()
    hub_api.create_repo(xet_repo)
    (tmp_path / "xet.bin").write_bytes(os.urandom(200_000))
    (tmp_path / "lfs.bin").write_bytes(os.urandom(200_000))
    hub_api.upload_file(path_or_fileobj=str(tmp_path / "xet.bin"), path_in_repo="xet.bin", repo_id=xet_repo)
    start, uploaded = len(local_hub.request_log), len(local_hub.uploads)

    env = {**os.environ, "HF_HUB_DISABLE_XET": "1"}
    command = [sys.executable, "-c", _CLASSIC_CLIENT, lfs_repo, str(tmp_path), "xet.bin", xet_repo]
    subprocess.run(command, env=env, check=True, timeout=300)

    assert _paths(local_hub, start, "POST", LFS_BATCH) and _paths(local_hub, start, "PUT", "/lfs-upload/")
    # The client asked for no Xet token; the CAS requests in the log are the Hub's own, giving lfs.bin
    # its Xet hash (test_localhub_xet_lfs.py).
    assert not [p for _, p, _ in local_hub.request_log[start:] if "/xet-" in p]
    # lfs.bin came through LFS (the Hub's own registration of it in Xet follows).
    assert next(kind for repo, _, kind in local_hub.uploads[uploaded:] if repo == lfs_repo) == "lfs"


_UPLOAD = """
import sys
from huggingface_hub import HfApi
api = HfApi()
api.create_repo(sys.argv[1], exist_ok=True)
api.upload_file(path_or_fileobj=sys.argv[2], path_in_repo="w.bin", repo_id=sys.argv[1])
"""


def test_a_client_with_an_empty_cache_finds_a_whole_upload_through_the_global_dedup_api(tmp_path):
    """As huggingface.co, a dedup hit answers with every xorb of the upload the chunk arrived in: one
    queried chunk tells the client all of a 150 MB file, not just the 64 MB around it. (A Hub of its own:
    the session's bounds its bodies for other tests.)"""
    weights = tmp_path / "w.bin"
    weights.write_bytes(os.urandom(150_000_000))  # three xorbs
    with LocalHub(tmp_path / "hub") as hub:

        def upload(repo_id: str, cache: str) -> None:
            env = {
                **os.environ,
                "HF_ENDPOINT": hub.endpoint,
                "HF_TOKEN": "hf_any_token_of_an_open_hub",
                "HF_HOME": str(tmp_path / cache),
                "HF_XET_CACHE": str(tmp_path / cache / "xet"),
                "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            }
            command = [sys.executable, "-c", _UPLOAD, repo_id, str(weights)]
            subprocess.run(command, env=env, check=True, timeout=300)

        upload("alice/first", "one-machine")
        assert len(_paths(hub, 0, "POST", "/xet/v1/xorbs/default/")) >= 3
        start = len(hub.request_log)
        upload("alice/second", "another-machine")
        assert _paths(hub, start, "GET", "/xet/v1/chunks/")  # a hit
        assert _paths(hub, start, "POST", "/xet/v1/xorbs/") == []  # nothing sent again
        sha256 = hashlib.sha256(weights.read_bytes()).hexdigest()
        assert hub.uploads[-1][1:] == (sha256, "xet") and hub.uploads[-1][0].endswith("/second")


# --- what a hostile client sends ---------------------------------------------------------------------


def _stored(hub: LocalHub) -> list[str]:
    return sorted(str(p.relative_to(hub.root)) for p in (hub.root / "xet").rglob("*") if p.is_file())


def _lfs_objects(hub: LocalHub) -> list[Path]:
    return [p for p in (hub.root / "repos").rglob("lfs/objects/*/*/*") if p.is_file()]


@pytest.fixture
def own_hub(tmp_path):
    with LocalHub(tmp_path / "hub") as hub:
        httpx.post(
            f"{hub.endpoint}/api/repos/create",
            json={"name": "target"},
            headers={"Authorization": "Bearer any"},
        )
        yield hub


def test_a_hand_built_upload_registers_and_reads_back(own_hub):
    cas = Cas(own_hub, "hubkit-user/target")
    chunks = [os.urandom(9000), b"z" * 20000]
    xorb, body = build_xorb(chunks)
    assert cas.post(f"/v1/xorbs/default/{xorb}", body).json() == {"was_inserted": True}
    assert cas.post(f"/v1/xorbs/default/{xorb}", body).json() == {"was_inserted": False}
    assert cas.post("/v1/shards", file_shard(xorb, chunks)).json() == {"result": 1}
    # /v2 (hf_xet's first try) answers in progress frames, the last one `result`.
    frames = cas.post("/v2/shards", file_shard(xorb, chunks)).text.splitlines()
    assert json.loads(frames[-1]) == {"type": "result"}
    file_id = hash_to_hex(file_hash([(chunk_hash(c), len(c)) for c in chunks]))
    plan = cas.get(f"/v1/reconstructions/{file_id}").json()
    fetch = plan["fetch_info"][xorb][0]
    span = fetch["url_range"]
    data = httpx.get(fetch["url"], headers={"Range": f"bytes={span['start']}-{span['end']}"}).content
    assert data == body and plan["terms"][0]["unpacked_length"] == 29000
    ranged = cas.get(f"/v1/reconstructions/{file_id}", Range="bytes=9100-9200").json()
    assert ranged["terms"][0]["range"] == {"start": 1, "end": 2} and ranged["offset_into_first_range"] == 100
    assert [o.name for o in _lfs_objects(own_hub)] == [hashlib.sha256(b"".join(chunks)).hexdigest()]


def test_tampered_xorbs_shards_and_tokens_are_refused_and_nothing_is_kept(own_hub):
    cas = Cas(own_hub, "hubkit-user/target")
    chunks = [os.urandom(9000), os.urandom(12000)]
    xorb, body = build_xorb(chunks)
    tampered = body[:-1] + bytes([body[-1] ^ 1])
    answer = cas.post(f"/v1/xorbs/default/{xorb}", tampered)
    assert answer.status_code == 400 and "hashes to" in answer.json()["error"]
    # Under its own hash, another chunk's bytes: refused the same way.
    other, other_body = build_xorb([os.urandom(5000)])
    assert cas.post(f"/v1/xorbs/default/{xorb}", other_body).status_code == 400
    assert cas.post(f"/v1/xorbs/default/{other}", other_body[:-3]).status_code == 400  # cut short
    assert _stored(own_hub) == []

    reader = Cas(own_hub, "hubkit-user/target", scope="read")
    assert reader.post(f"/v1/xorbs/default/{xorb}", body).status_code == 403
    assert reader.post("/v1/shards", file_shard(xorb, chunks)).status_code == 403
    assert cas.post(f"/v1/xorbs/default/{xorb}", body, token=cas.token[:-2] + "00").status_code == 401
    assert _stored(own_hub) == []

    # A shard naming a xorb never uploaded.
    answer = cas.post("/v1/shards", file_shard(xorb, chunks))
    assert answer.status_code == 400 and "never uploaded" in answer.json()["error"]

    assert cas.post(f"/v1/xorbs/default/{xorb}", body).status_code == 200
    xorb_files = _stored(own_hub)
    wrong_file = cas.post("/v1/shards", file_shard(xorb, chunks, file_id=bytes(31) + b"\x01"))
    assert wrong_file.status_code == 400 and "does not hash" in wrong_file.json()["error"]
    wrong_sha = cas.post("/v1/shards", file_shard(xorb, chunks, sha256=hashlib.sha256(b"other").digest()))
    assert wrong_sha.status_code == 400 and "does not match its oid" in wrong_sha.json()["error"]
    proof = file_shard(xorb, chunks)
    forged = proof.replace(verification_hash([chunk_hash(c) for c in chunks]), bytes(32))
    assert cas.post("/v1/shards", forged).status_code == 400
    assert cas.post("/v2/shards", forged).status_code == 400  # a status, not a frame: nothing was streamed
    assert _stored(own_hub) == xorb_files and _lfs_objects(own_hub) == []


def test_a_xorb_of_64_mib_of_chunks_is_taken_with_its_headers(own_hub):
    """xet-core cuts a xorb at 64 MiB of chunk bytes, then adds a header to each chunk: a full xorb of
    incompressible bytes is a little over 64 MiB, and the Hub must take it (a loaded machine made the
    real client send one)."""
    chunks = [os.urandom(128 * 1024) for _ in range(512)]  # 64 MiB, the client's largest chunks
    xorb, body = build_xorb(chunks)
    assert len(body) > 64 * 1024 * 1024
    cas = Cas(own_hub, "hubkit-user/target")
    assert cas.post(f"/v1/xorbs/default/{xorb}", body).json() == {"was_inserted": True}


def test_an_oversized_xorb_is_refused_before_it_is_read(own_hub):
    cas = Cas(own_hub, "hubkit-user/target")
    url = urlsplit(cas.url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    connection.putrequest("POST", f"{url.path}/v1/xorbs/default/{'0' * 64}")
    connection.putheader("Authorization", f"Bearer {cas.token}")
    connection.putheader("Content-Length", str(MAX_XORB_SIZE + 1))
    connection.endheaders()
    answer = connection.getresponse()
    assert answer.status == 413 and "at most" in json.loads(answer.read())["error"]
    assert _stored(own_hub) == []


def test_xet_tokens_expire(tmp_path):
    with LocalHub(tmp_path / "hub", settings=HubSettings(signed_url_ttl=1)) as hub:
        httpx.post(
            f"{hub.endpoint}/api/repos/create", json={"name": "t"}, headers={"Authorization": "Bearer any"}
        )
        cas = Cas(hub, "hubkit-user/t")
        xorb, body = build_xorb([os.urandom(1000)])
        time.sleep(2.1)
        answer = cas.post(f"/v1/xorbs/default/{xorb}", body)
        assert answer.status_code == 401 and "expired" in answer.json()["error"]
        assert _stored(hub) == []


def test_a_reconstruction_never_serves_another_repos_private_file(tmp_path):
    with LocalHub(tmp_path / "hub", settings=team_settings(tmp_path)) as hub:
        for token, name, private in (
            ("hf_alice_write", "secretive", True),
            ("hf_carol_write", "open", False),
        ):
            created = httpx.post(
                f"{hub.endpoint}/api/repos/create",
                json={"name": name, "private": private},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert created.status_code == 200, created.text
        alice = Cas(hub, "alice/secretive", token="hf_alice_write")
        chunks = [os.urandom(7000)]
        xorb, body = build_xorb(chunks)
        assert alice.post(f"/v1/xorbs/default/{xorb}", body).status_code == 200
        assert alice.post("/v1/shards", file_shard(xorb, chunks)).status_code == 200
        file_id = hash_to_hex(file_hash([(chunk_hash(chunks[0]), 7000)]))
        assert alice.get(f"/v1/reconstructions/{file_id}").status_code == 200

        carol = Cas(hub, "carol/open", scope="read", token="hf_carol_write")
        assert carol.get(f"/v1/reconstructions/{file_id}").status_code == 404
        with pytest.raises(httpx.HTTPStatusError):  # nor a token for the private repo
            Cas(hub, "alice/secretive", scope="read", token="hf_carol_write")


def test_what_hf_xet_raises_when_it_gives_up_is_a_hub_failure_by_its_status():
    """hf_xet raises a builtin ConnectionError in its own words; hubkit reads the status from them (a real
    one comes from tests/publish/test_push_faults.py's 503s)."""
    from hubkit.errors import AuthError, HubRefusedError, HubUnreachableError
    from hubkit.hub.failures import hub_errors
    from hubkit.hub.retry import transient_cause

    words = (
        "Server error: Request error: HTTP status server error (503 Service Unavailable), domain: http://h/x"
    )
    assert transient_cause(ConnectionError(words)) is not None
    refused = ConnectionError(
        "Network error: Request error: HTTP status client error (400 Bad Request), domain: x"
    )
    assert transient_cause(refused) is None
    cut = ConnectionError(
        "Network error: Request middleware error: error sending request for url (http://h/x)"
    )
    for error, kind in ((refused, HubRefusedError), (cut, HubUnreachableError)):
        with pytest.raises(kind), hub_errors("me/x", "http://h"):
            raise error
    with pytest.raises(AuthError), hub_errors("me/x", "http://h"):
        raise ConnectionError(
            "Auth error: Request error: HTTP status client error (401 Unauthorized), domain: x"
        )


def test_hubkit_push_peft_and_transformers_go_through_xet(local_hub, tiny_qwen3, new_repo_id, tmp_path):
    """`hubkit push` uploads through Xet; transformers and PEFT load the base and a step through it."""
    import torch
    from helpers import push_adapters
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from tests.support.runs import TINY_SHAPES, make_run

    run_dir = make_run(tmp_path / "runs", (1,), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    start = len(local_hub.request_log)
    assert push_adapters(run_dir, new_repo_id, local_hub.endpoint) == 0
    assert _paths(local_hub, start, "POST", "/xet/v2/shards") and not _paths(
        local_hub, start, "POST", LFS_BATCH
    )

    start = len(local_hub.request_log)
    cache = str(tmp_path / "cache")
    base = AutoModelForCausalLM.from_pretrained(tiny_qwen3.repo_id, cache_dir=cache, dtype=torch.float32)
    model = PeftModel.from_pretrained(
        base, new_repo_id, subfolder="checkpoints/global_step_1", cache_dir=cache
    )
    assert model.peft_config["default"].r > 0
    assert len(set(_paths(local_hub, start, "GET", "/xet/v1/reconstructions/"))) >= 2  # base weights, adapter
    assert not _paths(local_hub, start, "POST", LFS_BATCH) and not _paths(
        local_hub, start, "GET", "/lfs-objects/"
    )
