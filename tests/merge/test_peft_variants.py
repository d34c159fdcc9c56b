"""Adapters made with PEFT's other options, merged by hubkit against PEFT's own merge_and_unload: the merged
model is PEFT's, within the bound the dtype gives, or the merge is refused in one line and writes nothing.

Adapters are built with the real PEFT on the session's tiny Qwen3, as `test_merge` builds its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from fixtures_runs import LORA_ALPHA, LORA_R
from gguf import GGUFReader
from peft import LoraConfig, PeftModel, get_peft_model
from peft.tuners.lora import LoraLayer
from safetensors import safe_open
from test_merge import (
    assert_nothing_written,
    assert_within_bound,
    assert_within_one_ulp,
    base_variant,  # noqa: F401  (the fixture: a tiny model re-saved in a dtype)
    fp32_merge_error_bounds,
    peft_merged_state,
    read_weights,
)
from transformers import AutoModelForCausalLM, AutoTokenizer

from hubkit.adapters.base_check import BaseConfig, check_against_base
from hubkit.errors import AdapterError, BaseModelMismatchError, MergeError
from hubkit.export.gguf import export_gguf
from hubkit.formats.gguf import GGUFMetadata
from hubkit.merge import merge_adapter

TARGETS = ["q_proj", "v_proj", "down_proj"]
CONVERSION = "path_initial_model_for_weight_conversion"


def trained(model: torch.nn.Module, seed: int = 2) -> None:
    """Move every LoRA weight as training would (and DoRA's magnitudes, and the copies of modules_to_save),
    so each one matters."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_" in name or "modules_to_save" in name:
                param.add_(0.05 * torch.randn_like(param))


def fp32_bound(reference: dict[str, torch.Tensor], base: dict[str, torch.Tensor], terms: int) -> dict:
    """Per weight, how far two float32 computations of it may differ: `terms` rounded terms, each at most
    the largest magnitude involved (the base weight or the merged one), twice (u = eps / 2, both sides)."""
    eps = torch.finfo(torch.float32).eps
    return {
        name: terms * eps * torch.maximum(base[name].double().abs(), ref.double().abs()).max()
        for name, ref in reference.items()
    }


def assert_close_within(ours: dict, reference: dict, bounds: dict) -> None:
    assert sorted(ours) == sorted(reference)
    for name, tensor in ours.items():
        diff = (tensor.double() - reference[name].double()).abs().max().item()
        assert diff <= bounds[name], f"{name}: max diff {diff}, bound {bounds[name]}"


# --- 1. inits that change the base weights ---------------------------------------------------------------


def build_base_changing(base_dir: Path, out_dir: Path, init: str) -> PeftModel:
    """A PEFT adapter initialised with `init` from the base, then 'trained'; its initial state is saved in
    `out_dir/initial` (as PEFT's conversion needs it) and the trained one in `out_dir/trained`."""
    torch.manual_seed(1)
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    model = get_peft_model(
        base, LoraConfig(r=4, lora_alpha=8, target_modules=TARGETS, init_lora_weights=init)
    )
    model.peft_config["default"].init_lora_weights = True  # PEFT's recipe: the initial adapter as plain LoRA
    model.save_pretrained(out_dir / "initial")
    model.peft_config["default"].init_lora_weights = init
    trained(model)
    model.save_pretrained(out_dir / "trained")
    return model


@pytest.mark.parametrize("init", ["pissa", "pissa_niter_4", "olora"])
def test_refuses_to_merge_an_adapter_initialised_from_the_base(tiny_qwen3, tmp_path, init):
    build_base_changing(tiny_qwen3.local_dir, tmp_path, init)
    adapter_dir = tmp_path / "trained"
    assert json.loads((adapter_dir / "adapter_config.json").read_text())["init_lora_weights"] == init

    with pytest.raises(MergeError, match=CONVERSION) as refused:
        merge_adapter(tiny_qwen3.local_dir, adapter_dir, tmp_path / "out")

    assert "\n" not in str(refused.value)
    assert_nothing_written(tmp_path / "out")
    # The refusal is needed: the model PEFT loads is not W + s * B @ A on the saved base.
    peft_model = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(tiny_qwen3.local_dir, dtype=torch.float32), adapter_dir
    )
    base = read_weights(tiny_qwen3.local_dir)
    layer = next(
        m for n, m in peft_model.named_modules() if isinstance(m, LoraLayer) and n.endswith("q_proj")
    )
    name = next(n for n, m in peft_model.named_modules() if m is layer).removeprefix("base_model.model.")
    naive = base[f"{name}.weight"] + layer.get_delta_weight("default")
    merged = peft_model.merge_and_unload().state_dict()[f"{name}.weight"]
    assert (naive - merged).abs().max() > 1e-2


