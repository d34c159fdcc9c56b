"""A push within the Hub's size limits, through the real client against the local Hub: a first push of 250+
files is split into commits of at most 100, checkpoint folders first and the card and manifest last; a push
killed between two of them and run again leaves the repo an uninterrupted push leaves; the bytes the Hub
does not hold yet are stated before the first byte (and by --dry-run) as the push then uploads them; and a
storage quota too small for the release is refused before any commit, leaving no repo half-committed or
created-but-empty."""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import push_adapters, push_argv, run_cli
from huggingface_hub import HfApi

import hubkit.publish.push_commits as push_commits
from hubkit.localhub import HubSettings, LocalHub
from hubkit.localhub.accounts.limits import HubLimits
from tests.support.runs import TINY_SHAPES, make_run, write_checkpoint

REPO_ID = "split/run"
STEPS = tuple(range(1, 126))  # 2 files a checkpoint, 7 at the root: 257 files on main


@contextmanager
def _hub(root: Path, tiny_qwen3, limits: str = "", plan: str | None = None) -> Iterator[LocalHub]:
    """A local Hub holding the base's config, with production's limits as `limits` changes them, its callers
    on `plan` (None: the operator's, without an API window: a 125-branch push makes about 1,000 calls, the
    free plan's 5 minutes' worth, which `test_push_limits` paces)."""
    settings = HubSettings(limits=HubLimits().with_settings(limits))
    if plan is not None:
        settings = HubSettings(plan=plan, limits=settings.limits)
    with LocalHub(root, settings=settings) as hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        api.create_repo(tiny_qwen3.repo_id, exist_ok=True)
        api.upload_file(
            path_or_fileobj=tiny_qwen3.local_dir / "config.json",
            path_in_repo="config.json",
            repo_id=tiny_qwen3.repo_id,
        )
        yield hub


def _release(api: HfApi, repo_id: str) -> dict[str, dict[str, str]]:
    """Every branch's files: path to the content's id (an LFS file's sha256, a regular file's git blob id,
    the sha1 of its bytes: either names the content exactly)."""
    tree = {}
    for branch in api.list_repo_refs(repo_id).branches:
        entries = api.list_repo_tree(repo_id, revision=branch.name, recursive=True)
        tree[branch.name] = {
            e.path: (e.lfs.sha256 if e.lfs else e.blob_id) for e in entries if hasattr(e, "blob_id")
        }
    return tree


def _main_commits(api: HfApi, repo_id: str) -> list[set[str]]:
    """The files each commit of main adds or changes, oldest first (from the trees the Hub answers)."""
    commits = list(reversed(api.list_repo_commits(repo_id)))
    trees = [
        {
            e.path: e.blob_id
            for e in api.list_repo_tree(repo_id, revision=c.commit_id, recursive=True)
            if hasattr(e, "blob_id")
        }
        for c in commits
    ]
    added = [set(trees[0])]
    for before, now in itertools.pairwise(trees):
        added.append({p for p, blob in now.items() if before.get(p) != blob})
    return added


class _Killed(BaseException):
    """The push's process stopping between two commits (nothing catches it, as nothing outlives a kill)."""


def _killed_after(monkeypatch, commits: int) -> None:
    """Stop the push once `commits` commits of main are on the Hub, before the next one is sent.

    The stop is made where a SIGKILL between two commits would leave the push: after the Hub answered a
    commit and before the next request. The crash faults of tests/support/faults.py stop the server inside a
    request (a commit half done), which is not the point between two commits this tests."""
    real, made = push_commits.commit_repo, []

    def commit_then_stop(api, diff, **options):
        report = real(api, diff, **options)
        if diff.plan.revision == "main" and report.commit_sha is not None:
            made.append(report.commit_sha)
            if len(made) == commits:
                raise _Killed
        return report

    monkeypatch.setattr(push_commits, "commit_repo", commit_then_stop)


