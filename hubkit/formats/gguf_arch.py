"""What llama.cpp's converter writes per architecture: Qwen3, Qwen2/2.5 and Llama.

Read from config.json as ``convert_hf_to_gguf.py`` reads it (``TextModel.set_gguf_parameters`` in its
``conversion/base.py``, ``Qwen2Model``/``Qwen3Model`` in ``qwen.py``, ``LlamaModel`` in ``llama.py``): the
hyperparameter keys, the tensors it computes, each tensor's GGUF name, and Llama's q/k row order.
Anything else (another architecture, sliding windows, a RoPE scaling it skips) is refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import gguf
import numpy
import torch

from hubkit.errors import GGUFExportError
from hubkit.formats.gguf import FileType, MetadataField, collect_fields


@dataclass(frozen=True)
class Architecture:
    """A transformers architecture hubkit writes as GGUF.

    Attributes:
        hf_class: the ``architectures`` entry of config.json.
        arch: llama.cpp's architecture.
        llama_layout: Llama's converter permutes q/k rows from transformers' rotary layout to llama.cpp's and
            writes the vocabulary size and rope dimension; Qwen2/Qwen3's use transformers' layout as is.
    """

    hf_class: str
    arch: gguf.MODEL_ARCH
    llama_layout: bool

    @property
    def name(self) -> str:
        """llama.cpp's name, the prefix of the architecture's keys (``qwen3.block_count``)."""
        return gguf.MODEL_ARCH_NAMES[self.arch]


ARCHITECTURES: dict[str, Architecture] = {
    a.hf_class: a
    for a in (
        Architecture("Qwen3ForCausalLM", gguf.MODEL_ARCH.QWEN3, llama_layout=False),
        Architecture("Qwen2ForCausalLM", gguf.MODEL_ARCH.QWEN2, llama_layout=False),
        Architecture("LlamaForCausalLM", gguf.MODEL_ARCH.LLAMA, llama_layout=True),
    )
}


def architecture_of(config: dict[str, Any]) -> Architecture:
    """The architecture a model's config.json names, if hubkit can write it as llama.cpp reads it.

    Raises:
        GGUFExportError: an architecture not in `ARCHITECTURES`, an already-quantized checkpoint, sliding
            window attention (llama.cpp's Qwen2 has none), or a RoPE scaling llama.cpp's converter skips.
    """
    names = config.get("architectures") or []
    known = ", ".join(ARCHITECTURES)
    if len(names) != 1 or names[0] not in ARCHITECTURES:
        raise GGUFExportError(
            f"cannot write {'/'.join(names) or 'an unnamed architecture'} as GGUF: hubkit writes {known}"
        )
    architecture = ARCHITECTURES[names[0]]
    if config.get("quantization_config"):
        raise GGUFExportError("the model is already quantized: export GGUF from its 16-bit merged weights")
    if config.get("use_sliding_window"):
        raise GGUFExportError("sliding window attention has no GGUF form for this architecture")
    rope_type = _rope_parameters(config).get("rope_type")
    supported = {None, "default", "linear", "yarn"} | ({"llama3"} if architecture.llama_layout else set())
    if rope_type not in supported:
        raise GGUFExportError(f"RoPE scaling {rope_type!r} has no GGUF form for {architecture.hf_class}")
    return architecture


def _rope_parameters(config: dict[str, Any]) -> dict[str, Any]:
    # transformers 5 writes rope_parameters (with rope_theta inside); 4.x wrote rope_theta beside rope_scaling.
    rope = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
    rope = dict(rope.get("full_attention", rope))
    if "rope_theta" not in rope and config.get("rope_theta") is not None:
        rope["rope_theta"] = config["rope_theta"]
    if "rope_type" not in rope and rope.get("type") is not None:
        rope["rope_type"] = rope["type"]
    return rope


def _int(config: dict[str, Any], key: str) -> int:
    value = config.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise GGUFExportError(f"config.json has no positive integer {key!r}; re-save the model's config")
    return value


def hyperparameter_fields(
    config: dict[str, Any], architecture: Architecture, file_type: FileType
) -> tuple[MetadataField, ...]:
    """The architecture's keys (``qwen3.block_count``, ...), ``general.file_type`` and the quantization
    version, read from config.json as the converter reads it (``TextModel.set_gguf_parameters``).

    Raises:
        GGUFExportError: config.json lacks a size the file needs.
    """
    rope = _rope_parameters(config)
    heads = _int(config, "num_attention_heads")
    sizes = {
        key: _int(config, key)
        for key in ("num_hidden_layers", "max_position_embeddings", "hidden_size", "intermediate_size")
    }
    rms_eps = config.get("rms_norm_eps")
    if not isinstance(rms_eps, float):
        raise GGUFExportError("config.json has no 'rms_norm_eps'; re-save the model's config")

    def fill(writer: gguf.GGUFWriter) -> None:
        writer.add_block_count(sizes["num_hidden_layers"])
        writer.add_context_length(sizes["max_position_embeddings"])
        writer.add_embedding_length(sizes["hidden_size"])
        writer.add_feed_forward_length(sizes["intermediate_size"])
        writer.add_head_count(heads)
        if config.get("num_key_value_heads") is not None:
            writer.add_head_count_kv(_int(config, "num_key_value_heads"))
        rope_type, factor = rope.get("rope_type"), rope.get("factor")
        if rope_type == "linear" and factor is not None:
            writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            writer.add_rope_scaling_factor(factor)
        elif rope_type == "yarn" and factor is not None:
            writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
            writer.add_rope_scaling_factor(factor)
            writer.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
            for key, add in (
                ("extrapolation_factor", writer.add_rope_scaling_yarn_ext_factor),
                ("attention_factor", writer.add_rope_scaling_yarn_attn_factor),
                ("beta_fast", writer.add_rope_scaling_yarn_beta_fast),
                ("beta_slow", writer.add_rope_scaling_yarn_beta_slow),
            ):
                if rope.get(key) is not None:
                    add(rope[key])
        if rope.get("rope_theta") is not None:
            writer.add_rope_freq_base(rope["rope_theta"])
        writer.add_layer_norm_rms_eps(rms_eps)
        if config.get("head_dim") is not None:
            writer.add_key_length(config["head_dim"])
            writer.add_value_length(config["head_dim"])
        writer.add_file_type(file_type.file_type)
        if architecture.llama_layout:
            writer.add_vocab_size(_int(config, "vocab_size"))
            writer.add_rope_dimension_count(config.get("head_dim") or sizes["hidden_size"] // heads)
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)

    return collect_fields(architecture.name, fill)


def generated_tensors(
    config: dict[str, Any], architecture: Architecture
) -> tuple[tuple[str, numpy.ndarray], ...]:
    """Tensors the converter computes rather than copies: Llama 3's RoPE frequency factors
    (``rope_freqs.weight``, from ``LlamaModel.generate_extra_tensors``); none for Qwen."""
    rope = _rope_parameters(config)
    if not architecture.llama_layout or rope.get("rope_type") != "llama3":
        return ()
    base = rope.get("rope_theta", 10000.0)
    dim = config.get("head_dim") or _int(config, "hidden_size") // _int(config, "num_attention_heads")
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor = rope.get("factor", 8.0)
    low, high = rope.get("low_freq_factor", 1.0), rope.get("high_freq_factor", 4.0)
    old_context = rope.get("original_max_position_embeddings", 8192)
    factors = []
    for freq in freqs.tolist():
        wavelen = 2 * math.pi / freq
        if wavelen < old_context / high:
            factors.append(1.0)
        elif wavelen > old_context / low:
            factors.append(factor)
        else:
            smooth = (old_context / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    name = gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.ROPE_FREQS] + ".weight"
    return ((name, numpy.array(factors, dtype=numpy.float32)),)


def gguf_name(name_map: gguf.TensorNameMap, architecture: Architecture, hf_name: str) -> str:
    """The GGUF name of a transformers tensor (``model.layers.0.self_attn.q_proj.weight`` →
    ``blk.0.attn_q.weight``).

    Raises:
        GGUFExportError: the tensor has no GGUF name for this architecture.
    """
    name = name_map.get_name(hf_name, try_suffixes=(".weight", ".bias"))
    if name is None:
        raise GGUFExportError(
            f"tensor {hf_name!r} has no GGUF name in {architecture.name}: is this a plain {architecture.hf_class}?"
        )
    return name


def llama_permute(weights: torch.Tensor, heads: int) -> torch.Tensor:
    """Llama's q/k rows reordered from transformers' rotary layout (two halves per head) to llama.cpp's
    (interleaved pairs): the converter's ``LlamaModel.permute``."""
    return (
        weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )
