"""Storage is real git: durable across restarts, `git fsck` clean, clonable, safe under concurrent commits."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest
from helpers import assert_fsck_clean
from huggingface_hub import CommitOperationAdd, HfApi, constants, hf_hub_download
from huggingface_hub.errors import HfHubHTTPError

from hubkit.localhub import LocalHub


def _git(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def _fill(folder: Path) -> None:
    # Names that test git's tree order ("a" sorts as "a/" against "a-b" and "a.txt").
    (folder / "a").mkdir()
    (folder / "a" / "b.txt").write_text("inside a\n")
    (folder / "a-b").write_text("dash\n")
    (folder / "a.txt").write_text("dot\n")
    (folder / "model.safetensors").write_bytes(os.urandom(300_000))
    (folder / "données").mkdir()
    (folder / "données" / "é t.txt").write_text("unicode and a space\n")


def test_restart_serves_the_same_repos_and_git_agrees(tmp_path):
    root, upload = tmp_path / "hub", tmp_path / "upload"
    upload.mkdir()
    _fill(upload)
    with LocalHub(root) as hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        api.create_repo("me/durable")
        api.upload_folder(repo_id="me/durable", folder_path=upload, commit_message="Add files")
        api.create_branch("me/durable", branch="dev")
        api.create_tag("me/durable", tag="v1")
        api.create_repo("me/data", repo_type="dataset")
        before = (
            api.model_info("me/durable", files_metadata=True),
            api.list_repo_refs("me/durable"),
            [c.commit_id for c in api.list_repo_commits("me/durable")],
        )

    git_dir = root / "repos" / "models" / "me" / "durable.git"
    assert_fsck_clean(git_dir)
    log = _git("--git-dir", str(git_dir), "log", "--format=%H", "main").stdout.split()
    assert log == before[2]
    clone = tmp_path / "clone"
    assert _git("clone", "-q", str(git_dir), str(clone)).returncode == 0
    assert (clone / "a" / "b.txt").read_text() == "inside a\n"
    assert (clone / "données" / "é t.txt").read_text() == "unicode and a space\n"
    pointer = (clone / "model.safetensors").read_text()  # git holds the LFS pointer, not the bytes
    assert pointer.startswith("version https://git-lfs.github.com/spec/v1\noid sha256:")

    with LocalHub(root) as hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        info = api.model_info("me/durable", files_metadata=True)
        assert info.sha == before[0].sha
        assert [(s.rfilename, s.blob_id, s.size) for s in info.siblings] == [
            (s.rfilename, s.blob_id, s.size) for s in before[0].siblings
        ]
        assert api.list_repo_refs("me/durable") == before[1]
        assert [c.commit_id for c in api.list_repo_commits("me/durable")] == before[2]
        assert api.repo_exists("me/data", repo_type="dataset")
        path = hf_hub_download(
            "me/durable",
            "model.safetensors",
            endpoint=hub.endpoint,
            cache_dir=tmp_path / "cache",
            token="any",
        )
        assert Path(path).read_bytes() == (upload / "model.safetensors").read_bytes()
        path = hf_hub_download(
            "me/durable", "données/é t.txt", endpoint=hub.endpoint, cache_dir=tmp_path / "cache"
        )
        assert Path(path).read_text() == "unicode and a space\n"


def test_a_stopped_hub_answers_nothing_more(tmp_path):
    import httpx2  # huggingface_hub 2.x's HTTP client

    hub = LocalHub(tmp_path / "hub").start()
    api = HfApi(endpoint=hub.endpoint, token="any")
    api.create_repo("me/stopped")
    assert api.model_info("me/stopped").sha  # the client now holds a keep-alive connection
    hub.stop()
    with pytest.raises(httpx2.TransportError):
        api.model_info("me/stopped")


def test_concurrent_commits_all_land(tmp_path):
    with LocalHub(tmp_path / "hub") as hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        api.create_repo("me/busy")
        errors: list[BaseException] = []

        def writer(name: str) -> None:
            try:
                for i in range(5):
                    blob = os.urandom(20_000) if i % 2 else f"{name} {i}\n".encode()
                    api.upload_file(path_or_fileobj=blob, path_in_repo=f"{name}/{i}.bin", repo_id="me/busy")
            except BaseException as e:  # collected and re-raised in the main thread
                errors.append(e)

        threads = [threading.Thread(target=writer, args=(name,)) for name in ("left", "right")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        commits = api.list_repo_commits("me/busy")
        assert len(commits) == 11  # the initial commit + 2 × 5
        files = set(api.list_repo_files("me/busy"))
        assert {f"{side}/{i}.bin" for side in ("left", "right") for i in range(5)} <= files
    assert_fsck_clean(tmp_path / "hub" / "repos" / "models" / "me" / "busy.git")


def _race(api: HfApi, repo_id: str, parent: str, names: list[str]) -> list[object]:
    """Commit one file per name from as many threads at once, all on `parent`; return each outcome."""
    barrier = threading.Barrier(len(names))
    outcomes: list[object] = []

    def commit(name: str) -> None:
        barrier.wait()
        try:
            api.create_commit(
                repo_id,
                [CommitOperationAdd(f"{name}.txt", name.encode())],
                commit_message=name,
                parent_commit=parent,
            )
            outcomes.append("ok")
        except HfHubHTTPError as e:
            outcomes.append(e.response.status_code)

    threads = [threading.Thread(target=commit, args=(name,)) for name in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


def test_racing_commits_on_the_same_parent_one_wins_one_gets_412(tmp_path):
    with LocalHub(tmp_path / "hub") as hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        api.create_repo("me/race")
        for round_number in range(3):
            parent = api.model_info("me/race").sha
            outcomes = _race(api, "me/race", parent, [f"r{round_number}-a", f"r{round_number}-b"])
            assert sorted(outcomes, key=str) == [412, "ok"]
        assert len(api.list_repo_commits("me/race")) == 4
    assert_fsck_clean(tmp_path / "hub" / "repos" / "models" / "me" / "race.git")


@pytest.mark.parametrize("cdn", [True, False])
def test_lfs_downloads_with_and_without_the_cdn(tmp_path, cdn):
    data = os.urandom(50_000)
    with LocalHub(tmp_path / "hub", cdn=cdn) as hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        api.create_repo("me/cdn")
        api.upload_file(path_or_fileobj=data, path_in_repo="w.safetensors", repo_id="me/cdn")
        path = hf_hub_download("me/cdn", "w.safetensors", endpoint=hub.endpoint, cache_dir=tmp_path / "c")
        assert Path(path).read_bytes() == data
        resolves = [s for m, p, s in hub.request_log if m == "HEAD" and p.endswith("/w.safetensors")]
        assert resolves == ([302] if cdn else [200])
        assert bool(hub.cdn_endpoint) == cdn


def test_git_gc_in_a_served_repo_changes_nothing_for_clients(tmp_path):
    """An administrator's `git gc --aggressive` packs objects and refs while the Hub runs: downloads,
    listings and a new commit still work, and git agrees with the Hub."""
    upload = tmp_path / "upload"
    upload.mkdir()
    _fill(upload)
    with LocalHub(tmp_path / "hub") as hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        api.create_repo("me/gc")
        api.upload_folder(repo_id="me/gc", folder_path=upload, commit_message="Add files")
        api.create_tag("me/gc", tag="v1")
        api.create_branch("me/gc", branch="dev")
        before = api.model_info("me/gc", files_metadata=True)
        git_dir = tmp_path / "hub" / "repos" / "models" / "me" / "gc.git"
        gc = _git("--git-dir", str(git_dir), "gc", "--aggressive", "--prune=now")
        assert gc.returncode == 0, gc.stderr
        assert list((git_dir / "objects" / "pack").glob("*.pack"))
        assert not [p for p in (git_dir / "objects").glob("??/*")]  # no loose object left
        assert not (git_dir / "refs" / "tags" / "v1").exists()  # the refs are packed too

        after = api.model_info("me/gc", files_metadata=True)
        assert after.sha == before.sha
        assert [(s.rfilename, s.blob_id) for s in after.siblings] == [
            (s.rfilename, s.blob_id) for s in before.siblings
        ]
        assert {t.name for t in api.list_repo_refs("me/gc").tags} == {"v1"}
        path = hf_hub_download("me/gc", "a/b.txt", endpoint=hub.endpoint, cache_dir=tmp_path / "c")
        assert Path(path).read_text() == "inside a\n"
        assert api.file_exists("me/gc", "données/é t.txt", revision="v1")
        api.upload_file(path_or_fileobj=b"after gc\n", path_in_repo="a/c.txt", repo_id="me/gc")
        api.create_commit(
            "me/gc", [CommitOperationAdd("dev.txt", b"dev")], commit_message="dev", revision="dev"
        )
        commits = [c.commit_id for c in api.list_repo_commits("me/gc")]
        assert len(commits) == 3 and commits[1] == before.sha
    assert_fsck_clean(git_dir)
    log = _git("--git-dir", str(git_dir), "log", "--format=%H", "main").stdout.split()
    assert log == commits


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 4 MiB tmpfs: a real full disk (needs the right to mount, as root has in CI)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill_disk(mount: Path, leave: int) -> Path:
    """Fill the disk until about `leave` bytes are free; return the filler file."""
    filler = mount / "filler"
    with filler.open("ab", buffering=0) as f:  # unbuffered: closing it has nothing left to write
        try:
            while os.statvfs(mount).f_bavail * os.statvfs(mount).f_frsize > leave:
                f.write(b"\0" * 16384)
        except OSError:
            pass
    return filler


# dulwich's lock file, when closing it fails for want of space, reports that from its finalizer.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_full_disk_gives_a_clean_error_and_leaves_the_repo_unchanged(small_disk, tmp_path, monkeypatch):
    root = small_disk / "hub"
    with LocalHub(root) as hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        api.create_repo("me/full")
        api.upload_file(path_or_fileobj=b"before\n", path_in_repo="before.txt", repo_id="me/full")
        git_dir = root / "repos" / "models" / "me" / "full.git"
        head = api.model_info("me/full").sha
        files_before = sorted(p.relative_to(git_dir) for p in git_dir.rglob("*") if p.is_file())
        filler = _fill_disk(small_disk, leave=64 * 1024)

        big_regular = [
            CommitOperationAdd(f"notes/{i}.txt", os.urandom(40_000).hex().encode()) for i in range(4)
        ]
        with pytest.raises(HfHubHTTPError) as caught:
            api.create_commit("me/full", big_regular, commit_message="too big")
        assert caught.value.response.status_code == 507
        assert "disk is full" in caught.value.response.json()["error"]
        with pytest.raises(ConnectionError, match="507"):  # through Xet: the xorb is refused
            api.upload_file(path_or_fileobj=os.urandom(600_000), path_in_repo="w.bin", repo_id="me/full")
        monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
        with pytest.raises(RuntimeError, match="Error while uploading") as caught:  # LFS: the client wraps it
            api.upload_file(path_or_fileobj=os.urandom(600_000), path_in_repo="w.bin", repo_id="me/full")
        assert caught.value.__cause__.response.status_code == 507
        _fill_disk(small_disk, leave=0)
        with pytest.raises(HfHubHTTPError) as caught:
            api.create_repo("me/another")
        assert caught.value.response.status_code == 507

        assert api.model_info("me/full").sha == head
        assert sorted(p.relative_to(git_dir) for p in git_dir.rglob("*") if p.is_file()) == files_before
        assert not api.repo_exists("me/another")
        assert sorted(p.name for p in (root / "repos" / "models" / "me").iterdir()) == [
            "full.git",
            "full.meta.json",
        ]
        assert_fsck_clean(git_dir)

        filler.unlink()  # space again: the same commit is accepted
        api.create_commit("me/full", big_regular, commit_message="fits now")
        assert [c.title for c in api.list_repo_commits("me/full")][:2] == [
            "fits now",
            "Upload before.txt with huggingface_hub",
        ]
    assert_fsck_clean(git_dir)
