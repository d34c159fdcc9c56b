"""A checkpoint's LoRA adapter as a GGUF LoRA, which llama.cpp applies over a GGUF of the base model
(``llama-cli -m base.gguf --lora step.gguf``, llama-server's ``--lora``, Ollama's ``ADAPTER``).

The file is what llama.cpp's own ``convert_lora_to_gguf.py --outtype f16`` writes for the same adapter,
tensor by tensor: each adapted weight's GGUF name with ``.lora_a`` (r × in) and ``.lora_b`` (out × r), in
the adapter's key order, F16 (gguf-py's rounding), Llama's q/k rows of B reordered as the converter
reorders the base's; ``general.type = adapter``, ``adapter.type = lora``, ``adapter.lora.alpha``. Its
``general.*`` keys come from what the caller states (the release's name, the base model's Hub id, its
licence), never from the adapter's folder, its README or its config's path: the converter's name and base
model come from those (a local path in ``general.base_model.0.repo_url`` when the adapter was trained from
a folder).

llama.cpp scales every pair by ``alpha / rank`` (the rank read from each B): one alpha for the file. An
adapter PEFT scales otherwise (rsLoRA, ``alpha_pattern``), DoRA, and adapters carrying whole weights or a
LoRA on the embedding are refused in one line before anything is written.

    plan = plan_gguf_lora(Path("adapter"), base_config, Path("run-step-200-F16.gguf"), metadata, "step 200")
    written = write_gguf_lora(plan)

Memory: one pair of tensors at a time (read from the memory-mapped safetensors file) and its encoding.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf

from hubkit.errors import GGUFExportError
from hubkit.export.gguf import GGUFFile, permuted_heads
from hubkit.formats.gguf import (
    GGUFFileWriter,
    GGUFMetadata,
    MetadataField,
    TensorLayout,
    base_model_entries,
    collect_fields,
    encode_rows,
)
from hubkit.formats.gguf_arch import Architecture, architecture_of, gguf_name, llama_permute
from hubkit.formats.peft import (
    PEFT_PREFIX,
    full_weights,
    lora_pairs,
    read_adapter_config,
    read_weights_header,
)

# The type of every lora_a and lora_b: gguf-my-lora's default and llama.cpp's, a 16-bit float as the base's.
LORA_TYPE = "F16"
_TENSOR_TYPE = gguf.GGMLQuantizationType.F16


@dataclass(frozen=True)
class LoraTensor:
    """One tensor of the file: the adapter's key it is read from, its GGUF name and shape."""

    key: str
    gguf_name: str
    shape: tuple[int, ...]
    permute_heads: int | None  # Llama's q/k: B's rows reordered for this many heads


@dataclass(frozen=True)
class GGUFLoraPlan:
    """Everything checked and decided before a byte of the GGUF LoRA is written."""

    weights: Path
    path: Path
    architecture: Architecture
    fields: tuple[MetadataField, ...]
    tensors: tuple[LoraTensor, ...]