def test_a_first_push_of_257_files_is_split_and_a_killed_push_rerun_leaves_the_same_repo(
    tmp_path, tiny_qwen3, monkeypatch, capsys
):
    run_dir = make_run(tmp_path / "runs", STEPS, base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    capsys.readouterr()
    argv = [*push_argv(run_dir, REPO_ID, "http://127.0.0.1:9"), "--no-merged", "--no-space", "--dry-run"]
    assert run_cli(argv) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Commits:")]
    assert line.startswith(
        f"Commits: 128 ({REPO_ID}: 128), of at most 100 files: {REPO_ID} in 3 (257 files); within"
    ), line

    with _hub(tmp_path / "whole", tiny_qwen3) as hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        started = time.monotonic()
        assert push_adapters(run_dir, REPO_ID, hub.endpoint) == 0
        took = time.monotonic() - started
        added = _main_commits(api, REPO_ID)
        whole = _release(api, REPO_ID)
        # An unchanged re-push commits nothing.
        start = len(hub.request_log)
        assert push_adapters(run_dir, REPO_ID, hub.endpoint) == 0
        assert not [p for _m, p, _s in hub.request_log[start:] if "/commit/" in p]
    assert [len(files) for files in added[1:]] == [100, 100, 57]
    assert all(len(files) <= 100 for files in added)
    # Checkpoint folders first, each whole in one commit; the root adapter, card and manifest in the last.
    assert all(p.startswith("checkpoints/") for p in added[1] | added[2])
    assert {"README.md", "hubkit.json", "adapter_model.safetensors", "adapter_config.json"} <= added[-1]
    assert len(whole) == 1 + len(STEPS) and len(whole["main"]) == 1 + 257

    for kill_after in (1, 2):
        with _hub(tmp_path / f"killed-{kill_after}", tiny_qwen3) as hub:
            api = HfApi(endpoint=hub.endpoint, token="any")
            with monkeypatch.context() as patch:
                _killed_after(patch, kill_after)
                with pytest.raises(_Killed):
                    push_adapters(run_dir, REPO_ID, hub.endpoint)
            assert len(api.list_repo_commits(REPO_ID)) == 1 + kill_after
            assert "README.md" not in api.list_repo_files(REPO_ID)  # no card: the repo says it is not done
            start = len(hub.request_log)
            assert push_adapters(run_dir, REPO_ID, hub.endpoint) == 0
            rerun = [p for _m, p, s in hub.request_log[start:] if "/commit/main" in p and s == 200]
            assert len(rerun) == 3 - kill_after  # only what was left, nothing twice
            assert [len(f) for f in _main_commits(api, REPO_ID)[1:]] == [100, 100, 57]
            assert _release(api, REPO_ID) == whole
    print(
        f"\n257 files on main, 125 branches: 3 commits of main (100, 100, 57) + 125, first push {took:.1f} s"
    )


def _stated_bytes(out: str) -> int:
    (line,) = [line for line in out.splitlines() if line.startswith("Storage:")]
    return int(re.search(r"\(([\d,]+) bytes\)", line).group(1).replace(",", ""))


def _uploaded_bytes(api: HfApi, hub: LocalHub, start: int) -> tuple[int, int]:
    """The bytes of the distinct objects the Hub stored since upload `start` that it did not hold before
    (what the repo's storage grew by), and how many times objects were registered (Xet registers a file
    each time the client sends it)."""
    sizes = {}
    for branch in api.list_repo_refs(REPO_ID).branches:
        for entry in api.list_repo_tree(REPO_ID, revision=branch.name, recursive=True):
            if getattr(entry, "lfs", None):
                sizes[entry.lfs.sha256] = entry.lfs.size
    before = {sha256 for _repo, sha256, _kind in hub.uploads[:start]}
    new = {sha256 for _repo, sha256, _kind in hub.uploads[start:]} - before
    return sum(sizes[sha256] for sha256 in new), len(hub.uploads) - start


def test_the_bytes_the_hub_does_not_hold_are_stated_before_the_push_and_are_what_it_uploads(
    tmp_path, tiny_qwen3, capsys
):
    run_dir = make_run(tmp_path / "runs", (1, 2, 3), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    with _hub(tmp_path / "hub", tiny_qwen3) as hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        argv = [*push_argv(run_dir, REPO_ID, hub.endpoint), "--no-merged", "--no-space"]
        figures = []
        for push in ("first", "one more checkpoint", "unchanged"):
            if push == "one more checkpoint":
                write_checkpoint(run_dir, 4, base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
            capsys.readouterr()
            assert run_cli([*argv, "--dry-run"]) == 0
            dry = _stated_bytes(capsys.readouterr().out)
            start = len(hub.uploads)
            assert run_cli(argv) == 0
            said = _stated_bytes(capsys.readouterr().out)
            uploaded, registered = _uploaded_bytes(api, hub, start)
            figures.append((push, dry, said, uploaded, registered))
            assert dry == said == uploaded, figures
    # Weights, the reward plot and the TensorBoard events are LFS objects; the first push's root adapter
    # is the newest checkpoint's object, counted once; the branches hold main's objects.
    assert figures[0][1] > 0 and 0 < figures[1][1] < figures[0][1] and figures[2][1] == 0, figures
    print(f"\nbytes new to the Hub, dry run = push's line = uploaded: {figures}")


def _one_error_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), lines
    return lines[0]


def test_a_storage_quota_too_small_for_a_split_push_leaves_each_repo_unchanged(tmp_path, tiny_qwen3, capsys):
    """600 kB of private storage: the first of the three commits (50 checkpoints, 410 kB) would fit, the
    release (1 MB) does not. The Hub is asked about every file before the first commit: a new repo is
    removed, an existing one keeps its head."""
    run_dir = make_run(tmp_path / "runs", STEPS, base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    small = make_run(tmp_path / "small", (1, 2), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    with _hub(tmp_path / "hub", tiny_qwen3, "free.private_storage=600kB", plan="free") as hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        capsys.readouterr()
        assert push_adapters(run_dir, REPO_ID, hub.endpoint, "--private") == 1
        error = _one_error_line(capsys)
        assert not api.repo_exists(REPO_ID)
        assert "storage quota" in error and "Private repository storage limit reached" in error, error
        assert error.endswith(f"removed {REPO_ID}, created by this push with nothing committed")
        # A repo that exists: the refused push leaves it at its head.
        assert push_adapters(small, REPO_ID, hub.endpoint, "--private") == 0
        head, refs = api.model_info(REPO_ID).sha, api.list_repo_refs(REPO_ID)
        capsys.readouterr()
        assert push_adapters(run_dir, REPO_ID, hub.endpoint, "--private") == 1
        error = _one_error_line(capsys)
        assert "Private repository storage limit reached" in error and "removed" not in error, error
        assert api.model_info(REPO_ID).sha == head and api.list_repo_refs(REPO_ID) == refs
