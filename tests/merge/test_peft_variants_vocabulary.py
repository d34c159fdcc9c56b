"""A LoRA on the embeddings or head of a vocabulary the adapter resized (tokens added, then ``target_modules``
naming ``embed_tokens`` and/or ``lm_head``): PEFT saves the resized weights it was trained on
(``<module>.base_layer.weight``) beside the LoRA, loads them in place of the base's and merges the LoRA into
them. hubkit's merge is PEFT's ``merge_and_unload()`` within the bound the dtype gives, with the adapter's
vocabulary and tokenizer; what PEFT's saved adapter does not define is refused in one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from peft import PeftModel
from peft.tuners.lora import LoraLayer
from test_merge import (
    assert_nothing_written,
    assert_within_bound,
    base_variant,  # noqa: F401  (the fixture: a tiny model re-saved in a dtype)
    read_weights,
)
from test_peft_variants import ADDED_TOKENS, TARGETS, build_resized_adapter
from transformers import AutoModelForCausalLM, AutoTokenizer

from hubkit.errors import MergeError
from hubkit.merge import merge_adapter


def peft_merge_and_bounds(
    base_dir: Path, adapter_dir: Path, dtype: torch.dtype
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """PEFT's merge_and_unload of a resized adapter (on the base resized as the adapter needs), and, per weight
    a LoRA merges into, how far a correct merge may lie from it.

    With W the weight PEFT loads (the saved resized copy for an embedding or head) and d = s * |B| @ |A| (an
    embedding's transposed), a float32 merge lies within (r + 2) * u * (|W| + d) of the exact sum (u = eps / 2):
    two of them within (r + 2) * eps * (|W| + d). In bfloat16 PEFT rounds the delta, then the sum
    (u |d| + u |W + d|), hubkit rounds the float32 sum once (u |W + d|): within eps * (|W| + 1.5 d), plus the
    float32 terms.
    """
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=dtype)
    base.resize_token_embeddings(len(AutoTokenizer.from_pretrained(adapter_dir)), mean_resizing=False)
    model = PeftModel.from_pretrained(base, adapter_dir)
    eps32 = torch.finfo(torch.float32).eps
    bounds = {}
    for name, module in model.named_modules():
        if not isinstance(module, LoraLayer) or not module.active_adapters:
            continue
        if "default" in module.lora_embedding_A:
            a = module.lora_embedding_A["default"].detach().double()
            b = module.lora_embedding_B["default"].detach().double()
            d = module.scaling["default"] * (b.abs() @ a.abs()).T
        elif "default" in module.lora_A:
            a = module.lora_A["default"].weight.detach().double()
            b = module.lora_B["default"].weight.detach().double()
            d = module.scaling["default"] * (b.abs() @ a.abs())
        else:
            continue
        w = module.get_base_layer().weight.detach().double().abs()
        bound = (a.shape[0] + 2) * eps32 * (w + d)
        if dtype != torch.float32:
            bound = bound + torch.finfo(dtype).eps * (w + 1.5 * d)
        bounds[name.removeprefix("base_model.model.") + ".weight"] = bound
    merged = model.merge_and_unload()
    return {name: t.detach() for name, t in merged.state_dict().items()}, bounds


CASES = {
    "lora-on-both": {"target_modules": [*TARGETS, "embed_tokens", "lm_head"]},
    "lora-on-lm-head-embed-tokens-saved": {
        "target_modules": [*TARGETS, "lm_head"],
        "modules_to_save": ["embed_tokens"],
    },
    "lora-on-embed-tokens-lm-head-saved": {
        "target_modules": [*TARGETS, "embed_tokens"],
        "modules_to_save": ["lm_head"],
    },
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("case", list(CASES))
def test_a_lora_on_a_resized_vocabulary_merges_as_peft_merges_it(
    base_variant,  # noqa: F811
    tmp_path,
    case,
    dtype,
):
    base_dir = base_variant("tiny_qwen3", dtype)
    adapter_dir = build_resized_adapter(base_dir, tmp_path / "adapter", **CASES[case])
    rows = len(AutoTokenizer.from_pretrained(base_dir)) + len(ADDED_TOKENS)

    result = merge_adapter(base_dir, adapter_dir, tmp_path / "merged")

    config = json.loads((tmp_path / "merged" / "config.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "merged")
    ours = read_weights(tmp_path / "merged")
    assert config["vocab_size"] == rows == len(tokenizer)
    assert ours["model.embed_tokens.weight"].shape[0] == ours["lm_head.weight"].shape[0] == rows
    assert tokenizer.convert_tokens_to_ids(ADDED_TOKENS) == list(range(rows - len(ADDED_TOKENS), rows))
    reference, bounds = peft_merge_and_bounds(base_dir, adapter_dir, dtype)
    assert sorted(ours) == sorted(reference) and result.merged_modules == len(bounds)
    lora_on = {n.removeprefix("model.").removesuffix(".weight") for n in bounds if "layers" not in n}
    assert lora_on == set(CASES[case]["target_modules"]) - set(TARGETS)
    for name, tensor in ours.items():
        assert tensor.dtype == reference[name].dtype, name
        if name in bounds:
            assert_within_bound(tensor, reference[name], bounds[name], name)
        else:  # copied from the base, or a whole weight the adapter saved: PEFT's bytes
            assert torch.equal(tensor, reference[name]), name
    saved = read_weights(adapter_dir)
    for module in lora_on:  # the LoRA merged into the resized rows PEFT saved, added tokens' rows included
        copy = saved[f"base_model.model.{'' if module == 'lm_head' else 'model.'}{module}.base_layer.weight"]
        weight = ours["lm_head.weight" if module == "lm_head" else "model.embed_tokens.weight"]
        assert not torch.equal(weight[-len(ADDED_TOKENS) :], copy[-len(ADDED_TOKENS) :].to(dtype)), module
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "merged", dtype=dtype)
    ids = tokenizer("2 + 2 <answer_box> 4", return_tensors="pt").input_ids
    assert loaded(ids).logits.shape[-1] == rows


@pytest.mark.parametrize(
    ("lora_on", "unsaved"), [("embed_tokens", "lm_head"), ("lm_head", "model.embed_tokens")]
)
def test_a_lora_on_one_resized_embedding_without_the_other_is_refused(tiny_qwen3, tmp_path, lora_on, unsaved):
    """PEFT saves only the embeddings a LoRA targets: with a LoRA on one of embed_tokens and lm_head, the other's
    rows of the added tokens were never saved, and no merge can know them."""
    adapter_dir = build_resized_adapter(
        tiny_qwen3.local_dir, tmp_path / "adapter", target_modules=[*TARGETS, lora_on]
    )
    module = unsaved.split(".")[-1]
    with pytest.raises(
        MergeError,
        match=rf"carries no {unsaved}\.weight of them .*{module} in target_modules or modules_to_save",
    ) as refused:
        merge_adapter(tiny_qwen3.local_dir, adapter_dir, tmp_path / "out")
    assert "\n" not in str(refused.value)
    assert_nothing_written(tmp_path / "out")


def test_a_lora_on_a_resized_embedding_of_a_tied_base_is_refused(tiny_qwen2_tied, tmp_path):
    """Merged into the tied weight, the LoRA would change lm_head too, which the adapter never did."""
    adapter_dir = build_resized_adapter(
        tiny_qwen2_tied.local_dir, tmp_path / "adapter", target_modules=[*TARGETS, "embed_tokens"]
    )
    with pytest.raises(
        MergeError, match=r"LoRA on model\.embed_tokens but the base model ties lm_head.*merge_and_unload"
    ) as refused:
        merge_adapter(tiny_qwen2_tied.local_dir, adapter_dir, tmp_path / "out")
    assert "\n" not in str(refused.value)
    assert_nothing_written(tmp_path / "out")
