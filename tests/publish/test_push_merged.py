"""`hubkit push` with the merged repo: the merged model beside the adapter repo, on the local Hub."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from unittest import mock

import torch
from helpers import chat_logits, chunks_of, chunks_sent, push_argv, run_cli, uploaded
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

import hubkit.merge
from hubkit.cards.merge_record import MergeRecord
from hubkit.errors import MergeError
from hubkit.runs import load_run
from tests.support.runs import TINY_SHAPES, finish_run, make_run, write_checkpoint


def test_push_publishes_the_merged_model_beside_the_adapter_repo(
    trl_run_dir, tiny_qwen3, local_hub, hub_api, new_repo_id
):
    merged_id = f"{new_repo_id}-merged"
    push = push_argv(trl_run_dir, new_repo_id, local_hub.endpoint)
    assert run_cli([*push, "--quiet"]) == 0

    final_step = load_run(trl_run_dir).checkpoints[-1].step
    base = AutoModelForCausalLM.from_pretrained(tiny_qwen3.repo_id)
    reference = chat_logits(PeftModel.from_pretrained(base, new_repo_id))  # the root adapter: the final step
    merged = AutoModelForCausalLM.from_pretrained(merged_id)
    torch.testing.assert_close(chat_logits(merged), reference, atol=1e-5, rtol=1e-4)

    files = set(hub_api.list_repo_files(merged_id))
    assert {
        "model.safetensors",
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "README.md",
    } <= files
    assert not any(name.endswith((".bin", ".pt", ".partial")) for name in files)
    assert (
        AutoTokenizer.from_pretrained(merged_id).chat_template
        == AutoTokenizer.from_pretrained(new_repo_id).chat_template
    )
    base_generation = GenerationConfig.from_pretrained(tiny_qwen3.local_dir)
    assert GenerationConfig.from_pretrained(merged_id).eos_token_id == base_generation.eos_token_id
    config = json.loads(Path(hub_api.hf_hub_download(merged_id, "config.json")).read_text())
    assert "_name_or_path" not in config and config["dtype"] == "float32"

    card = hub_api.model_info(merged_id).card_data
    assert card.base_model == tiny_qwen3.repo_id
    assert card.base_model_relation == "finetune" and card.library_name == "transformers"
    readme = Path(hub_api.hf_hub_download(merged_id, "README.md")).read_text()
    assert new_repo_id in readme and f"checkpoints/global_step_{final_step}" in readme

    # The merged card records what was merged; pushing the same run again does not merge again (the
    # merged repo holds this merge) and commits nothing.
    record = MergeRecord.from_card_data(hub_api.model_info(merged_id).card_data.to_dict())
    assert record is not None and (record.step, record.adapter_repo) == (final_step, new_repo_id)
    root_weights = hub_api.get_paths_info(new_repo_id, ["adapter_model.safetensors"])[0]
    assert record.adapter_sha256 == root_weights.lfs.sha256
    commits = {repo: len(hub_api.list_repo_commits(repo)) for repo in (new_repo_id, merged_id)}
    with mock.patch.object(hubkit.merge, "execute_plan", side_effect=AssertionError("merged again")):
        assert run_cli([*push, "--quiet"]) == 0
    assert {repo: len(hub_api.list_repo_commits(repo)) for repo in commits} == commits


def test_no_merged_and_dry_run_create_no_merged_repo(trl_run_dir, local_hub, hub_api, new_repo_id, capsys):
    push = push_argv(trl_run_dir, new_repo_id, local_hub.endpoint)
    assert run_cli([*push, "--dry-run", "--merged-repo-id", "hubkit-test/elsewhere"]) == 0
    final_step = load_run(trl_run_dir).checkpoints[-1].step
    assert f"hubkit-test/elsewhere: step {final_step} would be merged" in capsys.readouterr().out
    assert not hub_api.repo_exists(new_repo_id)

    assert run_cli([*push, "--no-merged", "--quiet"]) == 0
    assert hub_api.repo_exists(new_repo_id)
    assert not hub_api.repo_exists(f"{new_repo_id}-merged")


def test_a_push_of_older_steps_leaves_the_merged_model_at_the_newest(
    trl_run_dir, local_hub, hub_api, new_repo_id, capsys
):
    steps = [c.step for c in load_run(trl_run_dir).checkpoints]
    merged_id = f"{new_repo_id}-merged"
    push = push_argv(trl_run_dir, new_repo_id, local_hub.endpoint)
    assert run_cli([*push, "--steps", str(steps[-1]), "--quiet"]) == 0
    merged_commits = len(hub_api.list_repo_commits(merged_id))
    capsys.readouterr()

    assert run_cli([*push, "--steps", str(steps[0])]) == 0
    out = capsys.readouterr().out
    assert f"already holds step {steps[-1]}" in out and "merged model is left as it is" in out
    assert len(hub_api.list_repo_commits(merged_id)) == merged_commits
    readme = hub_api.hf_hub_download(merged_id, "README.md")
    assert f"global_step_{steps[-1]}" in Path(readme).read_text()


def test_watch_merges_once_the_run_has_finished(tmp_path, tiny_qwen3, local_hub, hub_api, new_repo_id):
    run_dir = make_run(tmp_path / "runs", (1,), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    merged_id = f"{new_repo_id}-merged"
    merged_while_training: list[bool] = []

    def train() -> None:
        deadline = time.monotonic() + 60
        while not hub_api.file_exists(new_repo_id, "checkpoints/global_step_1/adapter_config.json"):
            assert time.monotonic() < deadline, "step 1 was never pushed"
            time.sleep(0.05)
        time.sleep(0.5)  # a few more looks at the unfinished run
        merged_while_training.append(hub_api.repo_exists(merged_id))
        write_checkpoint(run_dir, 2, base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
        finish_run(run_dir)

    trainer = threading.Thread(target=train)
    trainer.start()
    try:
        push = push_argv(run_dir, new_repo_id, local_hub.endpoint)
        code = run_cli([*push, "--watch", "--watch-interval", "0.1", "--quiet"])
    finally:
        trainer.join()
    assert code == 0
    assert merged_while_training == [False]
    titles = [c.title for c in hub_api.list_repo_commits(merged_id)]
    assert titles == ["hubkit push synthetic-run (merged): steps 2", "initial commit"]
    readme = Path(hub_api.hf_hub_download(merged_id, "README.md")).read_text()
    assert "checkpoints/global_step_2" in readme and "global_step_1" not in readme


def test_a_refused_merge_stops_the_push_before_anything_is_sent(
    tmp_path, tiny_qwen2_tied, local_hub, hub_api, new_repo_id, capsys
):
    # A LoRA on the lm_head of a model that ties it to the embeddings: a valid adapter, but its merge
    # would silently lose the head.
    vocab = len(AutoTokenizer.from_pretrained(tiny_qwen2_tied.local_dir))
    shapes = {**TINY_SHAPES, "lm_head": (64, vocab)}
    run_dir = make_run(tmp_path / "runs", (1,), base_model=tiny_qwen2_tied.repo_id, shapes=shapes)
    push = push_argv(run_dir, new_repo_id, local_hub.endpoint)
    assert run_cli([*push, "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and "ties lm_head to the embeddings" in err
    assert len(err.strip().splitlines()) == 1
    assert not hub_api.repo_exists(new_repo_id)
    assert not hub_api.repo_exists(f"{new_repo_id}-merged")


def test_a_first_push_uploads_its_adapters_while_it_merges_and_a_failed_merge_publishes_nothing(
    tmp_path, tiny_qwen3, local_hub, hub_api, new_repo_id, monkeypatch, capsys
):
    """Every check has passed once the merge is planned: the new adapter repo is created and its weights
    sent while the base is merged. The merge below waits for them: were they sent after it, it would
    wait in vain."""
    run_dir = make_run(tmp_path / "runs", (1, 2), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    oids = {
        hashlib.sha256((run_dir / f"checkpoint-{s}" / "adapter_model.safetensors").read_bytes()).hexdigest()
        for s in (1, 2)
    }
    start = len(local_hub.uploads)

    def adapter_puts() -> list[str]:
        return [oid for oid in uploaded(local_hub, start) if oid in oids]

    def merge_once_the_adapters_arrived(*_args, **_kwargs):
        deadline = time.monotonic() + 60
        while set(adapter_puts()) != oids:
            assert time.monotonic() < deadline, "the adapters were not sent while the base was merged"
            time.sleep(0.02)
        raise MergeError("no space left on the device")

    monkeypatch.setattr(hubkit.merge, "execute_plan", merge_once_the_adapters_arrived)
    push = [*push_argv(run_dir, new_repo_id, local_hub.endpoint), "--no-space", "--quiet"]
    assert run_cli(push) == 1
    assert "no space left on the device" in capsys.readouterr().err
    # The repo was created, but nothing of the push is in it, and the merged repo was not created.
    assert [c.title for c in hub_api.list_repo_commits(new_repo_id)] == ["initial commit"]
    assert not hub_api.repo_exists(f"{new_repo_id}-merged")

    monkeypatch.undo()
    sent = len(local_hub.request_log)
    assert run_cli(push) == 0
    assert len(hub_api.list_repo_commits(new_repo_id)) == 2
    assert hub_api.repo_exists(f"{new_repo_id}-merged")
    assert set(adapter_puts()) == oids
    assert not chunks_of(local_hub, oids) & chunks_sent(local_hub, sent)  # the rerun sent no adapter byte
