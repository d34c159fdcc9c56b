"""The commands (`hubkit merge`, `hubkit gguf`, `hubkit push`) on a real TRL run whose final checkpoint is
an adapter made with PEFT's other options (`test_peft_variants` builds them): vetted, merged and published
as PEFT loads them, or refused in one line before anything is created."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from fixtures_runs import LORA_ALPHA, LORA_R, LORA_TARGETS
from helpers import chat_logits, push_argv, run_cli
from peft import LoraConfig, PeftModel, get_peft_model
from test_peft_variants import ADDED_TOKENS, CONVERSION, TARGETS, build_resized_adapter, trained
from transformers import AutoModelForCausalLM, AutoTokenizer

from hubkit.errors import EvalError
from hubkit.evaluate.backend_vllm import max_lora_rank
from hubkit.runs import load_run


def run_with_final_checkpoint(trl_run_dir: Path, base_dir: Path, out_dir: Path, **lora_options) -> Path:
    """A copy of the TRL run whose final checkpoint is a PEFT adapter of the run's rank, alpha and targets,
    made with `lora_options`, then 'trained'."""
    torch.manual_seed(1)
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    options = {"r": LORA_R, "lora_alpha": LORA_ALPHA, "target_modules": list(LORA_TARGETS), **lora_options}
    model = get_peft_model(base, LoraConfig(**options))
    trained(model)
    model.save_pretrained(out_dir / "adapter")
    return run_ending_with(trl_run_dir, out_dir / "adapter", out_dir / "run")


def run_ending_with(trl_run_dir: Path, adapter_dir: Path, run_dir: Path) -> Path:
    """A copy of the TRL run in `run_dir` whose final checkpoint holds the adapter in `adapter_dir`."""
    shutil.copytree(trl_run_dir, run_dir)
    final = load_run(run_dir).checkpoints[-1]
    for name in ("adapter_model.safetensors", "adapter_config.json"):
        shutil.copyfile(adapter_dir / name, (final.adapter_dir or final.path) / name)
    return run_dir


def test_gguf_and_merge_commands_refuse_a_pissa_checkpoint_in_one_line(
    trl_run_dir, tiny_qwen3, local_hub, tmp_path, capsys
):
    """`hubkit gguf` exports what the merge writes, and `hubkit merge` is that merge: both refuse, nothing
    written."""
    run_dir = run_with_final_checkpoint(
        trl_run_dir, tiny_qwen3.local_dir, tmp_path, init_lora_weights="pissa"
    )
    capsys.readouterr()  # the progress bars of loading the base above

    for command in ("gguf", "merge"):
        out = tmp_path / f"out-{command}"
        argv = [command, "--run-dir", str(run_dir), "--out", str(out), "--endpoint", local_hub.endpoint]
        assert run_cli([*argv, *(["--types", "q8_0"] if command == "gguf" else [])]) == 1
        err = capsys.readouterr().err
        assert err.startswith("Error: ") and CONVERSION in err, err
        assert len(err.strip().splitlines()) == 1
        assert not out.exists()


@pytest.mark.parametrize(
    "options",
    [
        {"use_dora": True},
        {"modules_to_save": ["embed_tokens", "lm_head"]},
        {"target_modules": [*LORA_TARGETS, "embed_tokens"]},
    ],
    ids=["dora", "modules-to-save", "lora-on-embed-tokens"],
)
def test_merge_command_vets_and_merges_a_checkpoint_as_peft_loads_it(
    trl_run_dir, tiny_qwen3, local_hub, tmp_path, options
):
    run_dir = run_with_final_checkpoint(trl_run_dir, tiny_qwen3.local_dir, tmp_path, **options)
    out = tmp_path / "merged"
    argv = ["merge", "--run-dir", str(run_dir), "--out", str(out), "--endpoint", local_hub.endpoint]
    assert run_cli(argv) == 0

    base = AutoModelForCausalLM.from_pretrained(tiny_qwen3.local_dir)
    plain = chat_logits(base)
    with_adapter = chat_logits(PeftModel.from_pretrained(base, tmp_path / "adapter"))
    merged = chat_logits(AutoModelForCausalLM.from_pretrained(out))
    assert not torch.allclose(plain, with_adapter, atol=1e-3)
    torch.testing.assert_close(merged, with_adapter, atol=1e-5, rtol=1e-4)


def resized_run(trl_run_dir: Path, base_dir: Path, out_dir: Path, **lora_options) -> Path:
    """A copy of the TRL run whose every checkpoint is an adapter of a resized vocabulary (tokens added before
    training), each 'trained' apart, saved with its tokenizer, as TRL saves the processing class."""
    run_dir = out_dir / "run"
    shutil.copytree(trl_run_dir, run_dir)
    for checkpoint in load_run(run_dir).checkpoints:
        adapter = build_resized_adapter(
            base_dir, out_dir / f"adapter-{checkpoint.step}", seed=checkpoint.step, **lora_options
        )
        for item in adapter.iterdir():
            shutil.copyfile(item, checkpoint.path / item.name)
    return run_dir


def resized_base(base_dir: Path, tokenizer) -> AutoModelForCausalLM:
    base = AutoModelForCausalLM.from_pretrained(base_dir)
    base.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    return base


@pytest.mark.parametrize(
    "lora_options",
    [
        {},
        {"modules_to_save": ["embed_tokens", "lm_head"]},
        {"target_modules": [*TARGETS, "embed_tokens", "lm_head"]},
    ],
    ids=["save-embedding-layers", "modules-to-save", "lora-on-the-embeddings"],
)
def test_push_publishes_a_run_that_resized_the_vocabulary(
    trl_run_dir, tiny_qwen3, local_hub, hub_api, new_repo_id, tmp_path, capsys, lora_options
):
    run_dir = resized_run(trl_run_dir, tiny_qwen3.local_dir, tmp_path, **lora_options)
    capsys.readouterr()
    push = [*push_argv(run_dir, new_repo_id, local_hub.endpoint), "--quiet"]
    assert run_cli([*push, "--no-space"]) == 0
    capsys.readouterr()
    assert run_cli(push) == 1  # the Space loads adapters onto the base as it is
    err = capsys.readouterr().err
    assert "--no-space" in err and "resized the vocabulary" in err and len(err.strip().splitlines()) == 1
    assert not hub_api.repo_exists(f"{new_repo_id}-demo")

    tokenizer = AutoTokenizer.from_pretrained(new_repo_id)
    rows = len(AutoTokenizer.from_pretrained(tiny_qwen3.local_dir)) + len(ADDED_TOKENS)
    assert len(tokenizer) == rows
    for checkpoint in load_run(run_dir).checkpoints:
        folder = f"checkpoints/global_step_{checkpoint.step}"
        published = chat_logits(
            PeftModel.from_pretrained(
                resized_base(tiny_qwen3.local_dir, tokenizer), new_repo_id, subfolder=folder
            )
        )
        local = chat_logits(
            PeftModel.from_pretrained(resized_base(tiny_qwen3.local_dir, tokenizer), checkpoint.path)
        )
        torch.testing.assert_close(published, local)
    merged_id = f"{new_repo_id}-merged"
    merged = AutoModelForCausalLM.from_pretrained(merged_id)
    merged_tokenizer = AutoTokenizer.from_pretrained(merged_id)
    assert merged.config.vocab_size == rows == len(merged_tokenizer)
    assert merged.get_input_embeddings().weight.shape[0] == merged.lm_head.weight.shape[0] == rows
    assert merged_tokenizer.convert_tokens_to_ids(ADDED_TOKENS) == tokenizer.convert_tokens_to_ids(
        ADDED_TOKENS
    )
    torch.testing.assert_close(chat_logits(merged), published, atol=1e-5, rtol=1e-4)  # the newest step's
    for repo in (new_repo_id, merged_id):
        card = Path(hub_api.hf_hub_download(repo, "README.md")).read_text()
        assert f"{len(ADDED_TOKENS)} tokens added" in card, repo
    adapter_card = Path(hub_api.hf_hub_download(new_repo_id, "README.md")).read_text()
    assert f"resize_token_embeddings({rows})" in adapter_card and "LoRARequest" not in adapter_card


def test_push_refuses_to_merge_a_pissa_checkpoint_and_publishes_it_with_no_merged(
    trl_run_dir, tiny_qwen3, local_hub, hub_api, new_repo_id, tmp_path, capsys
):
    """The refusal comes before any repo is created; the adapter alone is published with its init, which
    PEFT (the Space, the evaluation) redoes on the base as it loads it."""
    run_dir = run_with_final_checkpoint(
        trl_run_dir, tiny_qwen3.local_dir, tmp_path, init_lora_weights="pissa"
    )
    capsys.readouterr()  # the progress bars of loading the base above
    push = push_argv(run_dir, new_repo_id, local_hub.endpoint)
    assert run_cli([*push, "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and CONVERSION in err and len(err.strip().splitlines()) == 1
    assert not hub_api.repo_exists(new_repo_id)
    assert not hub_api.repo_exists(f"{new_repo_id}-merged")

    assert run_cli([*push, "--no-merged", "--quiet"]) == 0
    base = AutoModelForCausalLM.from_pretrained(tiny_qwen3.local_dir)
    published = chat_logits(PeftModel.from_pretrained(base, new_repo_id))
    base = AutoModelForCausalLM.from_pretrained(tiny_qwen3.local_dir)
    torch.testing.assert_close(published, chat_logits(PeftModel.from_pretrained(base, tmp_path / "adapter")))
    assert not hub_api.repo_exists(f"{new_repo_id}-merged")


def test_push_refuses_a_lora_on_a_resized_embedding_without_the_resized_head(
    trl_run_dir, tiny_qwen3, local_hub, hub_api, new_repo_id, tmp_path, capsys
):
    """PEFT saved embed_tokens' resized rows beside its LoRA but not lm_head's: refused before any repo."""
    run_dir = resized_run(
        trl_run_dir, tiny_qwen3.local_dir, tmp_path, target_modules=[*TARGETS, "embed_tokens"]
    )
    capsys.readouterr()
    assert run_cli([*push_argv(run_dir, new_repo_id, local_hub.endpoint), "--quiet", "--no-space"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and len(err.strip().splitlines()) == 1, err
    assert "carries no lm_head.weight" in err and "lm_head in target_modules or modules_to_save" in err
    assert not hub_api.repo_exists(new_repo_id)
    assert not hub_api.repo_exists(f"{new_repo_id}-merged")


@pytest.mark.parametrize(
    "options",
    [{"use_dora": True}, {"modules_to_save": ["embed_tokens", "lm_head"]}],
    ids=["dora", "modules-to-save"],
)
def test_push_publishes_and_merges_a_checkpoint_as_peft_loads_it(
    trl_run_dir, tiny_qwen3, local_hub, new_repo_id, tmp_path, options
):
    run_dir = run_with_final_checkpoint(trl_run_dir, tiny_qwen3.local_dir, tmp_path, **options)
    assert run_cli([*push_argv(run_dir, new_repo_id, local_hub.endpoint), "--quiet"]) == 0

    base = AutoModelForCausalLM.from_pretrained(tiny_qwen3.local_dir)
    published = chat_logits(PeftModel.from_pretrained(base, new_repo_id))
    base = AutoModelForCausalLM.from_pretrained(tiny_qwen3.local_dir)
    assert not torch.allclose(published, chat_logits(base), atol=1e-3)
    torch.testing.assert_close(published, chat_logits(PeftModel.from_pretrained(base, tmp_path / "adapter")))
    merged = chat_logits(AutoModelForCausalLM.from_pretrained(f"{new_repo_id}-merged"))
    torch.testing.assert_close(merged, published, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({}, None),
        ({"use_dora": True}, "not DoRA"),
        ({"modules_to_save": ["embed_tokens", "lm_head"]}, "not whole modules (modules_to_save)"),
        ({"init_lora_weights": "olora"}, "not init_lora_weights='olora'"),
    ],
    ids=["plain", "dora", "modules-to-save", "olora"],
)
def test_the_card_shows_vllm_only_for_adapters_vllm_applies_as_peft_does(
    trl_run_dir, tiny_qwen3, local_hub, tmp_path, options, said
):
    """The rule `hubkit eval --backend vllm` refuses by: the card points to the merged model instead."""
    run_dir = run_with_final_checkpoint(trl_run_dir, tiny_qwen3.local_dir, tmp_path, **options)
    out = tmp_path / "preview"
    argv = ["card", "--run-dir", str(run_dir), "--repo-id", "me/run", "--out", str(out)]
    assert run_cli([*argv, "--endpoint", local_hub.endpoint, "--quiet"]) == 0
    card = (out / "README.md").read_text()
    assert ("LoRARequest" in card) == (said is None)
    if said is not None:
        line = next(line for line in card.splitlines() if line.startswith("vLLM's LoRA"))
        assert line.startswith(f"vLLM's LoRA applies plain LoRA on the base as it is, {said}")
        assert line.endswith("serve the merged model (me/run-merged) instead.")


def test_vllm_evaluation_refuses_an_adapter_that_resized_the_vocabulary(tiny_qwen3, tmp_path):
    adapter_dir = build_resized_adapter(tiny_qwen3.local_dir, tmp_path / "adapter")
    with pytest.raises(EvalError, match=r"resized the vocabulary to \d+ rows.*--backend transformers"):
        max_lora_rank([adapter_dir], tiny_qwen3.local_dir)
    assert max_lora_rank([adapter_dir]) == 8  # without the base, the rank alone