@pytest.mark.parametrize("init", ["corda", "loftq", "lora_ga"])
def test_refuses_the_other_base_changing_inits_by_their_config(tiny_qwen3, tmp_path, init):
    # CorDA and LoftQ need packages PEFT does not install (attr, scipy) and LoRA-GA a training step: the
    # saved config is what hubkit reads, so a real adapter's config says the init.
    build_base_changing(tiny_qwen3.local_dir, tmp_path, "olora")
    adapter_dir = tmp_path / "trained"
    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    (adapter_dir / "adapter_config.json").write_text(json.dumps({**config, "init_lora_weights": init}))

    with pytest.raises(MergeError, match="merge_and_unload" if init == "loftq" else CONVERSION):
        merge_adapter(tiny_qwen3.local_dir, adapter_dir, tmp_path / "out")
    assert_nothing_written(tmp_path / "out")


@pytest.mark.parametrize("init", ["pissa", "olora"])
def test_a_converted_adapter_merges_to_the_model_peft_loads_unconverted(tiny_qwen3, tmp_path, init):
    model = build_base_changing(tiny_qwen3.local_dir, tmp_path, init)
    model.save_pretrained(
        tmp_path / "converted", path_initial_model_for_weight_conversion=str(tmp_path / "initial")
    )
    converted = json.loads((tmp_path / "converted" / "adapter_config.json").read_text())
    assert (converted["init_lora_weights"], converted["r"]) == (True, 8)  # PEFT rewrote it as a plain LoRA

    merge_adapter(tiny_qwen3.local_dir, tmp_path / "converted", tmp_path / "merged")

    # PEFT redoes the init on the base as it loads the unconverted adapter (W_res = W - s * B0 @ A0).
    reference = peft_merged_state(tiny_qwen3.local_dir, tmp_path / "trained", torch.float32)
    ours = read_weights(tmp_path / "merged")
    base = read_weights(tiny_qwen3.local_dir)
    # W + s * (B @ A - B0 @ A0) against (W - s * B0 @ A0) + s * B @ A: 2r + 3 rounded terms each side.
    assert_close_within(ours, reference, fp32_bound(reference, base, terms=2 * 8 + 6))
    assert any(not torch.equal(ours[name], base[name]) for name in base if "q_proj" in name)


# --- 2. DoRA -------------------------------------------------------------------------------------------------


