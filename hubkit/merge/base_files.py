"""The base model's files: which ones a merge needs, fetching them, and carrying the non-weights over."""

from __future__ import annotations

import fnmatch
import json
import shutil
from pathlib import Path

from hubkit.errors import MergeError
from hubkit.formats.model_config import CONFIG, read_model_config

SINGLE_SHARD = "model.safetensors"
SHARD_INDEX = "model.safetensors.index.json"
WEIGHT_PATTERNS = (SINGLE_SHARD, SHARD_INDEX, "model-*-of-*.safetensors")
# Everything a merged model needs besides its weights: config, generation settings (Qwen3's two EOS
# ids live there), tokenizer and chat template, license. README.md is left out: the merged repo gets
# its own card.
CARRIED_PATTERNS = (
    CONFIG,
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "chat_template.jinja",
    "chat_template.json",
    "LICENSE*",
)
# Keys that record where a config was loaded from, possibly a local path that must not be published.
_LOCAL_CONFIG_KEYS = ("_name_or_path",)
_DTYPE_CONFIG_KEYS = ("dtype", "torch_dtype")


def fetch_base_snapshot(
    base_model: str, revision: str | None = None, *, endpoint: str | None = None, token: str | None = None
) -> Path:
    """The base model's weights, config and tokenizer files, from a local folder or the Hub cache.

    Args:
        base_model: a local folder, or a Hub model id (downloaded through the Hub cache, only the
            files a merge needs).
        revision: branch, tag or commit of the Hub repo; ignored for a local folder.
        endpoint: the Hub URL; default the client's (`HF_ENDPOINT`, else huggingface.co).
        token: the token for a private or gated base; default the client's.

    Raises:
        MergeError: the repo or revision does not exist, or cannot be reached.
    """
    local = Path(base_model)
    if local.is_dir():
        return local
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    try:
        folder = snapshot_download(
            repo_id=base_model,
            revision=revision,
            allow_patterns=[*WEIGHT_PATTERNS, *CARRIED_PATTERNS],
            endpoint=endpoint,
            token=token,
        )
    except RevisionNotFoundError as e:
        raise MergeError(
            f"base model {base_model} has no revision {revision!r}; check --base-revision"
        ) from e
    except RepositoryNotFoundError as e:
        raise MergeError(
            f"base model {base_model} was not found on the Hub; check the id and your token"
        ) from e
    except HfHubHTTPError as e:
        raise MergeError(f"could not download base model {base_model}: {e}") from e
    return Path(folder)


def carried_files(base_dir: Path) -> list[Path]:
    """The non-weight files of `base_dir` that a merged model keeps (its config.json read beforehand)."""
    return sorted(
        p
        for p in base_dir.iterdir()
        if p.is_file() and any(fnmatch.fnmatch(p.name, pat) for pat in CARRIED_PATTERNS)
    )


def copy_carried_files(files: list[Path], out_dir: Path, dtype: str, vocab_size: int | None = None) -> None:
    """Copy the carried files. config.json loses any key that records a local load path, and its
    dtype is set to the merged weights' `dtype` (under the key or keys it already uses, `dtype` for
    transformers 5 and `torch_dtype` before; `dtype` if it names none), so that loading with
    `dtype="auto"` gives the dtype of the shards; `vocab_size`, when given, is the resized vocabulary's."""
    for path in files:
        if path.name == CONFIG:
            config = dict(read_model_config(path).values)
            for key in _LOCAL_CONFIG_KEYS:
                config.pop(key, None)
            for key in [k for k in _DTYPE_CONFIG_KEYS if k in config] or [_DTYPE_CONFIG_KEYS[0]]:
                config[key] = dtype
            if vocab_size is not None:
                config["vocab_size"] = vocab_size
            (out_dir / path.name).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        else:
            shutil.copyfile(path, out_dir / path.name)