def plan_gguf_lora(
    adapter_dir: Path, base_config: dict[str, Any], path: Path, metadata: GGUFMetadata, label: str
) -> GGUFLoraPlan:
    """Check a PEFT adapter (prepared: vetted) against what a GGUF LoRA holds and decide the file at `path`,
    reading no tensor; `base_config` is the base's config.json, `label` names the adapter in refusals.

    Raises:
        GGUFExportError: an architecture llama.cpp does not read, or an adapter llama.cpp would apply
            otherwise than PEFT (see the module docstring).
    """
    config = read_adapter_config(adapter_dir, label)
    header = read_weights_header(adapter_dir, label)
    _refuse_other_scaling(config, label)
    by_key = {t.name: t for t in header.tensors}
    if full_weights(by_key, config):
        raise GGUFExportError(
            f"{label}: the adapter carries whole weights (modules_to_save or a resized embedding), which a "
            "GGUF LoRA cannot hold: publish without --gguf-lora"
        )
    pairs = lora_pairs(by_key, config, label)
    architecture = architecture_of(base_config)
    name_map = gguf.get_tensor_name_map(architecture.arch, int(base_config.get("num_hidden_layers") or 0))
    tied = bool(base_config.get("tie_word_embeddings"))
    names: dict[str, tuple[str, int | None]] = {}
    for module, pair in pairs.items():
        if pair.embedding or pair.base_copy is not None:
            raise GGUFExportError(
                f"{label}: the adapter has a LoRA on the embedding {module}, which hubkit does not write "
                "as a GGUF LoRA: publish without --gguf-lora"
            )
        weight = gguf_name(name_map, architecture, f"{module}.weight")
        if weight == "output.weight" and tied:
            raise GGUFExportError(
                f"{label}: the adapter adapts {module}, tied to the embedding in the base, which llama.cpp "
                "cannot apply: publish without --gguf-lora"
            )
        names[module] = (weight, permuted_heads(architecture, base_config, module))
    tensors = []
    for info in sorted(header.tensors, key=lambda t: t.name):  # the order the converter reads them in
        module = info.name.removeprefix(PEFT_PREFIX).rsplit(".lora_", 1)[0]
        weight, permute = names[module]
        part = "lora_a" if ".lora_A." in info.name else "lora_b"
        tensors.append(
            LoraTensor(
                info.name, f"{weight}.{part}", tuple(info.shape), permute if part == "lora_b" else None
            )
        )
    alpha = float(config["lora_alpha"])
    fields = _fields(architecture.name, metadata, alpha)
    return GGUFLoraPlan(header.path, path, architecture, fields, tuple(tensors))


def _refuse_other_scaling(config: dict[str, Any], label: str) -> None:
    why = None
    if config.get("use_dora"):
        why = "DoRA, which llama.cpp does not apply"
    elif config.get("use_rslora"):
        why = "rsLoRA (alpha / sqrt(r)), where llama.cpp scales by alpha / r"
    elif any(a != config.get("lora_alpha") for a in (config.get("alpha_pattern") or {}).values()):
        why = "an alpha_pattern, where a GGUF LoRA holds one alpha"
    if why is not None:
        raise GGUFExportError(f"{label}: the adapter uses {why}: publish without --gguf-lora")


def _fields(architecture: str, metadata: GGUFMetadata, alpha: float) -> tuple[MetadataField, ...]:
    def fill(writer: gguf.GGUFWriter) -> None:
        # In the converter's order: the type, the model's name and base, then the adapter's alpha.
        writer.add_type(gguf.GGUFType.ADAPTER)
        writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
        gguf.Metadata(
            name=metadata.name, license=metadata.license, base_models=base_model_entries(metadata)
        ).set_gguf_meta_model(writer)
        writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, alpha)
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)

    return collect_fields(architecture, fill)


def write_gguf_lora(plan: GGUFLoraPlan) -> GGUFFile:
    """Write the planned GGUF LoRA, one tensor at a time (``.partial``, renamed once complete).

    Returns:
        The written file, its size and sha256.
    """
    from safetensors import safe_open

    layouts = [TensorLayout(t.gguf_name, t.shape, _TENSOR_TYPE) for t in plan.tensors]
    plan.path.parent.mkdir(parents=True, exist_ok=True)
    with (
        safe_open(plan.weights, "pt") as weights,
        GGUFFileWriter(plan.path, plan.architecture.name, plan.fields, layouts) as writer,
    ):
        for tensor in plan.tensors:
            data = weights.get_tensor(tensor.key)
            if tensor.permute_heads is not None:
                data = llama_permute(data, tensor.permute_heads)
            writer.start_tensor(tensor.gguf_name)
            writer.append(encode_rows(data, _TENSOR_TYPE))
            writer.finish_tensor()
    return GGUFFile(LORA_TYPE, plan.path, writer.size, writer.sha256)