def dora_bounds(base_dir: Path, adapter_dir: Path, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Per weight, how far hubkit's DoRA merge may lie from PEFT's, from the rounding each one does.

    Both compute f * (W + d), d = s * B @ A, f = m / ||W + d|| per row (n = in_features terms in the norm).
    In float32 each side errs by at most u * |f| * ((r + 2) * (|W| + s|B||A|) + (n + 4) * |W + d|), u = eps / 2.
    In bfloat16 PEFT rounds d, W + d, the norm and the result (u each: u * |f| * (|d| + |W + d|) + 2u * |x|),
    hubkit only the result (u * |x|); x is the exact merged value.
    """
    model = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(base_dir, dtype=dtype), adapter_dir
    )
    eps = torch.finfo(dtype).eps
    bounds = {}
    for name, layer in model.named_modules():
        if isinstance(layer, LoraLayer) and "default" in layer.lora_A:
            a = layer.lora_A["default"].weight.detach().double()
            b = layer.lora_B["default"].weight.detach().double()
            w = layer.get_base_layer().weight.detach().double()
            m = layer.lora_magnitude_vector["default"].weight.detach().double()
            s = layer.scaling["default"]
            summed = w + s * (b @ a)
            f = (m / torch.linalg.vector_norm(summed, dim=1)).abs().unsqueeze(1)
            exact = f * summed.abs()
            delta = s * (b.abs() @ a.abs())
            if dtype == torch.float32:
                bound = eps * f * ((a.shape[0] + 2) * (w.abs() + delta) + (a.shape[1] + 4) * summed.abs())
            else:
                bound = eps / 2 * (f * (delta + w.abs() + delta) + 3 * exact)
            bounds[name.removeprefix("base_model.model.") + ".weight"] = bound
    return bounds


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_dora_merges_as_peft_merges_it(base_variant, tmp_path, dtype):  # noqa: F811
    base_dir = base_variant("tiny_qwen3", dtype)
    torch.manual_seed(1)
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", use_dora=True))
    trained(model)  # lora_B and the magnitudes move off their init (B = 0, m = ||W||), as training moves them
    model.save_pretrained(tmp_path / "adapter")

    result = merge_adapter(base_dir, tmp_path / "adapter", tmp_path / "merged")

    reference = peft_merged_state(base_dir, tmp_path / "adapter", dtype)
    ours = read_weights(tmp_path / "merged")
    base_weights = read_weights(base_dir)
    assert sorted(ours) == sorted(reference)
    bounds = dora_bounds(base_dir, tmp_path / "adapter", dtype)
    assert len(bounds) == result.merged_modules == 14
    for name, tensor in ours.items():
        assert tensor.dtype == dtype
        if name in bounds:
            diff = (tensor.double() - reference[name].double()).abs()
            assert bool((diff <= bounds[name]).all()), f"{name}: max diff {diff.max().item()}"
            assert not torch.equal(tensor, base_weights[name]), name
        else:
            assert torch.equal(tensor, reference[name]), name


# --- 3. adapters that carry embeddings ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize(
    "saved",
    [{"modules_to_save": ["embed_tokens", "lm_head"]}, {"save_embedding_layers": True}],
    ids=["modules-to-save", "save-embedding-layers"],
)
def test_whole_embeddings_an_adapter_carries_replace_the_bases_as_peft_loads_them(
    base_variant,  # noqa: F811
    tmp_path,
    dtype,
    saved,
):
    base_dir = base_variant("tiny_qwen3", dtype)
    torch.manual_seed(1)
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    to_save = {k: v for k, v in saved.items() if k == "modules_to_save"}
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=TARGETS, **to_save))
    trained(model)
    model.save_pretrained(
        tmp_path / "adapter", save_embedding_layers=saved.get("save_embedding_layers", "auto")
    )
    whole = {"model.embed_tokens.weight", "lm_head.weight"}
    assert {f"base_model.model.{name}" for name in whole} <= set(read_weights_keys(tmp_path / "adapter"))

    result = merge_adapter(base_dir, tmp_path / "adapter", tmp_path / "merged")

    reference = peft_merged_state(base_dir, tmp_path / "adapter", dtype)
    ours = read_weights(tmp_path / "merged")
    base_weights = read_weights(base_dir)
    assert sorted(ours) == sorted(reference)
    assert result.merged_modules == 2 * len(TARGETS)  # the LoRA modules; the whole weights are replaced
    bounds = fp32_merge_error_bounds(base_dir, tmp_path / "adapter") if dtype == torch.float32 else {}
    for name, tensor in ours.items():
        assert tensor.dtype == dtype, name
        if name in whole:  # PEFT's trained copy (modules_to_save) or the saved one, in the base's dtype
            assert torch.equal(tensor, reference[name].to(dtype)), name
            assert torch.equal(tensor, base_weights[name]) == ("save_embedding_layers" in saved), name
        elif name in bounds:
            assert_within_bound(tensor, reference[name], bounds[name], name)
        else:
            assert_within_one_ulp(tensor, reference[name], name)


def test_whole_embeddings_of_a_tied_base_are_refused(tiny_qwen2_tied, tmp_path):
    torch.manual_seed(1)
    base = AutoModelForCausalLM.from_pretrained(tiny_qwen2_tied.local_dir, dtype=torch.float32)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=TARGETS, modules_to_save=["embed_tokens"])
    model = get_peft_model(base, config)
    trained(model)
    model.save_pretrained(tmp_path / "adapter")
    with pytest.raises(
        MergeError, match=r"whole model\.embed_tokens but the base model ties lm_head.*merge_and_unload"
    ):
        merge_adapter(tiny_qwen2_tied.local_dir, tmp_path / "adapter", tmp_path / "out")
    assert_nothing_written(tmp_path / "out")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_a_lora_on_embed_tokens_merges_as_peft_merges_it(base_variant, tmp_path, dtype):  # noqa: F811
    base_dir = base_variant("tiny_qwen3", dtype)
    torch.manual_seed(1)
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "embed_tokens"]))
    trained(model)
    model.save_pretrained(tmp_path / "adapter")  # with the frozen embed_tokens.base_layer.weight
    saved = {"lora_embedding_A", "lora_embedding_B", "base_layer.weight"}
    assert {f"base_model.model.model.embed_tokens.{key}" for key in saved} <= set(
        read_weights_keys(tmp_path / "adapter")
    )

    result = merge_adapter(base_dir, tmp_path / "adapter", tmp_path / "merged")

    reference = peft_merged_state(base_dir, tmp_path / "adapter", dtype)
    ours = read_weights(tmp_path / "merged")
    base_weights = read_weights(base_dir)
    assert sorted(ours) == sorted(reference) and result.merged_modules == 2 + 1
    peft_model = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(base_dir, dtype=dtype), tmp_path / "adapter"
    )
    embedding = peft_model.base_model.model.model.embed_tokens
    a = embedding.lora_embedding_A["default"].detach().double()
    b = embedding.lora_embedding_B["default"].detach().double()
    # delta = (B @ A).T * s. float32: a sum of r products each side, test_merge's bound turned around.
    # bfloat16: PEFT rounds the delta to bf16 and then the sum (u |d| + u |W + d|), hubkit the sum (u |x|).
    w = base_weights["model.embed_tokens.weight"].double().abs()
    d = embedding.scaling["default"] * (b.abs() @ a.abs()).T
    if dtype == torch.float32:
        bounds = {
            "model.embed_tokens.weight": (a.shape[0] + 2) * torch.finfo(dtype).eps * (w + d),
            **fp32_merge_error_bounds(base_dir, tmp_path / "adapter"),
        }
    else:
        bounds = {"model.embed_tokens.weight": torch.finfo(dtype).eps * (w + 1.5 * d)}
    for name, tensor in ours.items():
        if name in bounds:
            assert_within_bound(tensor, reference[name], bounds[name], name)
        else:
            assert_within_one_ulp(tensor, reference[name], name)
    assert not torch.equal(ours["model.embed_tokens.weight"], base_weights["model.embed_tokens.weight"])
    assert torch.equal(ours["lm_head.weight"], base_weights["lm_head.weight"])


def test_a_lora_on_the_embeddings_of_a_tied_base_is_refused(tiny_qwen2_tied, tmp_path):
    torch.manual_seed(1)
    base = AutoModelForCausalLM.from_pretrained(tiny_qwen2_tied.local_dir, dtype=torch.float32)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "embed_tokens"]))
    model.save_pretrained(tmp_path / "adapter")
    with pytest.raises(MergeError, match=r"LoRA on model\.embed_tokens but the base model ties lm_head"):
        merge_adapter(tiny_qwen2_tied.local_dir, tmp_path / "adapter", tmp_path / "out")
    assert_nothing_written(tmp_path / "out")


ADDED_TOKENS = ["<think_step>", "<answer_box>", "<tool_call_x>"]


def build_resized_adapter(base_dir: Path, out_dir: Path, seed: int = 2, **lora_options) -> Path:
    """A PEFT adapter of a base whose vocabulary was resized for added tokens before get_peft_model (PEFT's
    save_embedding_layers="auto" then saves embed_tokens and lm_head whole), saved with its tokenizer."""
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    tokenizer.add_tokens(ADDED_TOKENS)
    torch.manual_seed(1)
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    base.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    options = {"r": LORA_R, "lora_alpha": LORA_ALPHA, "target_modules": TARGETS, **lora_options}
    model = get_peft_model(base, LoraConfig(**options))
    trained(model, seed)
    model.save_pretrained(out_dir)  # save_embedding_layers="auto": the resize is seen
    tokenizer.save_pretrained(out_dir)
    return out_dir


def resized_peft_merge(base_dir: Path, adapter_dir: Path, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """PEFT's merge_and_unload of a resized adapter, on the base resized as the adapter needs."""
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=dtype)
    base.resize_token_embeddings(len(AutoTokenizer.from_pretrained(adapter_dir)))
    merged = PeftModel.from_pretrained(base, adapter_dir).merge_and_unload()
    return {name: t.detach() for name, t in merged.state_dict().items()}


