"""What a push reads: each adapter once (checked and hashed together), the client handed those hashes,
and nothing again on a re-push of unchanged checkpoints, whose files are vetted no more (a file changed
since is); hubkit's records in the run are never published."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import huggingface_hub.lfs
import pytest
from huggingface_hub import CommitOperationAdd

import hubkit.adapters.prepare
import hubkit.hub.hashing
from hubkit.errors import PublishError, SecretInFileError
from hubkit.hub.hashing import FileHashes, hash_bytes
from hubkit.publish import PushRequest, push_run
from hubkit.publish.commit import hand_in_sha256
from hubkit.publish.plan import PlannedFile, RepoPlan
from hubkit.safety import kinds
from hubkit.safety.validators import VALIDATORS
from tests.planted import HF_TOKEN
from tests.support.runs import TINY_SHAPES, make_run, write_checkpoint


def _client_never_hashes(*_args: object) -> bytes:
    raise AssertionError("huggingface_hub read a planned file to hash it")


def test_the_client_takes_the_sha256_hubkit_computed_and_reads_nothing_to_hash(tmp_path, monkeypatch):
    """Fails if huggingface_hub stops taking a precomputed sha256 the way `hand_in_sha256` gives it."""
    path = tmp_path / "adapter_model.safetensors"
    path.write_bytes(os.urandom(70_000))
    monkeypatch.setattr(huggingface_hub.lfs, "sha_fileobj", _client_never_hashes)
    operation = CommitOperationAdd(path_in_repo="adapter_model.safetensors", path_or_fileobj=str(path))
    assert not operation.upload_info.is_hashed  # the client would read the file for it
    known = "ab" * 32  # not the content's: proves the client uses what it is handed
    hand_in_sha256(operation, FileHashes(size=70_000, sha256=known))
    assert operation.upload_info.is_hashed and operation.upload_info.sha256.hex() == known
    with pytest.raises(PublishError, match="changed since it was checked"):
        hand_in_sha256(operation, FileHashes(size=69_999, sha256=known))


def _count_calls(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[tuple]:
    """Record each call's first argument (a path) and its inode then (the push's staging folder goes away)."""
    calls: list[tuple] = []
    original = getattr(owner, name)

    def counted(*args: object, **kwargs: object) -> object:
        calls.append((args[0], args[0].stat().st_ino))  # type: ignore[attr-defined]
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_each_adapter_is_read_once_and_an_unchanged_repush_reads_none(
    tmp_path, tiny_qwen3, local_hub, hub_api, new_repo_id, monkeypatch
):
    run_dir = make_run(tmp_path / "runs", (1, 2, 3), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    weights = {run_dir / f"checkpoint-{s}" / "adapter_model.safetensors" for s in (1, 2, 3)}
    inodes = {w.stat().st_ino for w in weights}  # the staging folder links the saved files

    def read_weights(calls: list[tuple]) -> set[int]:
        return {inode for _path, inode in calls} & inodes

    monkeypatch.setattr(huggingface_hub.lfs, "sha_fileobj", _client_never_hashes)
    scans = _count_calls(monkeypatch, hubkit.adapters.prepare, "scan_weights")
    file_reads = _count_calls(monkeypatch, hubkit.hub.hashing, "_read_hashes")
    request = PushRequest(
        run_dir, repo_id=new_repo_id, merged=False, space=False, endpoint=local_hub.endpoint
    )

    (first,) = push_run(request).repos
    assert first.commit_sha is not None
    assert sorted(path for path, _ in scans) == sorted(weights)  # one read each, checks and hash together
    assert not read_weights(file_reads)
    published = {info.path: info for info in hub_api.list_repo_tree(new_repo_id, recursive=True)}
    for step in (1, 2, 3):
        saved = run_dir / f"checkpoint-{step}" / "adapter_model.safetensors"
        remote = published[f"checkpoints/global_step_{step}/adapter_model.safetensors"]
        assert remote.lfs.sha256 == hashlib.sha256(saved.read_bytes()).hexdigest()  # the saved file itself

    # As a new process would (each push owns its hash cache): the run directory's records only.
    scans.clear()
    file_reads.clear()
    (again,) = push_run(request).repos
    assert again.unchanged and scans == [] and not read_weights(file_reads)

    write_checkpoint(run_dir, 4, base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    scans.clear()
    (added,) = push_run(request).repos
    assert added.steps == (4,) and [path.parent.name for path, _ in scans] == ["checkpoint-4"]
    assert not any(".hubkit" in path.split("/") for path in hub_api.list_repo_files(new_repo_id))
    assert list((run_dir / ".hubkit" / "adapters").glob("*.json"))  # kept locally


def test_hubkit_records_in_a_run_have_no_place_in_a_repo_plan(tmp_path: Path) -> None:
    # Even planned as the kind of file they hold: no kind of published file goes under .hubkit/.
    record = PlannedFile(".hubkit/adapters/0123.json", kinds.EVAL_RESULTS, hash_bytes(b"{}"), content=b"{}")
    with pytest.raises(
        PublishError, match=r"\.hubkit/adapters/0123\.json cannot be published as an eval results file"
    ):
        RepoPlan(repo_id="me/run", files=(record,))


def test_an_unchanged_repush_vets_and_writes_nothing_again_and_a_file_changed_in_place_is_refused(
    tmp_path, tiny_qwen3, qwen3_tokenizer_dir, local_hub, new_repo_id, monkeypatch
):
    run_dir = make_run(
        tmp_path / "runs",
        (1, 2),
        base_model=tiny_qwen3.repo_id,
        shapes=TINY_SHAPES,
        tokenizer_dir=qwen3_tokenizer_dir,
    )
    validated: list[str] = []
    for kind, validator in list(VALIDATORS.items()):

        def counted(data, vetting, validator=validator, kind=kind):
            validated.append(kind.name)
            return validator(data, vetting)

        monkeypatch.setitem(VALIDATORS, kind, counted)
    request = PushRequest(
        run_dir, repo_id=new_repo_id, merged=False, space=False, endpoint=local_hub.endpoint
    )
    (first,) = push_run(request).repos
    assert first.commit_sha is not None and {"tokenizer", "vocabulary", "model card"} <= set(validated)

    def kept() -> dict[Path, tuple[int, int]]:
        return {
            p: (p.stat().st_ino, p.stat().st_mtime_ns)
            for p in (run_dir / ".hubkit").rglob("*")
            if p.is_file()
        }

    validated.clear()
    before = kept()
    (again,) = push_run(request).repos  # a new session, as a new process: the run directory's records only
    assert again.unchanged and validated == []
    assert kept() == before  # nothing vetted, recorded or kept again

    # The same size, inode and mtime, other bytes: read, vetted again and refused.
    config = run_dir / "checkpoint-2" / "tokenizer_config.json"
    saved = config.stat()
    planted = json.dumps({**json.loads(config.read_text()), "note": HF_TOKEN})
    assert len(planted) <= saved.st_size
    config.write_text(planted.ljust(saved.st_size))
    os.utime(config, ns=(saved.st_atime_ns, saved.st_mtime_ns))
    with pytest.raises(SecretInFileError, match=r"tokenizer_config\.json"):
        push_run(request)
    assert validated == ["tokenizer config"]
