"""A vocabulary the adapter resized: tokens were added to the tokenizer and ``resize_token_embeddings`` run
before ``get_peft_model``, so PEFT saved the whole embeddings (``save_embedding_layers``, or the
``modules_to_save`` copies, or the frozen copy beside a LoRA on the embedding or head, which the LoRA is
then merged into) with another number of rows than the base's.

The merged model then takes the adapter's rows (its config's ``vocab_size``, its embedding and head) and the
tokenizer saved with the checkpoint, read and written back through hubkit's vetting; the base's tokenizer
would lack the added tokens.

    vocabulary = resized_vocabulary(modules, lambda: checkpoint_tokenizer(folder, context), rows, hidden)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hubkit.adapters.base_check import resized_vocabulary as resized_rows
from hubkit.errors import MergeError
from hubkit.formats.tokenizer import TOKENIZER_JSON, token_count
from hubkit.safety import VetContext, vet_file
from hubkit.safety.kinds import TOKENIZER_KINDS

# One tokenizer's files, vetted: (file name, the bytes vetting wrote).
TokenizerFiles = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class Vocabulary:
    """The merged model's vocabulary when the adapter resized the base's."""

    rows: int  # of the merged embedding and head: the merged config's vocab_size
    tokenizer: TokenizerFiles  # the checkpoint's, in place of the base's


def checkpoint_tokenizer(folder: Path | None, context: VetContext) -> TokenizerFiles:
    """The tokenizer files of `folder` (those of a known kind), each vetted and as vetting wrote it.

    Raises:
        UnsafeFileError: a file that must not be published (`hubkit.safety.vet_file`).
    """
    if folder is None:
        return ()
    files = [(name, kind) for name, kind in TOKENIZER_KINDS.items() if (folder / name).is_file()]
    vetted = [(name, vet_file(folder / name, kind, context).data) for name, kind in files]
    return tuple((name, data) for name, data in vetted if data is not None)


def resized_vocabulary(
    weights: dict[str, object],
    tokenizer: Callable[[], TokenizerFiles],
    base_rows: int,
    hidden: int,
) -> Vocabulary | None:
    """The vocabulary the adapter's whole embeddings give the merged model, or None when they keep the base's.

    Args:
        weights: the whole weights the adapter carries, by module (anything with a ``shape``).
        tokenizer: gives the checkpoint's tokenizer (`checkpoint_tokenizer`), vetted only when it is needed.
        base_rows: the base embedding's rows; hidden: its columns.

    Raises:
        MergeError: the checkpoint holds no tokenizer.json, or one with more tokens than the embeddings' rows.
    """
    rows = resized_rows(weights, hidden, base_rows)  # type: ignore[arg-type]
    if rows is None:
        return None
    files = dict(tokenizer())
    if TOKENIZER_JSON not in files:
        raise MergeError(
            f"tokens were added and the embeddings resized ({rows} rows, the base has {base_rows}) but the "
            "checkpoint holds no tokenizer.json, which the merged model needs: save the tokenizer with the "
            "adapter (tokenizer.save_pretrained in the checkpoint folder)"
        )
    tokens = token_count(files[TOKENIZER_JSON], TOKENIZER_JSON)
    if tokens > rows:
        raise MergeError(
            f"the checkpoint's tokenizer has {tokens} tokens but the adapter's embeddings {rows} rows: it is not "
            "the tokenizer the embeddings were resized for; save that one with the adapter"
        )
    return Vocabulary(rows, tuple(sorted(files.items())))
