"""The streaming merge against PEFT's own merge_and_unload, and its refusals of bad input.

Bases are the session's tiny Qwen3 (untied) and Qwen2 (tied embeddings) models, re-saved in bf16
and/or in several shards where a case needs it; adapters are real PEFT adapters whose lora_B is
random and non-zero, so that every delta matters.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from peft import LoraConfig, PeftModel, get_peft_model
from peft.tuners.lora import LoraLayer
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from hubkit.errors import AdapterError, BaseModelMismatchError, MergeError
from hubkit.merge import fetch_base_snapshot, lora, merge_adapter

LINEARS_PER_LAYER = 7  # q, k, v, o, gate, up, down
INPUT_IDS = torch.tensor([[151644, 872, 198, 3838, 374, 220, 17, 10, 18, 30, 151645]])


def resave_base(source: Path, out_dir: Path, dtype: torch.dtype, shard_size: str = "50GB") -> Path:
    """The model in `source` saved again in `dtype` and shards of `shard_size`, with its other files."""
    model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype)
    model.save_pretrained(out_dir, max_shard_size=shard_size)
    for path in source.iterdir():
        if not (out_dir / path.name).exists() and "safetensors" not in path.name:
            shutil.copyfile(path, out_dir / path.name)
    return out_dir


def build_adapter(base_dir: Path, out_dir: Path, **lora_options) -> Path:
    torch.manual_seed(1)
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    options = {"r": 4, "lora_alpha": 8, "target_modules": "all-linear", "init_lora_weights": False}
    model = get_peft_model(base, LoraConfig(**{**options, **lora_options}))
    with torch.no_grad():  # init_lora_weights=False leaves small values; make every delta visible
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.2)
    model.save_pretrained(out_dir)
    return out_dir


def peft_merged_state(base_dir: Path, adapter_dir: Path, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=dtype)
    merged = PeftModel.from_pretrained(base, adapter_dir).merge_and_unload()
    return {k: v.detach() for k, v in merged.state_dict().items()}


def fp32_merge_error_bounds(base_dir: Path, adapter_dir: Path) -> dict[str, torch.Tensor]:
    """Per weight, how far two correct float32 merges W + s * B @ A may differ, whatever their BLAS.

    Each computes an r-term dot product per element, scales it and adds W, all in float32: each result
    lies within (r + 2) * u * (|W| + s * |B| @ |A|) of the exact value (u = eps / 2, the standard
    bound for a sum of r + 2 rounded terms), so two of them lie within twice that. Only the summation
    order differs between BLAS kernels, and this bound holds for every order.
    """
    model = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32), adapter_dir
    )
    eps = torch.finfo(torch.float32).eps
    bounds = {}
    for name, module in model.named_modules():
        if isinstance(module, LoraLayer) and "default" in module.lora_A:
            a = module.lora_A["default"].weight.detach().to(torch.float64)
            b = module.lora_B["default"].weight.detach().to(torch.float64)
            w = module.get_base_layer().weight.detach().to(torch.float64)
            magnitude = w.abs() + module.scaling["default"] * (b.abs() @ a.abs())
            weight_name = name.removeprefix("base_model.model.") + ".weight"
            bounds[weight_name] = (a.shape[0] + 2) * eps * magnitude  # 2 * (r + 2) * (eps / 2)
    return bounds


def assert_within_bound(ours: torch.Tensor, reference: torch.Tensor, bound: torch.Tensor, name: str) -> None:
    diff = (ours.to(torch.float64) - reference.to(torch.float64)).abs()
    assert bool((diff <= bound).all()), (
        f"{name}: max diff {diff.max().item()}, bound there {bound.flatten()[diff.argmax()].item()}"
    )


def read_weights(model_dir: Path) -> dict[str, torch.Tensor]:
    tensors: dict[str, torch.Tensor] = {}
    for shard in sorted(model_dir.glob("*.safetensors")):
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
def base_variant(request, tmp_path_factory) -> Callable[[str, torch.dtype, str], Path]:
    """`base_variant("tiny_qwen3", torch.bfloat16, "20MB")`: a session tiny model re-saved (cached)."""
    made: dict[tuple[str, torch.dtype, str], Path] = {}

    def get(fixture: str, dtype: torch.dtype, shard_size: str = "50GB") -> Path:
        source = request.getfixturevalue(fixture).local_dir
        if dtype == torch.float32 and shard_size == "50GB":
            return source  # the fixture itself: fp32, one shard
        if (fixture, dtype, shard_size) not in made:
            out_dir = tmp_path_factory.mktemp(f"{fixture}-{str(dtype)[6:]}-{shard_size}")
            made[fixture, dtype, shard_size] = resave_base(source, out_dir, dtype, shard_size)
        return made[fixture, dtype, shard_size]

    return get


@pytest.fixture(scope="module")
def qwen3_adapter(tiny_qwen3, tmp_path_factory) -> Path:
    return build_adapter(tiny_qwen3.local_dir, tmp_path_factory.mktemp("adapter"))


@pytest.mark.parametrize(
    ("fixture", "dtype", "shard_size", "lora_options"),
    [
        ("tiny_qwen3", torch.float32, "50GB", {}),
        ("tiny_qwen3", torch.bfloat16, "50GB", {}),
        ("tiny_qwen2_tied", torch.bfloat16, "50GB", {}),
        ("tiny_qwen3", torch.bfloat16, "20MB", {"use_rslora": True}),
        (
            "tiny_qwen2_tied",
            torch.float32,
            "20MB",
            {"rank_pattern": {"down_proj": 2}, "alpha_pattern": {"q_proj": 3}},
        ),
    ],
    ids=[
        "qwen3-fp32",
        "qwen3-bf16",
        "qwen2-tied-bf16",
        "qwen3-sharded-rslora-bf16",
        "qwen2-tied-sharded-patterns-fp32",
    ],
)
def test_merge_matches_peft_merge_and_unload(
    base_variant, tmp_path, fixture, dtype, shard_size, lora_options
):
    base_dir = base_variant(fixture, dtype, shard_size)
    adapter_dir = build_adapter(base_dir, tmp_path / "adapter", **lora_options)

    result = merge_adapter(base_dir, adapter_dir, tmp_path / "merged")

    reference = peft_merged_state(base_dir, adapter_dir, dtype)
    ours = read_weights(tmp_path / "merged")
    if fixture == "tiny_qwen2_tied":  # a tied model stores no lm_head; transformers ties it on load
        assert "lm_head.weight" not in ours
        reference.pop("lm_head.weight")
    assert sorted(ours) == sorted(reference)
    base = read_weights(base_dir)
    # float32 results depend on the BLAS kernel's summation order: compared within the bound from the
    # math. bfloat16 rounds the float32 sum once, and both merges land on the same value (within 1 ulp).
    bounds = fp32_merge_error_bounds(base_dir, adapter_dir) if dtype == torch.float32 else {}
    for name, tensor in ours.items():
        if name in bounds:
            assert_within_bound(tensor, reference[name], bounds[name], name)
        else:
            assert_within_one_ulp(tensor, reference[name], name)
        if name.endswith("proj.weight"):  # every Linear was adapted and must have changed
            assert not torch.equal(tensor, base[name]), name
        else:
            assert torch.equal(tensor, base[name]), name
    assert result.merged_modules == 2 * LINEARS_PER_LAYER
    assert result.dtype == str(dtype).removeprefix("torch.")
    assert list(result.shards) == sorted(p.name for p in base_dir.glob("*.safetensors"))
    assert len(result.shards) == (1 if shard_size == "50GB" else 2)


def test_sharded_merge_writes_the_index_dtype_and_the_base_files(base_variant, qwen3_adapter, tmp_path):
    base_dir = base_variant("tiny_qwen3", torch.bfloat16, "20MB")
    out_dir = tmp_path / "merged"

    merge_adapter(base_dir, qwen3_adapter, out_dir)

    shards = sorted(p.name for p in base_dir.glob("*.safetensors"))
    carried = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"]
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(
        [*shards, "model.safetensors.index.json", *carried, "vocab.json", "merges.txt"]
    )  # no temporary files
    index = json.loads((out_dir / "model.safetensors.index.json").read_text())
    base_index = json.loads((base_dir / "model.safetensors.index.json").read_text())
    assert index["weight_map"] == base_index["weight_map"]
    assert index["metadata"]["total_size"] == base_index["metadata"]["total_size"]
    for shard in shards:
        tensors = load_file(out_dir / shard)
        assert set(tensors) == {k for k, v in index["weight_map"].items() if v == shard}
        assert {t.dtype for t in tensors.values()} == {torch.bfloat16}
    assert json.loads((out_dir / "config.json").read_text())["dtype"] == "bfloat16"
    for name in ["generation_config.json", "tokenizer.json", "tokenizer_config.json"]:
        assert (out_dir / name).read_bytes() == (base_dir / name).read_bytes()
    assert AutoTokenizer.from_pretrained(out_dir).chat_template


def test_merged_tied_model_on_the_hub_gives_the_logits_of_base_plus_adapter(
    tiny_qwen2_tied, hub_api, new_repo_id, tmp_path
):
    adapter_dir = build_adapter(tiny_qwen2_tied.local_dir, tmp_path / "adapter")
    merge_adapter(tiny_qwen2_tied.local_dir, adapter_dir, tmp_path / "merged")
    hub_api.create_repo(new_repo_id)
    hub_api.upload_folder(repo_id=new_repo_id, folder_path=tmp_path / "merged")

    merged = AutoModelForCausalLM.from_pretrained(new_repo_id).eval()
    base = AutoModelForCausalLM.from_pretrained(tiny_qwen2_tied.repo_id).eval()
    with torch.no_grad():
        plain = base(INPUT_IDS).logits
        with_adapter = PeftModel.from_pretrained(base, adapter_dir).eval()(INPUT_IDS).logits
        merged_logits = merged(INPUT_IDS).logits

    assert merged.config.tie_word_embeddings
    assert merged.lm_head.weight.data_ptr() == merged.model.embed_tokens.weight.data_ptr()
    assert not torch.allclose(plain, with_adapter, atol=1e-3)  # the adapter changes the output
    torch.testing.assert_close(merged_logits, with_adapter, atol=1e-5, rtol=1e-4)
    assert AutoTokenizer.from_pretrained(new_repo_id).chat_template == tiny_qwen2_tied_template(
        tiny_qwen2_tied
    )


def tiny_qwen2_tied_template(model) -> str:
    return AutoTokenizer.from_pretrained(model.local_dir).chat_template


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_lora_delta_is_computed_in_float32_in_row_blocks(monkeypatch, dtype):
    monkeypatch.setattr(lora, "BLOCK_ELEMENTS", 12)  # 2 rows per block: 3 blocks and a short one
    weight = torch.randn(7, 6).to(dtype)
    # A LoRA delta is small next to the weight, as here; then one rounding at the end is within one ulp.
    a = (torch.randn(4, 6) * 0.1).to(torch.bfloat16)
    b = (torch.randn(7, 4) * 0.1).to(torch.bfloat16)
    exact = weight.double() + (b.double() @ a.double()) * 2.0  # float64: exact for these few terms
    merged = weight.clone()
    lora.add_lora_delta_(merged, a, b, lora.lora_scale(8, 4, use_rslora=False), "m")
    if dtype == torch.float32:  # the float32 sum's error, whatever the order BLAS sums in (see above)
        bound = (
            (4 + 2)
            * torch.finfo(torch.float32).eps
            / 2
            * (weight.double().abs() + 2.0 * (b.double().abs() @ a.double().abs()))
        )
        assert_within_bound(merged, exact, bound, "m")
    else:  # rounded once, at the end
        assert_within_one_ulp(merged, exact.to(dtype), "m")
    assert lora.lora_scale(8, 16, use_rslora=True) == 2.0
    b[6, 0] = float("inf")  # in the last, short block
    with pytest.raises(MergeError, match="NaN or infinity"):
        lora.add_lora_delta_(weight.clone(), a, b, 1.0, "m")


# --- refusals: each leaves no output folder behind ------------------------------------------------


def test_refuses_an_adapter_for_another_base(tiny_qwen3, qwen3_adapter, tmp_path):
    config = AutoConfig.from_pretrained(tiny_qwen3.local_dir)
    config.intermediate_size = 96
    other = tmp_path / "other"
    AutoModelForCausalLM.from_config(config).save_pretrained(other)
    with pytest.raises(
        BaseModelMismatchError, match=r"down_proj has shape \(64, 128\) but the base weight is \(64, 96\)"
    ):
        merge_adapter(other, qwen3_adapter, tmp_path / "out")
    assert_nothing_written(tmp_path / "out")


def test_refuses_a_missing_shard(base_variant, qwen3_adapter, tmp_path):
    base_dir = shutil.copytree(base_variant("tiny_qwen3", torch.bfloat16, "20MB"), tmp_path / "base")
    missing = sorted(base_dir.glob("model-*.safetensors"))[1]
    missing.unlink()
    with pytest.raises(MergeError, match=f"{missing.name} is missing"):
        merge_adapter(base_dir, qwen3_adapter, tmp_path / "out")
    assert_nothing_written(tmp_path / "out")


@pytest.mark.parametrize("damage", ["truncated", "garbage-header"])
def test_refuses_a_corrupt_shard(tiny_qwen3, qwen3_adapter, tmp_path, damage):
    base_dir = shutil.copytree(tiny_qwen3.local_dir, tmp_path / "base")
    shard = base_dir / "model.safetensors"
    data = shard.read_bytes()
    shard.write_bytes(data[:-100] if damage == "truncated" else data[:8] + b"\xff" * 64 + data[72:])
    with pytest.raises(MergeError, match=r"model\.safetensors .*(truncated|corrupt)"):
        merge_adapter(base_dir, qwen3_adapter, tmp_path / "out")
    assert_nothing_written(tmp_path / "out")


def test_refuses_a_lora_on_a_tied_lm_head(tiny_qwen2_tied, tmp_path):
    adapter_dir = build_adapter(
        tiny_qwen2_tied.local_dir, tmp_path / "adapter", target_modules=["q_proj", "lm_head"]
    )
    with pytest.raises(MergeError, match="ties lm_head to the embeddings"):
        merge_adapter(tiny_qwen2_tied.local_dir, adapter_dir, tmp_path / "out")
    assert_nothing_written(tmp_path / "out")


def test_a_non_finite_delta_removes_the_partial_output(tiny_qwen3, qwen3_adapter, tmp_path):
    adapter_dir = shutil.copytree(qwen3_adapter, tmp_path / "adapter")
    weights = load_file(adapter_dir / "adapter_model.safetensors")
    last = sorted(k for k in weights if "lora_B" in k)[-1]  # found after other tensors were written
    weights[last][0, 0] = float("nan")
    save_file(weights, adapter_dir / "adapter_model.safetensors")
    with pytest.raises(MergeError, match="NaN"):
        merge_adapter(tiny_qwen3.local_dir, adapter_dir, tmp_path / "out")
    assert_nothing_written(tmp_path / "out")


def test_refuses_a_non_empty_output_folder(tiny_qwen3, qwen3_adapter, tmp_path, monkeypatch):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "keep.txt").write_text("mine")
    with pytest.raises(MergeError, match="not empty"):
        merge_adapter(tiny_qwen3.local_dir, qwen3_adapter, out_dir)
    monkeypatch.chdir(out_dir)
    with pytest.raises(MergeError, match="not empty"):
        merge_adapter(tiny_qwen3.local_dir, qwen3_adapter, Path("."))
    assert [p.name for p in out_dir.iterdir()] == ["keep.txt"]


def test_refuses_an_adapter_without_weights(tiny_qwen3, qwen3_adapter, tmp_path):
    adapter_dir = shutil.copytree(qwen3_adapter, tmp_path / "adapter")
    (adapter_dir / "adapter_model.safetensors").unlink()
    with pytest.raises(AdapterError, match=r"adapter_model\.safetensors"):
        merge_adapter(tiny_qwen3.local_dir, adapter_dir, tmp_path / "out")
    assert_nothing_written(tmp_path / "out")


def test_a_failed_write_stops_the_merge_and_leaves_nothing(tiny_qwen3, qwen3_adapter, tmp_path, monkeypatch):
    from hubkit.merge import shards

    real_write = shards.ShardWriter.write_tensor
    calls = []

    def failing_write(self, name, tensor):  # as a full disk would, on the writer thread
        calls.append(name)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real_write(self, name, tensor)

    monkeypatch.setattr(shards.ShardWriter, "write_tensor", failing_write)
    with pytest.raises(OSError, match="No space left"):
        merge_adapter(tiny_qwen3.local_dir, qwen3_adapter, tmp_path / "out")
    assert_nothing_written(tmp_path / "out")


def test_without_copy_file_range_the_output_is_the_same(tiny_qwen3, qwen3_adapter, tmp_path, monkeypatch):
    import errno
    import os

    merge_adapter(tiny_qwen3.local_dir, qwen3_adapter, tmp_path / "fast")

    def unsupported(*args, **kwargs):  # as on a kernel or file system without copy_file_range
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(os, "copy_file_range", unsupported)
    merge_adapter(tiny_qwen3.local_dir, qwen3_adapter, tmp_path / "plain")
    assert (tmp_path / "plain" / "model.safetensors").read_bytes() == (
        tmp_path / "fast" / "model.safetensors"
    ).read_bytes()


def test_fetch_base_snapshot_downloads_only_what_a_merge_needs(tiny_qwen3, local_hub):
    assert fetch_base_snapshot(str(tiny_qwen3.local_dir)) == tiny_qwen3.local_dir  # a local folder as is

    folder = fetch_base_snapshot(tiny_qwen3.repo_id, endpoint=local_hub.endpoint)

    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in tiny_qwen3.local_dir.iterdir())
    assert (folder / "model.safetensors").read_bytes() == (
        tiny_qwen3.local_dir / "model.safetensors"
    ).read_bytes()
    with pytest.raises(MergeError, match="hubkit-test/no-such-model was not found on the Hub"):
        fetch_base_snapshot("hubkit-test/no-such-model", endpoint=local_hub.endpoint)


@pytest.mark.parametrize(
    ("base_config", "merged_config"),
    [({}, {"dtype": "float32"}), ({"torch_dtype": "bfloat16"}, {"torch_dtype": "float32"})],
)
def test_the_merged_config_names_the_dtype_of_the_shards(
    tiny_qwen3, qwen3_adapter, tmp_path, base_config, merged_config
):
    base_dir = shutil.copytree(tiny_qwen3.local_dir, tmp_path / "base")
    config = json.loads((base_dir / "config.json").read_text())
    config.pop("dtype")  # the base's config names no dtype, or a wrong one under the old key
    (base_dir / "config.json").write_text(
        json.dumps({**config, **base_config, "_name_or_path": str(base_dir)})
    )

    merge_adapter(base_dir, qwen3_adapter, tmp_path / "merged")

    merged = json.loads((tmp_path / "merged" / "config.json").read_text())
    assert {k: merged[k] for k in ("dtype", "torch_dtype") if k in merged} == merged_config
    assert "_name_or_path" not in merged  # a local path is never carried over
