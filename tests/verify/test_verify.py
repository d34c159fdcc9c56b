"""The merged model checked against its adapter, as users load them: before a push commits it (each planted
fault refused in one line, nothing created), and on a published release (`hubkit verify --repo-id`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import pytest
from helpers import push_argv, run_cli
from safetensors.torch import load_file, save_file

import hubkit.merge
from hubkit.cards.merge_record import MergeRecord
from tests.support.runs import TINY_SHAPES, make_run

SCALED = "model.layers.0.self_attn.v_proj.weight"  # q_proj would not do: Qwen3 normalizes q per head


def _scale_weight(folder: Path, _base_dir: Path | None = None) -> None:
    tensors = load_file(folder / "model.safetensors")
    tensors[SCALED] = tensors[SCALED] * 1.5
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})


def _left_unmerged(folder: Path, base_dir: Path) -> None:
    tensors = load_file(folder / "model.safetensors")
    tensors[SCALED] = load_file(base_dir / "model.safetensors")[SCALED]
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})


def _other_eos(folder: Path, _base_dir: Path) -> None:
    path = folder / "generation_config.json"
    config = json.loads(path.read_text())
    config["eos_token_id"] = 7
    path.write_text(json.dumps(config))


def _other_template(folder: Path, _base_dir: Path | None = None) -> None:
    path = folder / "tokenizer_config.json"
    config = json.loads(path.read_text())
    config["chat_template"] = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    path.write_text(json.dumps(config))


@pytest.fixture
def run_dir(tmp_path, tiny_qwen3) -> Path:
    """A run of one synthetic checkpoint (no tokenizer of its own: the merged repo takes the base's)."""
    return make_run(tmp_path / "runs", (1,), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)


def _push(run_dir: Path, repo_id: str, endpoint: str, *extra: str) -> int:
    return run_cli([*push_argv(run_dir, repo_id, endpoint), "--quiet", "--no-space", "--no-samples", *extra])


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        (_scale_weight, "logits differ by up to"),
        (_left_unmerged, "logits differ by up to"),
        (_other_eos, "end tokens [7, 151645] instead of [151643, 151645]"),
        (_other_template, "the chat template renders other prompt token ids (3 of 3)"),
    ],
    ids=["weight-scaled", "weight-left-unmerged", "eos-changed", "chat-template-changed"],
)
def test_a_fault_in_the_merged_model_is_refused_and_nothing_is_created(
    fault: Callable[[Path, Path], None],
    said: str,
    run_dir,
    tiny_qwen3,
    local_hub,
    hub_api,
    new_repo_id,
    capsys,
):
    execute_plan = hubkit.merge.execute_plan

    def faulty(plan, out_dir, progress=None):
        made = execute_plan(plan, out_dir, progress)
        fault(made.out_dir, Path(tiny_qwen3.local_dir))
        return made

    with mock.patch.object(hubkit.merge, "execute_plan", side_effect=faulty):
        assert _push(run_dir, new_repo_id, local_hub.endpoint) != 0
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, errors
    error = errors[0]
    assert f"{new_repo_id}-merged is not the model of step 1: " in error and said in error, error
    assert "--no-verify" in error
    assert not hub_api.repo_exists(new_repo_id) and not hub_api.repo_exists(f"{new_repo_id}-merged")

    if fault is not _scale_weight:
        return
    # --no-verify publishes it unchecked, and the card says nothing was verified (once: a push costs).
    with mock.patch.object(hubkit.merge, "execute_plan", side_effect=faulty):
        assert _push(run_dir, new_repo_id, local_hub.endpoint, "--no-verify") == 0
    readme = Path(hub_api.hf_hub_download(f"{new_repo_id}-merged", "README.md")).read_text()
    assert "**Verified**" not in readme


