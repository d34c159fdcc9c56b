"""The tests' tiny base models, saved as `save_pretrained` writes them: `hubkit.demo.tiny`'s causal LM with
the real Qwen3 tokenizer (plain, tied and shaped to end its answers, and a Qwen2 one with Qwen2.5's chat
template), and published as base-model repos."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hubkit.demo.tiny import TinyModelError, package_dir, qwen3_tokenizer_dir, tiny_causal_lm

if TYPE_CHECKING:
    from huggingface_hub import HfApi

# Real Qwen special-token ids (the same in Qwen2.5 and Qwen3).
ENDOFTEXT_ID = 151643  # <|endoftext|>: pad, and end of a document
IM_END_ID = 151645  # <|im_end|>: end of a chat turn (eos)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt")


@dataclass(frozen=True)
class TinyModel:
    """A tiny model saved locally (config, weights, tokenizer files) and published as a base-model repo
    (`repo_id`: what adapters name as their base model)."""

    repo_id: str
    local_dir: Path


def publish_model(api: HfApi, local_dir: Path, repo_id: str) -> TinyModel:
    """Publish a model folder as a base-model repo (created if needed) in one commit."""
    api.create_repo(repo_id, exist_ok=True)
    api.upload_folder(repo_id=repo_id, folder_path=local_dir, commit_message="Add tiny base model")
    return TinyModel(repo_id=repo_id, local_dir=local_dir)


def copy_tokenizer(out_dir: Path, chat_template: str | None = None) -> int:
    """Copy the Qwen3 tokenizer files into `out_dir`, as a Qwen repo ships them (template inside
    tokenizer_config.json), optionally with another chat template. Returns the vocabulary size."""
    source = qwen3_tokenizer_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        shutil.copyfile(source / name, out_dir / name)
    config_path = out_dir / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    if chat_template is not None:
        config["chat_template"] = chat_template
        config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False))
    # Ids run from 0 to the last added special token (<think> ... </think> end at 151668).
    return 1 + max(int(token_id) for token_id in config["added_tokens_decoder"])


def qwen2_5_chat_template() -> str:
    """The Qwen2.5 chat template, as shipped with TRL.

    Raises:
        TinyModelError: trl is not installed.
    """
    path = package_dir("trl") / "chat_templates" / "qwen2_5.jinja"
    if not path.is_file():
        raise TinyModelError(f"No Qwen2.5 chat template at {path}: install hubkit's train extra.")
    return path.read_text()


def _build(
    out_dir: Path, family: str, tie_word_embeddings: bool, chat_template: str | None, seed: int
) -> Path:
    vocab_size = copy_tokenizer(out_dir, chat_template)
    model = tiny_causal_lm(
        family,
        vocab_size=vocab_size,
        eos_id=IM_END_ID,
        pad_id=ENDOFTEXT_ID,
        tie_word_embeddings=tie_word_embeddings,
        seed=seed,
    )
    model.save_pretrained(out_dir)
    return out_dir


def build_tiny_qwen3(out_dir: Path, seed: int = 0) -> Path:
    """A tiny Qwen3ForCausalLM (untied embeddings, ~78 MB fp32) with the Qwen3 tokenizer and chat template.

    Args:
        out_dir: where to save it (created).
        seed: weight initialization seed.

    Returns:
        `out_dir`.

    Raises:
        TinyModelError: the tokenizer files are not installed.
    """
    return _build(out_dir, "qwen3", tie_word_embeddings=False, chat_template=None, seed=seed)


def build_tiny_qwen3_tied(out_dir: Path, seed: int = 0) -> Path:
    """A tiny Qwen3ForCausalLM shaped as Qwen3-4B is (tied embeddings, ~39 MB fp32) whose sampled answers end
    at varied lengths; arguments and errors as `build_tiny_qwen3`.

    A random model almost never samples its end-of-turn token, so every answer would run to the length limit,
    a length-based reward would be constant within each group and GRPO would learn nothing. Every embedding
    row gets a shared unit direction u, and the end-of-turn row is 1.2·u: with tied embeddings the output
    logits favour it a little over the rest, and sampling from the top 50 tokens ends answers early or late.
    """
    import torch

    vocab_size = copy_tokenizer(out_dir)
    model = tiny_causal_lm(
        "qwen3",
        vocab_size=vocab_size,
        eos_id=IM_END_ID,
        pad_id=ENDOFTEXT_ID,
        tie_word_embeddings=True,
        seed=seed,
    )
    embedding = model.get_input_embeddings().weight
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        direction = torch.randn(embedding.shape[1])
        direction /= direction.norm()
        embedding += direction
        embedding[IM_END_ID] = 1.2 * direction
    model.save_pretrained(out_dir)
    return out_dir


def build_tiny_qwen2_tied(out_dir: Path, seed: int = 0) -> Path:
    """A tiny Qwen2ForCausalLM with tied embeddings (~39 MB fp32) and a Qwen2.5 chat template; arguments and
    errors as `build_tiny_qwen3` (TinyModelError also when the chat template is not installed)."""
    return _build(
        out_dir, "qwen2", tie_word_embeddings=True, chat_template=qwen2_5_chat_template(), seed=seed
    )
