"""What the cards say of a vocabulary the run's adapter resized (tokens added, ``resize_token_embeddings``
before ``get_peft_model``): how many tokens were added, and the rows a base must be resized to before the
adapter loads on it. Read off the newest adapter's header, the base's config and tokenizer as the client's
cache holds them (the push downloaded them), and the run's tokenizer."""

from __future__ import annotations

from dataclasses import dataclass

from hubkit.adapters.base_check import BaseConfig, resized_rows
from hubkit.formats.tokenizer import TOKENIZER_JSON, token_count
from hubkit.hub.download import cached_repo_file
from hubkit.runs import Run


@dataclass(frozen=True)
class ResizedVocabulary:
    rows: int  # of the adapter's embeddings: what resize_token_embeddings takes
    base_rows: int
    added: int  # tokens the run's tokenizer has beyond the base's (rows beyond the base's without them)

    @property
    def sentence(self) -> str:
        return (
            f"{self.added} tokens added to the base's tokenizer before training: the embeddings were resized from "
            f"{self.base_rows} to {self.rows} rows, and the adapters carry them whole"
        )


def resized_vocabulary(run: Run) -> ResizedVocabulary | None:
    """The vocabulary the newest adapter resized the base's to, or None (also when the base's config is not
    cached)."""
    latest, manifest = run.latest, run.manifest
    base = BaseConfig.cached(manifest.base_model, manifest.base_model_revision)
    if latest is None or latest.adapter_dir is None or base is None:
        return None
    rows = resized_rows(latest.adapter_dir, base)
    if rows is None:
        return None
    base_rows = base.config.vocab_size or 0
    added = rows - base_rows
    tokenizer_dir = run.tokenizer_dir(latest)
    base_tokenizer = cached_repo_file(
        manifest.base_model, TOKENIZER_JSON, revision=manifest.base_model_revision
    )
    if (
        tokenizer_dir is not None
        and (tokenizer_dir / TOKENIZER_JSON).is_file()
        and base_tokenizer is not None
    ):
        tokens = token_count((tokenizer_dir / TOKENIZER_JSON).read_bytes(), TOKENIZER_JSON)
        added = tokens - token_count(base_tokenizer.read_bytes(), TOKENIZER_JSON)
    return ResizedVocabulary(rows, base_rows, added)
