"""Every large file has a Xet hash, however it was uploaded: one sent through the classic LFS API is listed
and resolved with the hash xet-core gives its bytes, and the client then downloads it through Xet, as from
huggingface.co."""

from __future__ import annotations

import os
from pathlib import Path

import hf_xet
import httpx
import pytest
from huggingface_hub import constants, hf_hub_download

LFS_BATCH = "/info/lfs/objects/batch"


def _paths(hub, start: int, method: str, fragment: str) -> list[str]:
    return [
        p for m, p, status in hub.request_log[start:] if m == method and fragment in p and 200 <= status < 300
    ]


def test_a_classic_lfs_upload_gets_a_xet_hash_and_downloads_through_xet(
    local_hub, hub_api, new_repo_id, tmp_path, monkeypatch: pytest.MonkeyPatch
):
    hub_api.create_repo(new_repo_id)
    weights = tmp_path / "w.bin"
    weights.write_bytes(os.urandom(300_000) + bytes(200_000))
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    start = len(local_hub.request_log)
    hub_api.upload_file(path_or_fileobj=weights, path_in_repo="w.bin", repo_id=new_repo_id)
    assert _paths(local_hub, start, "POST", LFS_BATCH)  # sent through classic LFS
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", False)

    [expected] = hf_xet.hash_files([str(weights)])  # what a Xet client computes for these bytes
    [listed] = [f for f in hub_api.list_repo_tree(new_repo_id) if f.path == "w.bin"]
    [info] = hub_api.get_paths_info(new_repo_id, ["w.bin"])
    assert listed.xet_hash == info.xet_hash == expected.hash
    head = httpx.head(
        f"{local_hub.endpoint}/{new_repo_id}/resolve/main/w.bin",
        headers={"Authorization": f"Bearer {local_hub.token}"},
    )
    assert head.headers["X-Xet-Hash"] == expected.hash and 'rel="xet-auth"' in head.headers["Link"]

    start = len(local_hub.request_log)
    path = hf_hub_download(new_repo_id, "w.bin", cache_dir=tmp_path / "cache")
    assert Path(path).read_bytes() == weights.read_bytes()
    assert _paths(local_hub, start, "GET", "/xet/v1/reconstructions/")
    assert not _paths(local_hub, start, "GET", "/lfs-objects/")  # not the whole file over plain HTTP