@pytest.mark.parametrize(
    ("fixture", "options"),
    [
        ("tiny_qwen3", {}),
        ("tiny_qwen3", {"modules_to_save": ["embed_tokens", "lm_head"]}),
        ("tiny_qwen2_tied", {}),
    ],
    ids=["save-embedding-layers", "modules-to-save", "tied"],
)
def test_an_adapter_that_resized_the_vocabulary_merges_with_its_rows_and_tokenizer(
    request, tmp_path, fixture, options
):
    base_dir = request.getfixturevalue(fixture).local_dir
    adapter_dir = build_resized_adapter(base_dir, tmp_path / "adapter", **options)
    rows = len(AutoTokenizer.from_pretrained(base_dir)) + len(ADDED_TOKENS)

    merge_adapter(base_dir, adapter_dir, tmp_path / "merged")

    config = json.loads((tmp_path / "merged" / "config.json").read_text())
    ours = read_weights(tmp_path / "merged")
    assert config["vocab_size"] == rows and ours["model.embed_tokens.weight"].shape[0] == rows
    assert ("lm_head.weight" in ours) == (fixture == "tiny_qwen3")  # a tied base stays tied
    assert len(AutoTokenizer.from_pretrained(tmp_path / "merged")) == rows
    reference = resized_peft_merge(base_dir, adapter_dir, torch.float32)
    whole = {"model.embed_tokens.weight", "lm_head.weight"} & set(ours)
    for name in whole:  # the adapter's trained rows, as PEFT loads them
        assert torch.equal(ours[name], reference[name]), name
    merged = {n: reference[n] for n in ours if n not in whole}
    bounds = fp32_bound(merged, read_weights(base_dir), terms=LORA_R + 3)
    assert_close_within({n: ours[n] for n in merged}, merged, bounds)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "merged")
    ids = tokenizer("2 + 2 <answer_box> 4", return_tensors="pt").input_ids
    assert int(ids.max()) >= rows - len(ADDED_TOKENS)  # an added token, embedded by the merged model
    assert loaded(ids).logits.shape[-1] == rows
    if fixture == "tiny_qwen3" and not options:  # the GGUF export takes the merged rows and tokenizer
        export_gguf(tmp_path / "merged", tmp_path / "gguf", ["q8_0"], GGUFMetadata("m", None, None, None))
        exported = GGUFReader(next((tmp_path / "gguf").glob("*.gguf")))
        shapes = {t.name: int(t.shape[-1]) for t in exported.tensors}
        assert shapes["token_embd.weight"] == shapes["output.weight"] == rows
        assert len(exported.fields["tokenizer.ggml.tokens"].data) == rows


