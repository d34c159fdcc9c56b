"""The streaming merge against PEFT's own merge_and_unload, and its refusals of bad input.

Tiny Qwen3 (untied) and Qwen2 (tied embeddings) models are built from config; adapters are real PEFT
adapters with random non-zero lora_B so that every delta matters.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen3Config

from hubkit.errors import AdapterError, BaseModelMismatchError, MergeError
from hubkit.merge import lora, merge_adapter

TOKENIZER_FILES = {
    "tokenizer.json": '{"version": "1.0"}',
    "tokenizer_config.json": '{"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"}',
    "chat_template.jinja": "{% for m in messages %}{{ m.content }}{% endfor %}",
}
GENERATION_CONFIG = {"eos_token_id": [151643, 151645], "do_sample": True, "temperature": 0.6}


def _config(kind: str, tied: bool, intermediate: int = 64):
    config_cls = Qwen3Config if kind == "qwen3" else Qwen2Config
    return config_cls(
        vocab_size=128,
        hidden_size=32,
        intermediate_size=intermediate,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=64,
        tie_word_embeddings=tied,
    )


def build_base(path: Path, kind: str, dtype: torch.dtype, tied: bool, shard_size: str = "50GB", **kw) -> Path:
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(_config(kind, tied, **kw)).to(dtype)
    model.save_pretrained(path, max_shard_size=shard_size)
    (path / "generation_config.json").write_text(json.dumps(GENERATION_CONFIG))
    for name, text in TOKENIZER_FILES.items():
        (path / name).write_text(text)
    (path / "README.md").write_text("the base model's own card")
    return path


def build_adapter(base_dir: Path, path: Path, **lora_kwargs) -> Path:
    torch.manual_seed(1)
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    options = {"r": 4, "lora_alpha": 8, "target_modules": "all-linear", "init_lora_weights": False}
    model = get_peft_model(base, LoraConfig(**{**options, **lora_kwargs}))
    with torch.no_grad():  # init_lora_weights=False leaves small values; make every delta visible
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.2)
    model.save_pretrained(path)
    return path


def peft_merged_state(base_dir: Path, adapter_dir: Path, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=dtype)
    merged = PeftModel.from_pretrained(base, adapter_dir).merge_and_unload()
    return {k: v.detach() for k, v in merged.state_dict().items()}


def read_merged(out_dir: Path) -> dict[str, torch.Tensor]:
    tensors: dict[str, torch.Tensor] = {}
    for shard in sorted(out_dir.glob("*.safetensors")):
        tensors.update(load_file(shard))
    return tensors


def assert_within_one_ulp(ours: torch.Tensor, reference: torch.Tensor, name: str) -> None:
    assert ours.dtype == reference.dtype, name
    a, b = ours.to(torch.float64), reference.to(torch.float64)
    finfo = torch.finfo(ours.dtype)
    magnitude = torch.maximum(a.abs(), b.abs()).clamp_min(finfo.tiny)
    ulp = torch.exp2(torch.floor(torch.log2(magnitude))) * finfo.eps
    assert bool(((a - b).abs() <= ulp).all()), f"{name}: max diff {(a - b).abs().max().item()}"


def assert_nothing_written(out_dir: Path) -> None:
    assert not out_dir.exists()
    assert [p.name for p in out_dir.parent.iterdir() if p.name.startswith(f".{out_dir.name}")] == []


@pytest.fixture(scope="module")
def qwen3_bf16(tmp_path_factory) -> Path:
    return build_base(tmp_path_factory.mktemp("qwen3-bf16"), "qwen3", torch.bfloat16, tied=False)


@pytest.fixture(scope="module")
def qwen3_adapter(qwen3_bf16, tmp_path_factory) -> Path:
    return build_adapter(qwen3_bf16, tmp_path_factory.mktemp("adapter"))


@pytest.mark.parametrize(
    ("kind", "dtype", "tied", "shard_size", "lora"),
    [
        ("qwen3", torch.float32, False, "50GB", {}),
        ("qwen3", torch.bfloat16, False, "50GB", {}),
        ("qwen2", torch.bfloat16, True, "50GB", {}),
        ("qwen3", torch.bfloat16, False, "20KB", {"use_rslora": True}),
        (
            "qwen3",
            torch.float32,
            False,
            "20KB",
            {"rank_pattern": {"down_proj": 2}, "alpha_pattern": {"q_proj": 3}},
        ),
    ],
    ids=["qwen3-fp32", "qwen3-bf16", "qwen2-tied-bf16", "sharded-rslora-bf16", "sharded-patterns-fp32"],
)
def test_merge_matches_peft_merge_and_unload(tmp_path, kind, dtype, tied, shard_size, lora):
    base_dir = build_base(tmp_path / "base", kind, dtype, tied, shard_size)
    adapter_dir = build_adapter(base_dir, tmp_path / "adapter", **lora)
    out_dir = tmp_path / "merged"

    result = merge_adapter(base_dir, adapter_dir, out_dir)

    reference = peft_merged_state(base_dir, adapter_dir, dtype)
    ours = read_merged(out_dir)
    if tied:  # a tied model stores no lm_head; transformers rebuilds it from the embeddings
        assert "lm_head.weight" not in ours
        reference.pop("lm_head.weight")
    assert sorted(ours) == sorted(reference)
    base = read_merged(base_dir)
    for name, tensor in ours.items():
        assert_within_one_ulp(tensor, reference[name], name)
        if name.endswith("proj.weight"):  # every Linear was adapted and must have changed
            assert not torch.equal(tensor, base[name]), name
        else:
            assert torch.equal(tensor, base[name]), name
    assert result.merged_modules == 2 * 7  # q, k, v, o, gate, up, down in each of 2 layers
    assert result.dtype == str(dtype).removeprefix("torch.")
    assert list(result.shards) == sorted(p.name for p in base_dir.glob("*.safetensors"))


def test_sharded_merge_writes_index_and_carries_files(tmp_path):
    base_dir = build_base(tmp_path / "base", "qwen3", torch.bfloat16, tied=False, shard_size="20KB")
    adapter_dir = build_adapter(base_dir, tmp_path / "adapter")
    out_dir = tmp_path / "merged"
    shards = sorted(p.name for p in base_dir.glob("*.safetensors"))
    assert len(shards) > 2

    merge_adapter(base_dir, adapter_dir, out_dir)

    expected = {
        *shards,
        "model.safetensors.index.json",
        "config.json",
        "generation_config.json",
        *TOKENIZER_FILES,
    }
    assert {p.name for p in out_dir.iterdir()} == expected  # no README, no temporary files
    index = json.loads((out_dir / "model.safetensors.index.json").read_text())
    base_index = json.loads((base_dir / "model.safetensors.index.json").read_text())
    assert index["weight_map"] == base_index["weight_map"]
    assert index["metadata"]["total_size"] == base_index["metadata"]["total_size"]
    for shard in shards:
        assert set(load_file(out_dir / shard)) == {k for k, v in index["weight_map"].items() if v == shard}
        assert all(t.dtype == torch.bfloat16 for t in load_file(out_dir / shard).values())
    assert json.loads((out_dir / "generation_config.json").read_text())["eos_token_id"] == [151643, 151645]
    for name, text in TOKENIZER_FILES.items():
        assert (out_dir / name).read_text() == text
    assert json.loads((out_dir / "config.json").read_text())["dtype"] == "bfloat16"


def test_merged_folder_loads_with_the_logits_of_base_plus_adapter(qwen3_bf16, qwen3_adapter, tmp_path):
    out_dir = tmp_path / "merged"
    merge_adapter(qwen3_bf16, qwen3_adapter, out_dir)
    input_ids = torch.tensor([[1, 5, 9, 42, 7, 100]])

    with torch.no_grad():
        merged = AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32)
        base = AutoModelForCausalLM.from_pretrained(qwen3_bf16, dtype=torch.float32)
        plain = base(input_ids).logits
        unmerged = PeftModel.from_pretrained(base, qwen3_adapter)(input_ids).logits
        merged_logits = merged(input_ids).logits

    assert not torch.allclose(plain, unmerged, atol=1e-2)  # the adapter really changes the output
    torch.testing.assert_close(merged_logits, unmerged, atol=2e-2, rtol=2e-2)  # bf16 rounding of weights


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_lora_delta_is_computed_in_float32_in_row_blocks(monkeypatch, dtype):
    monkeypatch.setattr(lora, "BLOCK_ELEMENTS", 12)  # 2 rows per block, 3 blocks and a short one
    weight = torch.randn(7, 6).to(dtype)
    a = torch.randn(4, 6, dtype=torch.bfloat16)
    b = torch.randn(7, 4, dtype=torch.bfloat16)
    expected = (weight.float() + (b.float() @ a.float()) * 2.0).to(dtype)  # rounded once, at the end
    merged = weight.clone()
    lora.add_lora_delta_(merged, a, b, lora.lora_scale(8, 4, use_rslora=False), "m")
    assert_within_one_ulp(merged, expected, "m")
    assert lora.lora_scale(8, 16, use_rslora=True) == 2.0
    b[6, 0] = float("inf")  # in the last, short block
    with pytest.raises(MergeError, match="NaN or infinity"):
        lora.add_lora_delta_(weight.clone(), a, b, 1.0, "m")


# --- refusals: each leaves no output folder behind ------------------------------------------------


def test_refuses_adapter_for_another_base(qwen3_adapter, tmp_path):
    other = build_base(tmp_path / "other", "qwen3", torch.bfloat16, tied=False, intermediate=48)
    with pytest.raises(
        BaseModelMismatchError, match=r"down_proj has shape \(32, 64\) but the base weight is \(32, 48\)"
    ):
        merge_adapter(other, qwen3_adapter, tmp_path / "out")
    assert_nothing_written(tmp_path / "out")


def test_refuses_missing_shard(qwen3_adapter, tmp_path):
    base_dir = build_base(tmp_path / "base", "qwen3", torch.bfloat16, tied=False, shard_size="20KB")
    missing = sorted(base_dir.glob("model-*.safetensors"))[1]
    missing.unlink()
    with pytest.raises(MergeError, match=f"{missing.name} is missing"):
        merge_adapter(base_dir, qwen3_adapter, tmp_path / "out")
    assert_nothing_written(tmp_path / "out")


@pytest.mark.parametrize("damage", ["truncated", "garbage-header"])
def test_refuses_corrupt_shard(qwen3_bf16, qwen3_adapter, tmp_path, damage):
    base_dir = shutil.copytree(qwen3_bf16, tmp_path / "base")
    shard = base_dir / "model.safetensors"
    data = shard.read_bytes()
    shard.write_bytes(data[:-100] if damage == "truncated" else data[:8] + b"\xff" * 64 + data[72:])
    with pytest.raises(MergeError, match=r"model\.safetensors .*(truncated|corrupt)"):
        merge_adapter(base_dir, qwen3_adapter, tmp_path / "out")
    assert_nothing_written(tmp_path / "out")


def test_refuses_lora_on_tied_lm_head(tmp_path):
    base_dir = build_base(tmp_path / "base", "qwen2", torch.bfloat16, tied=True)
    adapter_dir = build_adapter(base_dir, tmp_path / "adapter", target_modules=["q_proj", "lm_head"])
    with pytest.raises(MergeError, match="ties lm_head to the embeddings"):
        merge_adapter(base_dir, adapter_dir, tmp_path / "out")
    assert_nothing_written(tmp_path / "out")


def test_refuses_dora(qwen3_bf16, tmp_path):
    adapter_dir = build_adapter(qwen3_bf16, tmp_path / "adapter", use_dora=True)
    with pytest.raises(MergeError, match="DoRA"):
        merge_adapter(qwen3_bf16, adapter_dir, tmp_path / "out")
    assert_nothing_written(tmp_path / "out")


def test_non_finite_delta_removes_the_partial_output(qwen3_bf16, qwen3_adapter, tmp_path):
    adapter_dir = shutil.copytree(qwen3_adapter, tmp_path / "adapter")
    weights = load_file(adapter_dir / "adapter_model.safetensors")
    last = sorted(k for k in weights if "lora_B" in k)[-1]
    weights[last][0, 0] = float("nan")
    save_file(weights, adapter_dir / "adapter_model.safetensors")
    with pytest.raises(MergeError, match="NaN"):
        merge_adapter(qwen3_bf16, adapter_dir, tmp_path / "out")
    assert_nothing_written(tmp_path / "out")


def test_refuses_non_empty_output_folder(qwen3_bf16, qwen3_adapter, tmp_path):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "keep.txt").write_text("mine")
    with pytest.raises(MergeError, match="not empty"):
        merge_adapter(qwen3_bf16, qwen3_adapter, out_dir)
    assert [p.name for p in out_dir.iterdir()] == ["keep.txt"]


def test_refuses_adapter_without_lora_weights(qwen3_bf16, qwen3_adapter, tmp_path):
    adapter_dir = shutil.copytree(qwen3_adapter, tmp_path / "adapter")
    (adapter_dir / "adapter_model.safetensors").unlink()
    with pytest.raises(AdapterError, match=r"adapter_model\.safetensors"):
        merge_adapter(qwen3_bf16, adapter_dir, tmp_path / "out")
    assert_nothing_written(tmp_path / "out")
