"""Committing a diff on the local Hub: progress reporting, output, and the token staying out of it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from test_publish_support import make_run, qwen3_shapes, run_cli

from hubkit.publish import diff_push, hub_client, plan_push, prepare_adapters, select_checkpoints
from hubkit.publish.commit import commit_repo
from hubkit.runs import load_run

SHAPES = qwen3_shapes(hidden=64, q_out=64, v_out=32, layers=2)


def _diff(run_dir: Path, repo_id: str, endpoint: str, token: str | None, staging: Path):
    run = load_run(run_dir)
    plan = plan_push(run, repo_id, prepare_adapters(run, select_checkpoints(run), staging), token=token)
    api = hub_client(endpoint, token)
    (diff,) = diff_push(api, plan)
    return api, diff


def test_every_changed_file_is_reported_once(tmp_path, local_hub, hub_api, new_repo_id):
    run_dir = make_run(tmp_path / "runs", (1, 2), base_model="hubkit-test/tiny-qwen3", shapes=SHAPES)
    api, diff = _diff(run_dir, new_repo_id, local_hub.endpoint, local_hub.token, tmp_path / "staging")
    assert not diff.remote.exists and len(diff.changed) == len(diff.plan.files)
    reported = []
    result = commit_repo(api, diff, on_uploaded=lambda planned: reported.append(planned.path_in_repo))
    assert sorted(reported) == sorted(f.path_in_repo for f in diff.plan.files)
    assert result.uploaded_bytes == diff.plan.total_size and result.steps == (1, 2)
    assert hub_api.repo_info(new_repo_id).sha == result.commit_sha
    # The client's own LFS upload already stored the root copy of step 2's adapter: same object on the Hub.
    infos = hub_api.get_paths_info(
        new_repo_id, ["adapter_model.safetensors", "checkpoints/global_step_2/adapter_model.safetensors"]
    )
    assert len({info.lfs.sha256 for info in infos}) == 1


def test_the_token_never_reaches_output_or_logs(
    tmp_path,
    tiny_qwen3,
    local_hub,
    new_repo_id,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
):
    run_dir = make_run(tmp_path / "runs", (1,), base_model=tiny_qwen3.repo_id, shapes=SHAPES)
    caplog.set_level(logging.DEBUG)
    argv = ["push", "--run-dir", str(run_dir), "--repo-id", new_repo_id, "--endpoint", local_hub.endpoint]
    for extra in ([], ["--dry-run"]):
        assert run_cli([*argv, *extra]) == 0
    captured = capsys.readouterr()
    assert f"{new_repo_id}: committed" in captured.out
    for text in (captured.out, captured.err, caplog.text):
        assert local_hub.token not in text
    # Nor does it reach the run directory's push record.
    for path in run_dir.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl", ".md", ".txt"):
            assert local_hub.token not in path.read_text()