def test_a_merge_that_dropped_a_faint_adapter_is_refused_though_its_logits_are_within_the_bound(
    run_dir, tiny_qwen3, local_hub, hub_api, new_repo_id, capsys
):
    # The adapter's B scaled down until it moves the logits by less than the bound: a merged folder that is
    # the base itself then passes the logit comparison, and only the adapter-against-base rule refuses it.
    [adapter] = run_dir.rglob("adapter_model.safetensors")
    tensors = load_file(adapter)
    save_file(
        {k: v * 1e-7 if "lora_B" in k else v for k, v in tensors.items()}, adapter, metadata={"format": "pt"}
    )
    execute_plan = hubkit.merge.execute_plan

    def the_base(plan, out_dir, progress=None):
        made = execute_plan(plan, out_dir, progress)
        base = load_file(Path(tiny_qwen3.local_dir) / "model.safetensors")
        save_file(base, made.out_dir / "model.safetensors", metadata={"format": "pt"})
        return made

    with mock.patch.object(hubkit.merge, "execute_plan", side_effect=the_base):
        assert _push(run_dir, new_repo_id, local_hub.endpoint) != 0
    [error] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Error:")]
    assert "logits differ" not in error, error
    assert "the merged model cannot be told from the base" in error, error
    assert not hub_api.repo_exists(new_repo_id) and not hub_api.repo_exists(f"{new_repo_id}-merged")


def test_an_honest_push_is_verified_and_hubkit_verify_reproduces_it_until_the_hub_is_changed(
    run_dir, tmp_path, local_hub, hub_api, new_repo_id, capsys
):
    assert run_cli([*push_argv(run_dir, new_repo_id, local_hub.endpoint), "--no-space", "--dry-run"]) == 0
    assert "would be merged into hubkit-test/tiny-qwen3, verified and pushed" in capsys.readouterr().out
    assert _push(run_dir, new_repo_id, local_hub.endpoint) == 0

    merged_id = f"{new_repo_id}-merged"
    record = MergeRecord.from_card_data(hub_api.model_info(merged_id).card_data.to_dict())
    assert record is not None and record.verified is not None
    verified = record.verified
    assert verified["passed"] and verified["artifact"] == merged_id and verified["dtype"] == "float32"
    assert verified["prompts"] == 3 and verified["tokens"] > 3 and verified["top1_agreement"] == 1.0
    assert verified["max_abs_logit_diff"] < verified["bound"] < verified["adapter_effect"]
    readme = Path(hub_api.hf_hub_download(merged_id, "README.md")).read_text()
    assert "**Verified**" in readme
    row = f"| {verified['prompts']} | {verified['tokens']} | {verified['max_abs_logit_diff']:.3g} |"
    assert row in readme and "100.0 %" in readme
    # The adapter card says the same check in a line, from the same record.
    adapter_card = Path(hub_api.hf_hub_download(new_repo_id, "README.md")).read_text()
    line = " ".join(adapter_card.split("**Verified**", 1)[1].split("\n\n", 1)[0].split())
    assert f"on {verified['prompts']} prompts and {verified['tokens']} answer tokens" in line
    assert f"move by up to {verified['adapter_effect']:.3g})" in line
    assert f"max \\|Δ logit\\| {verified['max_abs_logit_diff']:.3g}, bound {verified['bound']:.3g}" in line
    assert "top-1 agreement 100.0 %" in line

    # `hubkit verify --repo-id` on the release reproduces the card's figures.
    capsys.readouterr()
    verify = ["verify", "--repo-id", new_repo_id, "--endpoint", local_hub.endpoint]
    assert run_cli(verify) == 0
    out = capsys.readouterr().out
    rows = {
        label: line.split(label, 1)[1].split()
        for line in out.splitlines()
        for label in ("measured now", "the card says")
        if label in line
    }
    assert rows["measured now"] == rows["the card says"], out
    assert rows["measured now"][2] == str(verified["max_abs_logit_diff"])

    # Changed on the Hub after publishing: a tensor scaled, then the chat template edited.
    folder = Path(hub_api.snapshot_download(merged_id))
    changed = tmp_path / "changed"
    changed.mkdir()
    for name in ("model.safetensors", "tokenizer_config.json"):
        (changed / name).write_bytes((folder / name).read_bytes())
    _scale_weight(changed)
    hub_api.upload_file(
        path_or_fileobj=changed / "model.safetensors", path_in_repo="model.safetensors", repo_id=merged_id
    )
    assert run_cli(verify) != 0
    error = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Error:")]
    assert len(error) == 1 and f"{merged_id} is not the model of step 1: logits differ by up to" in error[0]
    _other_template(changed)
    hub_api.upload_file(
        path_or_fileobj=changed / "tokenizer_config.json",
        path_in_repo="tokenizer_config.json",
        repo_id=merged_id,
    )
    assert run_cli(verify) != 0
    error = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Error:")]
    assert (
        len(error) == 1 and f"{merged_id} is not the model of step 1: the chat template renders" in error[0]
    )


