"""`hubkit push` against the local Hub with the real huggingface_hub client (and PEFT loading back)."""

from __future__ import annotations

import hashlib
import logging
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from helpers import (
    chunks_of,
    chunks_sent,
    commit_ids,
    logits,
    push_adapters,
    push_argv,
    run_cli,
    uploaded,
    write_requests,
)

from hubkit.adapters.prepare import prepare_adapters
from hubkit.errors import PublishError
from hubkit.formats.tensorboard import write_scalars
from hubkit.localhub.http.handler import HubRequestHandler
from hubkit.publish import PushProgress, PushRequest, push_run
from hubkit.runs import load_run
from tests.support.runs import TINY_SHAPES, make_run, qwen3_shapes, write_checkpoint

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def synthetic_run(tmp_path: Path, tiny_qwen3) -> Path:
    return make_run(tmp_path / "runs", (1, 2), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)


# --- real runs: every step loads back with PEFT --------------------------------------------------


def _assert_every_step_loads(run_dir: Path, repo_id: str, tiny_qwen3, tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    run = load_run(run_dir)
    local = prepare_adapters(run, run.checkpoints, tmp_path / "local-adapters")
    input_ids = torch.tensor([[1, 5, 9, 42, 7, 3]])

    def base():
        return AutoModelForCausalLM.from_pretrained(tiny_qwen3.local_dir).eval()

    base_logits = logits(base(), input_ids)
    for adapter in local:
        published = PeftModel.from_pretrained(
            base(), repo_id, subfolder=f"checkpoints/global_step_{adapter.step}"
        )
        expected = PeftModel.from_pretrained(base(), adapter.dir)
        got = logits(published.eval(), input_ids)
        torch.testing.assert_close(got, logits(expected.eval(), input_ids), rtol=0, atol=0)
        assert not torch.allclose(got, base_logits), f"step {adapter.step} loads as a no-op"
    root = logits(PeftModel.from_pretrained(base(), repo_id).eval(), input_ids)
    last = PeftModel.from_pretrained(base(), local[-1].dir).eval()
    torch.testing.assert_close(root, logits(last, input_ids), rtol=0, atol=0)


def _assert_nothing_private_published(hub_api, repo_id: str, run_dir: Path, model_dir: Path) -> None:
    files = hub_api.list_repo_files(repo_id)
    assert not [f for f in files if f.endswith((".pt", ".pth", ".bin", ".pkl")) or "optimizer" in f]
    # TensorBoard names its event files events.out.tfevents.<time>.<host name>.<pid>.<n>: hubkit's names none.
    assert not [name for name in files if f".{socket.gethostname()}." in name]
    for name in files:
        if name.endswith((".json", ".jsonl", ".md", ".jinja", ".txt")):
            text = Path(hub_api.hf_hub_download(repo_id, name)).read_text()
            for local in (str(run_dir), str(model_dir), str(Path.home()) + "/"):
                assert local not in text, f"{name} holds the local path {local}"


@pytest.mark.slow
def test_trl_run_is_published_and_every_step_loads(
    trl_run_dir, tiny_qwen3, local_hub, hub_api, new_repo_id, tmp_path
):
    assert push_adapters(trl_run_dir, new_repo_id, local_hub.endpoint) == 0
    run = load_run(trl_run_dir)
    files = set(hub_api.list_repo_files(new_repo_id))
    for checkpoint in run.checkpoints:
        assert f"checkpoints/global_step_{checkpoint.step}/adapter_model.safetensors" in files
    assert {
        "adapter_model.safetensors",
        "tokenizer_config.json",
        "hubkit.json",
        "metrics.jsonl",
        "README.md",
    } <= files
    _assert_nothing_private_published(hub_api, new_repo_id, trl_run_dir, tiny_qwen3.local_dir)
    _assert_every_step_loads(trl_run_dir, new_repo_id, tiny_qwen3, tmp_path)
    _assert_training_metrics_read_back(hub_api, new_repo_id, run, tmp_path)
    # The one commit lists the steps.
    commits = hub_api.list_repo_commits(new_repo_id)
    steps = ", ".join(str(c.step) for c in run.checkpoints)
    assert commits[0].title == f"hubkit push {run.manifest.run_id}: steps {steps}"
    assert len(commits) == 2  # the repo's initial commit, then the push


def _assert_training_metrics_read_back(hub_api, repo_id: str, run, tmp_path: Path) -> None:
    """TensorBoard's own reader reads the published event file back to the run's metrics (as float32, the
    precision of a TensorBoard scalar); the file's name and bytes say nothing of this machine."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    event_files = [f for f in hub_api.list_repo_files(repo_id) if "tfevents" in f]
    assert event_files == ["runs/events.out.tfevents.hubkit"]
    local = Path(hub_api.hf_hub_download(repo_id, event_files[0], local_dir=tmp_path / "events"))
    accumulator = EventAccumulator(str(local.parent), size_guidance={"scalars": 0})
    accumulator.Reload()
    assert sorted(accumulator.Tags()["scalars"]) == sorted(run.metrics.names)
    for name in run.metrics.names:
        got = [(e.step, e.value) for e in accumulator.Scalars(name)]
        expected = run.metrics.series(name)
        assert [step for step, _ in got] == [step for step, _ in expected]
        for (_, value), (_, want) in zip(got, expected, strict=True):
            assert value == pytest.approx(want, rel=2**-23, abs=1e-38) or (
                math.isnan(value) and math.isnan(want)
            )
    # The file holds the scalars and their tags, nothing else: no wall time, no host, no path.
    assert local.read_bytes() == write_scalars({name: run.metrics.series(name) for name in run.metrics.names})


def _assert_steps_match_verl_reference(run_dir: Path, repo_id: str, base_model) -> None:
    """Each published step reproduces the logits of the adapter verl saved for it."""
    from fixtures_runs import verl_reference_dir
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    for checkpoint in load_run(run_dir).checkpoints:
        reference = torch.load(verl_reference_dir(run_dir) / f"{checkpoint.name}.pt", weights_only=True)
        base = AutoModelForCausalLM.from_pretrained(base_model.local_dir).eval()
        base_logits = logits(base, reference["input_ids"])
        model = PeftModel.from_pretrained(base, repo_id, subfolder=f"checkpoints/{checkpoint.name}").eval()
        got = logits(model, reference["input_ids"])
        torch.testing.assert_close(got, reference["logits"], rtol=1e-4, atol=1e-4)
        assert not torch.allclose(got, base_logits, atol=1e-4), f"{checkpoint.name} loads as a no-op"


@pytest.mark.slow
@pytest.mark.verl
def test_verl_run_is_published_and_every_step_loads(
    verl_run_dir, tiny_qwen3_tied, local_hub, hub_api, make_repo_id, tmp_path
):
    from fixtures_runs import verl_reference_dir
    from safetensors.torch import save_file

    repo_id = make_repo_id("saved")
    assert push_adapters(verl_run_dir, repo_id, local_hub.endpoint) == 0
    run = load_run(verl_run_dir)
    files = set(hub_api.list_repo_files(repo_id))
    for checkpoint in run.checkpoints:
        assert f"checkpoints/{checkpoint.name}/adapter_model.safetensors" in files
    _assert_nothing_private_published(hub_api, repo_id, verl_run_dir, tiny_qwen3_tied.local_dir)
    _assert_steps_match_verl_reference(verl_run_dir, repo_id, tiny_qwen3_tied)

    # verl 0.6.1 with PEFT >= 0.21 saves an empty lora_adapter/: hubkit rebuilds it from the FSDP shards.
    emptied = tmp_path / verl_run_dir.name
    shutil.copytree(verl_run_dir, emptied)
    shutil.copytree(verl_reference_dir(verl_run_dir), verl_reference_dir(emptied))
    for checkpoint in load_run(emptied).checkpoints:
        save_file({}, checkpoint.path / "actor" / "lora_adapter" / "adapter_model.safetensors")
    emptied_run = load_run(emptied)
    rebuilt = prepare_adapters(emptied_run, emptied_run.checkpoints, tmp_path / "rebuilt")
    assert all(adapter.rebuilt for adapter in rebuilt)
    repo_id = make_repo_id("rebuilt")
    assert push_adapters(emptied, repo_id, local_hub.endpoint) == 0
    _assert_steps_match_verl_reference(emptied, repo_id, tiny_qwen3_tied)


# --- incremental pushes ------------------------------------------------------------------------------


def test_repush_makes_no_commit_and_a_new_step_uploads_only_itself(
    synthetic_run, local_hub, hub_api, new_repo_id
):
    assert push_adapters(synthetic_run, new_repo_id, local_hub.endpoint) == 0
    commits = commit_ids(hub_api, new_repo_id)

    start = len(local_hub.request_log)
    assert push_adapters(synthetic_run, new_repo_id, local_hub.endpoint) == 0
    assert commit_ids(hub_api, new_repo_id) == commits
    assert write_requests(local_hub.request_log, start) == []
    assert not [r for r in local_hub.request_log[start:] if r[0] == "POST"]  # not even a preupload

    write_checkpoint(synthetic_run, 3, base_model="unused/when-manifest-names-it", shapes=TINY_SHAPES)
    start = len(local_hub.uploads)
    assert push_adapters(synthetic_run, new_repo_id, local_hub.endpoint) == 0
    new_commits = commit_ids(hub_api, new_repo_id)
    assert new_commits[1:] == commits and len(new_commits) == len(commits) + 1
    puts = uploaded(local_hub, start)
    paths = [p for p in hub_api.list_repo_files(new_repo_id) if p.startswith(("assets/", "runs/"))]
    paths.append("checkpoints/global_step_3/adapter_model.safetensors")
    *drawn, adapter = [info.lfs.sha256 for info in hub_api.get_paths_info(new_repo_id, paths)]
    # Step 3's adapter (its root copy sends no byte again); besides it only what the metrics make: the
    # curves, which now mark step 3, and the TensorBoard file, which holds step 3's metrics.
    assert adapter in puts and set(puts) - {adapter} <= set(drawn)
    assert hub_api.list_repo_commits(new_repo_id)[0].title == "hubkit push synthetic-run: steps 3"


def test_a_new_steps_weights_upload_while_the_card_is_drawn_and_a_push_stopped_then_publishes_nothing(
    synthetic_run, local_hub, hub_api, new_repo_id, monkeypatch, capsys
):
    """An LFS object is invisible until a commit names it, so a new step's weights go to an existing repo
    while the card is built. The card builder below waits for them to arrive: were they uploaded after
    the card, it would wait in vain."""
    import hubkit.publish.repos

    assert push_adapters(synthetic_run, new_repo_id, local_hub.endpoint) == 0
    commits = commit_ids(hub_api, new_repo_id)
    write_checkpoint(synthetic_run, 3, base_model="unused/when-manifest-names-it", shapes=TINY_SHAPES)
    weights = synthetic_run / "checkpoint-3" / "adapter_model.safetensors"
    oid = hashlib.sha256(weights.read_bytes()).hexdigest()
    start = len(local_hub.uploads)

    def puts_of_step_3() -> int:
        return uploaded(local_hub, start).count(oid)

    def card_once_step_3_arrived(*_args, **_kwargs):
        deadline = time.monotonic() + 60
        while puts_of_step_3() == 0:
            assert time.monotonic() < deadline, "step 3's weights were not sent while the card was built"
            time.sleep(0.02)
        raise PublishError("the card cannot be written")

    monkeypatch.setattr(hubkit.publish.repos, "adapter_card_files", card_once_step_3_arrived)
    assert push_adapters(synthetic_run, new_repo_id, local_hub.endpoint) == 1
    assert "the card cannot be written" in capsys.readouterr().err
    assert commit_ids(hub_api, new_repo_id) == commits
    assert "checkpoints/global_step_3/adapter_model.safetensors" not in hub_api.list_repo_files(new_repo_id)

    monkeypatch.undo()
    sent = len(local_hub.request_log)
    assert push_adapters(synthetic_run, new_repo_id, local_hub.endpoint) == 0
    assert len(commit_ids(hub_api, new_repo_id)) == len(commits) + 1
    assert "checkpoints/global_step_3/adapter_model.safetensors" in hub_api.list_repo_files(new_repo_id)
    assert not chunks_of(local_hub, {oid}) & chunks_sent(local_hub, sent)  # the rerun sent none of its bytes


def test_private_does_not_silently_pass_for_an_existing_public_repo(
    synthetic_run, local_hub, hub_api, new_repo_id, capsys
):
    assert push_adapters(synthetic_run, new_repo_id, local_hub.endpoint) == 0
    capsys.readouterr()
    argv = push_argv(synthetic_run, new_repo_id, local_hub.endpoint)
    assert run_cli([*argv, "--no-merged", "--no-space", "--private"]) == 0
    assert "already exists and is public: --private only applies to new repos" in capsys.readouterr().out
    assert not hub_api.repo_info(new_repo_id).private


def test_steps_and_every_choose_checkpoints(synthetic_run, local_hub, hub_api, new_repo_id):
    write_checkpoint(synthetic_run, 3, base_model="x/y", shapes=TINY_SHAPES)
    write_checkpoint(synthetic_run, 4, base_model="x/y", shapes=TINY_SHAPES)
    assert push_adapters(synthetic_run, new_repo_id, local_hub.endpoint, "--every", "2", "--private") == 0
    files = hub_api.list_repo_files(new_repo_id)
    assert sorted(f for f in files if f.endswith("adapter_model.safetensors")) == [
        "adapter_model.safetensors",
        "checkpoints/global_step_2/adapter_model.safetensors",
        "checkpoints/global_step_4/adapter_model.safetensors",
    ]
    assert hub_api.repo_info(new_repo_id).private
    # A later push of older steps adds them, leaves the published ones in place, keeps the newest
    # (step 4) at the root, and the card lists every step in the repo.
    assert push_adapters(synthetic_run, new_repo_id, local_hub.endpoint, "--steps", "1,3") == 0
    files = hub_api.list_repo_files(new_repo_id)
    assert {f"checkpoints/global_step_{s}/adapter_config.json" for s in (1, 2, 3, 4)} <= set(files)
    root, step_4 = hub_api.get_paths_info(
        new_repo_id, ["adapter_model.safetensors", "checkpoints/global_step_4/adapter_model.safetensors"]
    )
    assert root.lfs.sha256 == step_4.lfs.sha256
    card = Path(hub_api.hf_hub_download(new_repo_id, "README.md")).read_text()
    assert all(f"| {s} | `checkpoints/global_step_{s}` |" in card for s in (1, 2, 3, 4))
    assert hub_api.list_repo_commits(new_repo_id)[0].title == "hubkit push synthetic-run: steps 1, 3"


# --- refusals and failures leave the remote as it was --------------------------------------------------


def test_missing_token_is_refused_and_the_repo_is_unchanged(
    synthetic_run, local_hub, hub_api, new_repo_id, monkeypatch, capsys
):
    assert push_adapters(synthetic_run, new_repo_id, local_hub.endpoint) == 0
    commits = commit_ids(hub_api, new_repo_id)
    write_checkpoint(synthetic_run, 3, base_model="x/y", shapes=TINY_SHAPES)
    monkeypatch.delenv("HF_TOKEN")
    capsys.readouterr()
    assert push_adapters(synthetic_run, new_repo_id, local_hub.endpoint) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and "refused access" in err and "HF_TOKEN" in err
    assert len(err.strip().splitlines()) == 1
    assert commit_ids(hub_api, new_repo_id) == commits
    # And a new repo is not created either.
    other = new_repo_id + "-other"
    assert push_adapters(synthetic_run, other, local_hub.endpoint) == 1
    assert not hub_api.repo_exists(other)


def test_an_adapter_for_another_base_is_refused_before_anything_is_sent(
    tmp_path, tiny_qwen3, local_hub, hub_api, new_repo_id, capsys
):
    wrong = qwen3_shapes(hidden=32, q_out=64, v_out=32, layers=2)  # the tiny Qwen3's hidden size is 64
    run_dir = make_run(tmp_path / "runs", (1,), base_model=tiny_qwen3.repo_id, shapes=wrong)
    start = len(local_hub.request_log)
    assert push_adapters(run_dir, new_repo_id, local_hub.endpoint) == 1
    err = capsys.readouterr().err
    assert (
        err.startswith("Error: checkpoint-1 of run synthetic-run:") and "another base" in err
    )  # the folder on disk
    assert write_requests(local_hub.request_log, start) == []
    assert not [r for r in local_hub.request_log[start:] if r[0] == "POST"]
    assert not hub_api.repo_exists(new_repo_id)


def test_a_repo_that_moved_while_pushing_is_refused(synthetic_run, local_hub, hub_api, new_repo_id):
    assert push_adapters(synthetic_run, new_repo_id, local_hub.endpoint) == 0
    write_checkpoint(synthetic_run, 3, base_model="x/y", shapes=TINY_SHAPES)
    commits = []

    def someone_else_commits(_total: int) -> None:  # after the push read the remote, before it commits
        hub_api.upload_file(path_or_fileobj=b"someone else", path_in_repo="NOTES.txt", repo_id=new_repo_id)
        commits.extend(commit_ids(hub_api, new_repo_id))

    request = PushRequest(
        synthetic_run, repo_id=new_repo_id, merged=False, space=False, endpoint=local_hub.endpoint
    )
    with pytest.raises(PublishError, match="changed on the Hub while pushing"):
        push_run(request, PushProgress(upload_started=someone_else_commits))
    assert commit_ids(hub_api, new_repo_id) == commits


def test_a_push_killed_mid_upload_leaves_the_previous_commit_and_the_next_push_completes(
    tmp_path, tiny_qwen3, local_hub, hub_api, new_repo_id, monkeypatch
):
    run_dir = make_run(tmp_path / "runs", (1,), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    assert push_adapters(run_dir, new_repo_id, local_hub.endpoint) == 0
    commits = commit_ids(hub_api, new_repo_id)
    for step in (2, 3, 4):
        write_checkpoint(run_dir, step, base_model="x/y", shapes=TINY_SHAPES)

    # Hold the upload registering the new steps' files on the server until the pushing process is dead.
    in_flight, release = threading.Event(), threading.Event()
    handle = HubRequestHandler._handle

    def held_upload(self: HubRequestHandler) -> None:
        if "/xet/v2/shards" in self.path:
            in_flight.set()
            release.wait(30)
        handle(self)

    monkeypatch.setattr(HubRequestHandler, "do_POST", held_upload)
    command = [sys.executable, "-m", "hubkit", "push", "--run-dir", str(run_dir), "--repo-id", new_repo_id]
    process = subprocess.Popen(
        [*command, "--endpoint", local_hub.endpoint, "--quiet", "--no-merged", "--no-space"],
        cwd=REPO_ROOT,
        env=os.environ.copy(),
    )
    try:
        assert in_flight.wait(120), "the push never started an upload"
        process.send_signal(signal.SIGKILL)
        assert process.wait(30) == -signal.SIGKILL
    finally:
        release.set()
        if process.poll() is None:
            process.kill()
    monkeypatch.undo()
    assert commit_ids(hub_api, new_repo_id) == commits
    assert "checkpoints/global_step_2/adapter_model.safetensors" not in hub_api.list_repo_files(new_repo_id)

    assert push_adapters(run_dir, new_repo_id, local_hub.endpoint) == 0
    assert len(commit_ids(hub_api, new_repo_id)) == len(commits) + 1
    files = hub_api.list_repo_files(new_repo_id)
    assert {f"checkpoints/global_step_{s}/adapter_model.safetensors" for s in (1, 2, 3, 4)} <= set(files)


# --- watching a run that is still training -------------------------------------------------------------


def test_dry_run_after_a_push_shows_what_is_new_without_contacting_the_hub(
    synthetic_run, local_hub, new_repo_id, capsys
):
    assert push_adapters(synthetic_run, new_repo_id, local_hub.endpoint) == 0
    write_checkpoint(synthetic_run, 3, base_model="x/y", shapes=TINY_SHAPES)
    start = len(local_hub.request_log)
    capsys.readouterr()
    assert (
        run_cli(
            [
                "push",
                "--run-dir",
                str(synthetic_run),
                "--repo-id",
                new_repo_id,
                "--endpoint",
                local_hub.endpoint,
                "--dry-run",
                # The adapter repo's listing only (the Space and the merged repo's card have a README.md too).
                "--no-space",
                "--no-merged",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert local_hub.request_log[start:] == []
    status = {
        line.split()[1]: line.split()[0]
        for line in out.splitlines()
        if line.startswith("  ") and len(line.split()) == 4
    }
    assert status["checkpoints/global_step_1/adapter_model.safetensors"] == "unchanged"
    assert status["checkpoints/global_step_3/adapter_model.safetensors"] == "new"
    assert status["adapter_model.safetensors"] == "changed"  # the root follows the newest step
    assert status["README.md"] == "changed"
    assert "compared with the last push from this run directory" in out


def test_a_run_directory_that_cannot_hold_the_push_record_still_pushes(
    synthetic_run, local_hub, hub_api, new_repo_id, caplog
):
    (synthetic_run / ".hubkit").write_text("not a directory")  # where the record would go
    assert push_adapters(synthetic_run, new_repo_id, local_hub.endpoint) == 0
    assert hub_api.file_exists(new_repo_id, "checkpoints/global_step_2/adapter_model.safetensors")
    assert "could not record the push in the run directory" in caplog.text
    assert str(synthetic_run) not in caplog.text


def test_without_repo_id_the_push_goes_to_the_recorded_repo_else_to_owner_slash_run_id(
    tmp_path, tiny_qwen3, local_hub, hub_api, new_repo_id, capsys
):
    from hubkit.runs.manifest import Manifest

    owner = hub_api.whoami()["name"]
    # A run id that is not a valid repo name as it is: made into one, as TRL's hub_model_id default is.
    run_id = f"2026-03-01 12:00 gsm8k..grpo {new_repo_id.rsplit('-', 1)[1]}"
    run_dir = make_run(
        tmp_path / "runs", (1,), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES, run_id=run_id
    )
    argv = ["push", "--run-dir", str(run_dir), "--endpoint", local_hub.endpoint, "--no-merged", "--no-space"]
    assert run_cli(argv) == 0
    expected = f"{owner}/2026-03-01-12-00-gsm8k.grpo-{new_repo_id.rsplit('-', 1)[1]}"
    assert f"Publishing to {expected}" in capsys.readouterr().out
    assert hub_api.file_exists(expected, "checkpoints/global_step_1/adapter_model.safetensors")

    Manifest.load(run_dir).with_updates(push_to=new_repo_id).save(run_dir)
    assert run_cli(argv) == 0
    assert f"Publishing to {new_repo_id}" in capsys.readouterr().out
    assert hub_api.file_exists(new_repo_id, "checkpoints/global_step_1/adapter_model.safetensors")


def test_push_run_is_the_library_call_behind_the_command(synthetic_run, local_hub, hub_api, new_repo_id):
    request = PushRequest(
        synthetic_run,
        repo_id=new_repo_id,
        merged=False,
        space=False,
        endpoint=local_hub.endpoint,
        token=local_hub.token,
    )
    assert local_hub.token not in repr(request)  # requests get logged and printed; the token never is
    first = push_run(request)
    (repo,) = first.repos
    assert first.repo_id == new_repo_id and first.steps == (1, 2)
    assert repo.commit_sha == hub_api.repo_info(new_repo_id).sha and repo.url.endswith(new_repo_id)
    again = push_run(request)
    assert [r.unchanged for r in again.repos] == [True] and again.repos[0].bytes_uploaded == 0


def test_every_uploaded_byte_is_reported_once(tmp_path, tiny_qwen3, local_hub, hub_api, new_repo_id):
    run_dir = make_run(tmp_path / "runs", (1, 2), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    totals, uploaded = [], []
    progress = PushProgress(upload_started=totals.append, uploaded=uploaded.append)
    request = PushRequest(
        run_dir, repo_id=new_repo_id, merged=False, space=False, endpoint=local_hub.endpoint
    )
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
    run_dir = make_run(tmp_path / "runs", (1,), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    caplog.set_level(logging.DEBUG)
    argv = push_argv(run_dir, new_repo_id, local_hub.endpoint)
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


def test_the_push_creates_and_updates_the_space_and_no_space_skips_it(
    synthetic_run, local_hub, hub_api, new_repo_id, capsys
):
    import json

    from huggingface_hub import SpaceCard

    argv = push_argv(synthetic_run, new_repo_id, local_hub.endpoint)
    assert run_cli([*argv, "--no-merged", "--no-space", "--quiet"]) == 0
    assert not hub_api.repo_exists(new_repo_id + "-demo", repo_type="space")

    assert run_cli([*argv, "--no-merged"]) == 0
    assert f"{new_repo_id}-demo: committed" in capsys.readouterr().out
    space = new_repo_id + "-demo"
    files = set(hub_api.list_repo_files(space, repo_type="space"))
    assert {"app.py", "requirements.txt", "space_config.json", "README.md"} <= files
    config = json.loads(
        Path(hub_api.hf_hub_download(space, "space_config.json", repo_type="space")).read_text()
    )
    assert (
        config["runs"][0]["adapter_repo"] == new_repo_id
        and config["base_model"] == load_run(synthetic_run).manifest.base_model
    )
    card = SpaceCard.load(space, repo_type="space")
    assert card.data.sdk == "gradio" and card.data.app_file == "app.py" and new_repo_id in card.data.models

    # A new step changes the adapter repo; the Space (which lists checkpoints at start-up) is unchanged.
    write_checkpoint(synthetic_run, 3, base_model="x/y", shapes=TINY_SHAPES)
    commits = [c.commit_id for c in hub_api.list_repo_commits(space, repo_type="space")]
    assert run_cli([*argv, "--no-merged"]) == 0
    assert f"{space}: up to date" in capsys.readouterr().out
    assert [c.commit_id for c in hub_api.list_repo_commits(space, repo_type="space")] == commits


def test_an_evaluated_run_publishes_its_eval_and_the_card_shows_it(
    synthetic_run, local_hub, hub_api, new_repo_id
):
    from huggingface_hub import ModelCard

    problems = Path(__file__).parents[1] / "data" / "gsm8k_heldout.jsonl"
    evaluate = ["eval", "--run-dir", str(synthetic_run), "--problems", str(problems), "--n", "3"]
    options = [
        "--max-new-tokens",
        "4",
        "--metric",
        "gsm8k_correctness",
        "--endpoint",
        local_hub.endpoint,
        "-q",
    ]
    assert run_cli([*evaluate, *options]) == 0
    assert push_adapters(synthetic_run, new_repo_id, local_hub.endpoint) == 0

    files = set(hub_api.list_repo_files(new_repo_id))
    assert {"eval/results.json", "eval/samples.jsonl", "assets/accuracy_vs_length.png"} <= files
    for name in ("eval/results.json", "eval/samples.jsonl"):
        published = Path(hub_api.hf_hub_download(new_repo_id, name)).read_bytes()
        assert published == (synthetic_run / name).read_bytes()
    card = ModelCard.load(new_repo_id)
    (index,) = card.data.eval_results and [card.data.to_dict()["model-index"][0]]
    assert index["results"][0]["metrics"][0]["type"] == "accuracy"
    assert "assets/accuracy_vs_length.png" in card.content and "global_step_2" in card.content


def test_without_gradio_the_push_says_it_publishes_no_space(
    synthetic_run, local_hub, hub_api, new_repo_id, monkeypatch
):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "gradio" else find_spec(name, *a)
    )
    request = PushRequest(synthetic_run, repo_id=new_repo_id, merged=False, endpoint=local_hub.endpoint)
    report = push_run(request)
    assert [r.repo_id for r in report.repos] == [new_repo_id]
    assert any("gradio is not installed" in note for note in report.notes)
    assert not hub_api.repo_exists(new_repo_id + "-demo", repo_type="space")


def test_a_push_against_a_qwen3_base_imports_neither_torch_nor_transformers_nor_gguf(
    tmp_path: Path, tiny_qwen3, local_hub, hub_api, new_repo_id
) -> None:
    """Those imports cost seconds per `hubkit push` (torch alone ~1.5 s): only a merge, a verl rebuild and
    the shapes of a base whose layout is not read off its config need them."""
    run_dir = make_run(tmp_path / "runs", (1, 2), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    report = (
        "import runpy, sys\n"
        "sys.argv = ['hubkit', *sys.argv[1:]]\n"
        "try:\n"
        "    runpy.run_module('hubkit', run_name='__main__')\n"
        "finally:\n"
        "    print('imported:', *sorted({'torch', 'transformers', 'gguf'} & set(sys.modules)))\n"
    )
    argv = [*push_argv(run_dir, new_repo_id, local_hub.endpoint), "--quiet", "--no-merged", "--no-space"]

    def push() -> str:
        done = subprocess.run(
            [sys.executable, "-c", report, *argv], capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1]

    assert push() == "imported:"  # a Qwen3 base: its shapes are read off its config
    write_checkpoint(run_dir, 3, base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    assert push() == "imported:"
    assert "checkpoints/global_step_3/adapter_model.safetensors" in hub_api.list_repo_files(new_repo_id)