def test_a_resized_vocabulary_without_its_tokenizer_is_refused(tiny_qwen3, tmp_path):
    """(A LoRA on a resized embedding or head: `test_peft_variants_vocabulary`.)"""
    adapter_dir = build_resized_adapter(tiny_qwen3.local_dir, tmp_path / "adapter")
    (adapter_dir / "tokenizer.json").unlink()
    with pytest.raises(
        MergeError, match=r"tokens were added .* no tokenizer\.json.*save the tokenizer"
    ) as refused:
        merge_adapter(tiny_qwen3.local_dir, adapter_dir, tmp_path / "out")
    assert "\n" not in str(refused.value)
    assert_nothing_written(tmp_path / "out")


def read_weights_keys(adapter_dir: Path) -> list[str]:
    with safe_open(adapter_dir / "adapter_model.safetensors", "pt") as f:
        return list(f.keys())


@pytest.mark.parametrize(
    "case",
    [
        "modules-to-save",
        "lora-on-embed-tokens",
        "resized-save-embedding-layers",
        "resized-modules-to-save",
        "resized-lora-on-embed-tokens",
    ],
)
def test_the_check_against_the_base_reads_the_whole_embeddings(tiny_qwen3, tmp_path, case):
    """What push and evaluation check before anything is published: the whole weights' shapes."""
    torch.manual_seed(1)
    base = AutoModelForCausalLM.from_pretrained(tiny_qwen3.local_dir, dtype=torch.float32)
    if case.startswith("resized"):
        base.resize_token_embeddings(base.config.vocab_size + 8)
    options: dict = {"target_modules": TARGETS}
    if case.endswith("modules-to-save"):
        options["modules_to_save"] = ["embed_tokens", "lm_head"]
    elif case.endswith("lora-on-embed-tokens"):
        options["target_modules"] = [*TARGETS, "embed_tokens"]
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, **options))
    model.save_pretrained(tmp_path / "adapter", save_embedding_layers=case.startswith("resized") or "auto")
    base_config = BaseConfig.of(tiny_qwen3.repo_id, tiny_qwen3.local_dir / "config.json")
    check_against_base(tmp_path / "adapter", base_config)  # a resized vocabulary's rows included
    if case.startswith("resized"):  # whole weights of other rows than the one vocabulary: another base
        other = tmp_path / "other-base"
        other.mkdir()
        config = json.loads(base_config.path.read_text())
        (other / "config.json").write_text(json.dumps({**config, "hidden_size": config["hidden_size"] * 2}))
        with pytest.raises((BaseModelMismatchError, AdapterError)):
            check_against_base(tmp_path / "adapter", BaseConfig.of(tiny_qwen3.repo_id, other / "config.json"))
