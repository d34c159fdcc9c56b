"""hubkit's classic-LFS upload (`hubkit.hub.lfs_upload`) against the local Hub, with the real client:
the object arrives whole, in bounded pieces, and an object the Hub holds is not sent again."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, hf_hub_download

import hubkit.hub.lfs_upload as lfs_upload
from hubkit.errors import PublishError
from hubkit.hub.hashing import FileHashes
from hubkit.hub.lfs_upload import classic_lfs, send_lfs_object
from hubkit.publish.commit import hand_in_sha256


def _lfs_puts(hub) -> list[str]:
    return [path for method, path, _ in hub.request_log if method == "PUT" and "/lfs-upload/" in path]


def test_an_object_is_sent_whole_in_bounded_pieces_and_not_again_once_the_hub_holds_it(
    tmp_path, local_hub, hub_api, new_repo_id, monkeypatch
):
    assert classic_lfs()  # the local Hub speaks classic LFS: this is the transfer its pushes use
    monkeypatch.setattr(lfs_upload, "PIECE_BYTES", 1024 * 1024)
    pieces: list[int] = []
    iterate = lfs_upload._Pieces.__iter__

    def counted(self):
        for piece in iterate(self):
            pieces.append(len(piece))
            yield piece

    monkeypatch.setattr(lfs_upload._Pieces, "__iter__", counted)
    data = os.urandom(3 * 1024 * 1024 + 12345)
    path = tmp_path / "adapter_model.safetensors"
    path.write_bytes(data)
    addition = CommitOperationAdd(path_in_repo="adapter_model.safetensors", path_or_fileobj=str(path))
    hand_in_sha256(addition, FileHashes(size=len(data), sha256=hashlib.sha256(data).hexdigest()))
    hub_api.create_repo(new_repo_id)
    puts = len(_lfs_puts(local_hub))

    assert send_lfs_object(hub_api, new_repo_id, "model", addition) is True
    assert pieces == [1024 * 1024] * 3 + [12345]
    assert len(_lfs_puts(local_hub)) == puts + 1

    # Invisible until a commit names it; then the repo serves the same bytes.
    assert "adapter_model.safetensors" not in hub_api.list_repo_files(new_repo_id)
    hub_api.create_commit(new_repo_id, operations=[addition], commit_message="add the adapter")
    served = hf_hub_download(new_repo_id, "adapter_model.safetensors", cache_dir=tmp_path / "cache")
    assert Path(served).read_bytes() == data

    assert send_lfs_object(hub_api, new_repo_id, "model", addition) is False
    assert len(_lfs_puts(local_hub)) == puts + 1


@pytest.mark.parametrize("size", [999, 2000], ids=["shrank", "grew"])
def test_a_file_that_changed_size_since_it_was_hashed_is_refused_and_nothing_is_stored(
    size, tmp_path, local_hub, hub_api, new_repo_id
):
    path = tmp_path / "adapter_model.safetensors"
    path.write_bytes(b"a" * 1000)
    sha256 = hashlib.sha256(b"a" * 1000).hexdigest()
    addition = CommitOperationAdd(path_in_repo="adapter_model.safetensors", path_or_fileobj=str(path))
    hand_in_sha256(addition, FileHashes(size=1000, sha256=sha256))
    path.write_bytes(b"b" * size)
    hub_api.create_repo(new_repo_id)
    with pytest.raises(PublishError, match=r"adapter_model\.safetensors changed since it was checked"):
        send_lfs_object(hub_api, new_repo_id, "model", addition)
    path.write_bytes(b"a" * 1000)  # the checked content again: the Hub still lacks the object
    assert send_lfs_object(hub_api, new_repo_id, "model", addition) is True


def test_a_hub_asking_for_parts_gets_them_from_the_clients_own_multipart_upload(tmp_path):
    from huggingface_hub import HfApi

    from hubkit.localhub import HubSettings, LocalHub

    data = os.urandom(1536 * 1024 + 7)
    path = tmp_path / "adapter_model.safetensors"
    path.write_bytes(data)
    addition = CommitOperationAdd(path_in_repo="adapter_model.safetensors", path_or_fileobj=str(path))
    hand_in_sha256(addition, FileHashes(size=len(data), sha256=hashlib.sha256(data).hexdigest()))
    settings = HubSettings(multipart_threshold=1024 * 1024, multipart_chunk_size=512 * 1024)
    with LocalHub(tmp_path / "hub", settings=settings) as hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        api.create_repo("me/parts")
        assert send_lfs_object(api, "me/parts", "model", addition) is True
        assert len([p for m, p, _ in hub.request_log if m == "PUT" and "/part/" in p]) == 4
        api.create_commit("me/parts", operations=[addition], commit_message="add")
        served = hf_hub_download(
            "me/parts", addition.path_in_repo, endpoint=hub.endpoint, cache_dir=tmp_path / "c"
        )
        assert Path(served).read_bytes() == data