def test_a_gguf_file_with_another_end_token_is_refused(run_dir, local_hub, hub_api, new_repo_id, capsys):
    import gguf

    from hubkit.publish.gguf_repo import SessionExports

    publish = SessionExports.publish

    def other_eos(self, *args, **kwargs):
        files, record = publish(self, *args, **kwargs)
        for planned in files:
            field = gguf.GGUFReader(planned.local_path, "r+").fields["tokenizer.ggml.eos_token_id"]
            field.parts[field.data[0]][0] = 7
        return files, record

    with mock.patch.object(SessionExports, "publish", other_eos):
        assert _push(run_dir, new_repo_id, local_hub.endpoint, "--gguf", "q8_0") != 0
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, errors
    name = f"{new_repo_id}-GGUF/{new_repo_id.split('/')[1]}-Q8_0.gguf"
    assert f"{name} is not the merged model's: end token 7 where the merged model stops at" in errors[0]
    assert not hub_api.repo_exists(new_repo_id) and not hub_api.repo_exists(f"{new_repo_id}-GGUF")


def test_a_merged_folder_missing_the_trained_embedding_is_refused(
    tmp_path, tiny_qwen3, local_hub, hub_api, new_repo_id, capsys
):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    run_dir = make_run(tmp_path / "runs", (1,), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    torch.manual_seed(1)
    base = AutoModelForCausalLM.from_pretrained(tiny_qwen3.local_dir)
    config = LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], modules_to_save=["embed_tokens"]
    )
    model = get_peft_model(base, config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name or "modules_to_save" in name:
                param.add_(0.05 * torch.randn_like(param))
    checkpoint = run_dir / "checkpoint-1"
    model.save_pretrained(checkpoint)
    adapter_config = json.loads((checkpoint / "adapter_config.json").read_text())
    adapter_config["base_model_name_or_path"] = tiny_qwen3.repo_id
    (checkpoint / "adapter_config.json").write_text(json.dumps(adapter_config))
    base_embedding = load_file(Path(tiny_qwen3.local_dir) / "model.safetensors")["model.embed_tokens.weight"]
    execute_plan = hubkit.merge.execute_plan

    def without_the_trained_embedding(plan, out_dir, progress=None):
        made = execute_plan(plan, out_dir, progress)
        tensors = load_file(made.out_dir / "model.safetensors")
        assert not torch.equal(tensors["model.embed_tokens.weight"], base_embedding)  # the merge carried it
        tensors["model.embed_tokens.weight"] = base_embedding
        save_file(tensors, made.out_dir / "model.safetensors", metadata={"format": "pt"})
        return made

    with mock.patch.object(hubkit.merge, "execute_plan", side_effect=without_the_trained_embedding):
        assert _push(run_dir, new_repo_id, local_hub.endpoint) != 0
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and f"{new_repo_id}-merged is not the model of step 1: logits differ" in errors[0]
    assert not hub_api.repo_exists(new_repo_id)
