"""A base model's Linear layers by module name, as (in_features, out_features): what an adapter's LoRA
pairs are checked against.

For the decoder layouts that transformers builds the same way (Llama, Mistral, Qwen2, Qwen3: q/k/v/o
attention projections, gate/up/down MLP, lm_head) they are read off ``config.json`` itself, without
importing torch or transformers (seconds at the start of a `hubkit push`). Any other model type, or a
config that leaves a size to its config class's defaults, is built by transformers on the meta device.
A test holds the two ways equal for each layout read off the config.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

# model_type (what AutoModelForCausalLM builds from) → whether its attention takes hidden_size //
# num_attention_heads as the head size when the config names none (Qwen3's config class defaults to 128).
_HEAD_DIM_FROM_HIDDEN = {"llama": True, "mistral": True, "qwen2": True, "qwen3": False}
_REQUIRED = (
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "num_hidden_layers",
    "vocab_size",
)


@lru_cache(maxsize=8)
def linear_shapes(config_path: Path) -> dict[str, tuple[int, int]]:
    """(in_features, out_features) of every Linear in the base whose ``config.json`` is `config_path`."""
    config = json.loads(Path(config_path).read_text())
    return _read_off(config) or built_on_meta(config_path)


def _read_off(config: dict) -> dict[str, tuple[int, int]] | None:
    """The shapes of a known decoder layout from its config's own numbers; None when it is not one, or
    when a number it needs is left to the config class's default."""
    model_type = config.get("model_type")
    if model_type not in _HEAD_DIM_FROM_HIDDEN or not all(_is_count(config.get(key)) for key in _REQUIRED):
        return None
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    head_dim = config.get("head_dim")
    if head_dim is None:
        if not _HEAD_DIM_FROM_HIDDEN[model_type]:
            return None
        head_dim = hidden // heads
    elif not _is_count(head_dim):
        return None
    attention, kv, mlp = (
        heads * head_dim,
        config["num_key_value_heads"] * head_dim,
        config["intermediate_size"],
    )
    per_layer = {
        "self_attn.q_proj": (hidden, attention),
        "self_attn.k_proj": (hidden, kv),
        "self_attn.v_proj": (hidden, kv),
        "self_attn.o_proj": (attention, hidden),
        "mlp.gate_proj": (hidden, mlp),
        "mlp.up_proj": (hidden, mlp),
        "mlp.down_proj": (mlp, hidden),
    }
    shapes = {
        f"model.layers.{layer}.{name}": shape
        for layer in range(config["num_hidden_layers"])
        for name, shape in per_layer.items()
    }
    shapes["lm_head"] = (hidden, config["vocab_size"])
    return shapes


def _is_count(value: object) -> bool:
    """A size as JSON gives it: a plain integer (JSON's true and false are Python ints too)."""
    return isinstance(value, int) and not isinstance(value, bool)


def built_on_meta(config_path: Path) -> dict[str, tuple[int, int]]:
    """The shapes of the model transformers builds from the config, on the meta device (no weights)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        from transformers.initialization import no_init_weights
    except ImportError:  # transformers < 5
        from transformers.modeling_utils import no_init_weights

    config = AutoConfig.from_pretrained(Path(config_path).parent)
    # Architecture only: no memory for weights, nothing downloaded, no time spent initializing them.
    with torch.device("meta"), no_init_weights():
        model = AutoModelForCausalLM.from_config(config)
    return {
        name: (module.in_features, module.out_features)
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear)
    }
