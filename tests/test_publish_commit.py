"""Committing a diff on the local Hub: progress reporting, output, and the token staying out of it."""

from __future__ import annotations

import logging

import pytest
from synthetic_runs import make_run, qwen3_shapes, run_cli

from hubkit.publish import PushProgress, PushRequest, push_run

SHAPES = qwen3_shapes(hidden=64, q_out=64, v_out=32, layers=2)


def test_every_uploaded_byte_is_reported_once(tmp_path, tiny_qwen3, local_hub, hub_api, new_repo_id):
    run_dir = make_run(tmp_path / "runs", (1, 2), base_model=tiny_qwen3.repo_id, shapes=SHAPES)
    totals, uploaded = [], []
    progress = PushProgress(upload_started=totals.append, uploaded=uploaded.append)
    request = PushRequest(run_dir, repo_id=new_repo_id, merged=False, endpoint=local_hub.endpoint)
    report = push_run(request, progress)
    (repo,) = report.repos
    (plan,) = report.plan.repos
    assert repo.files_uploaded == len(plan.files) and repo.steps == (1, 2) == report.steps
    assert totals == [plan.total_size] == [sum(uploaded)] == [repo.bytes_uploaded]
    assert sorted(uploaded) == sorted(f.size for f in plan.files)
    assert hub_api.repo_info(new_repo_id).sha == repo.commit_sha
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
