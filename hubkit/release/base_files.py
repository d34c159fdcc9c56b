"""The base model a release names, and the tokenizer it is asked with, checked as data before transformers
reads them: a release's manifest may name any repo, so its base is as untrusted as the release.

    vocab = check_base_files(base_dir, "Qwen/Qwen3-4B")       # config.json, generation_config.json
    check_tokenizer_files(release_root, vocab, "me/run")       # tokenizer_config.json, tokenizer.json

Refused, each in one line naming the file and the field: remote code (``auto_map``: hubkit never runs a
repo's code), sizes no model has (a ``vocab_size`` of 2^31 would be allocated), JSON nested past the
parser's bound, a tokenizer.json that is not JSON, and tokenizers whose ids do not fit the base's
vocabulary (an id past the embedding is an IndexError in the middle of generation) or that hold more
tokens than it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hubkit.errors import FileFormatError, ReleaseError
from hubkit.formats.json_file import parse_json_object, read_bounded
from hubkit.formats.model_config import CONFIG, read_model_config
from hubkit.formats.tokenizer import GENERATION_CONFIG, TOKENIZER_CONFIG, TOKENIZER_JSON
from hubkit.safety import kinds


def _read_object(path: Path, max_bytes: int, label: str) -> dict[str, Any]:
    try:
        return parse_json_object(read_bounded(path, max_bytes, label), label)
    except FileFormatError as e:
        raise ReleaseError(str(e)) from e


def _refuse_remote_code(value: dict[str, Any], label: str) -> None:
    if "auto_map" in value:
        raise ReleaseError(
            f"{label}: auto_map names the repo's own code, which hubkit never runs: use a base model and "
            "tokenizer transformers implements"
        )


def check_base_files(base_dir: Path, base_model: str) -> int | None:
    """Check the base model's config.json and generation_config.json; its vocabulary size (None when the
    config names none).

    Raises:
        ReleaseError: remote code, or a generation config that is not a bounded JSON object.
        FileFormatError: the config is refused (`read_model_config`: a size out of bounds, not JSON).
    """
    config = read_model_config(base_dir / CONFIG, f"base model {base_model} {CONFIG}")
    _refuse_remote_code(config.values, config.label)
    generation = base_dir / GENERATION_CONFIG
    if generation.is_file():
        _read_object(
            generation,
            kinds.max_bytes_of(GENERATION_CONFIG) or 0,
            f"base model {base_model} {GENERATION_CONFIG}",
        )
    return config.vocab_size


def _check_ids(ids: list[Any], vocab_size: int | None, label: str, field: str) -> None:
    if vocab_size is None:
        return
    if len(ids) > vocab_size:
        raise ReleaseError(
            f"{label}: {field} holds {len(ids)} tokens, more than the base model's {vocab_size}: not this "
            "base's tokenizer"
        )
    bad = next(
        (i for i in ids if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < vocab_size), None
    )
    if bad is not None or len(ids) != len({*ids}):
        raise ReleaseError(
            f"{label}: {field} holds the id {str(bad)[:40] if bad is not None else 'of several tokens'}, "
            f"which is no token of the base model's {vocab_size}: not this base's tokenizer"
        )


def check_tokenizer_files(folder: Path, vocab_size: int | None, where: str) -> None:
    """Check the tokenizer files in `folder` (a release's root, or the base's) as data, against the base's
    vocabulary size.

    Raises:
        ReleaseError: remote code, JSON that is not a bounded object, ids past the vocabulary.
    """
    config_path = folder / TOKENIZER_CONFIG
    if config_path.is_file():
        label = f"{where} {TOKENIZER_CONFIG}"
        config = _read_object(config_path, kinds.max_bytes_of(TOKENIZER_CONFIG) or 0, label)
        _refuse_remote_code(config, label)
        decoder = config.get("added_tokens_decoder") or {}
        if not isinstance(decoder, dict):
            raise ReleaseError(f"{label}: added_tokens_decoder is not an object of id → token")
        ids = [int(k) if k.isascii() and k.isdigit() and len(k) < 12 else k for k in decoder]
        _check_ids(ids, vocab_size, label, "added_tokens_decoder")
    tokenizer_path = folder / TOKENIZER_JSON
    if tokenizer_path.is_file():
        label = f"{where} {TOKENIZER_JSON}"
        tokenizer = _read_object(tokenizer_path, kinds.max_bytes_of(TOKENIZER_JSON) or 0, label)
        model = tokenizer.get("model")
        vocab = model.get("vocab") if isinstance(model, dict) else None
        if isinstance(vocab, dict):
            _check_ids(list(vocab.values()), vocab_size, label, "model.vocab")
        elif isinstance(vocab, list):  # Unigram: [token, score] pairs, ids their positions
            _check_ids(list(range(len(vocab))), vocab_size, label, "model.vocab")
        added = tokenizer.get("added_tokens") or []
        if not isinstance(added, list) or not all(isinstance(t, dict) for t in added):
            raise ReleaseError(f"{label}: added_tokens is not a list of tokens")
        _check_ids([t.get("id") for t in added], vocab_size, label, "added_tokens")
