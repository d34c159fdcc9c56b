"""Model cards written from the run itself: the adapter repo's card with its training curves, and the
merged repo's card. Templates live in the top-level `model_cards/` (shipped in the wheel).

    base = read_base_model_card(manifest.base_model, manifest.base_model_revision, endpoint=..., token=...)
    inputs = CardInputs(run=run, repo_id=repo_id, steps=steps, base=base, adapter_bytes=sizes, ...)
    files = adapter_card_files(inputs)          # {"README.md": ..., "assets/reward.png": ..., ...}
    merged = merged_card_files(inputs, record)  # record: a MergeRecord (what was merged, dtype, modules)
    gguf = gguf_card_files(inputs, gguf_record, GGUF.default_repo_id(repo_id))  # the files, the merge

Modules, one job each: `inputs` (what a card is written from), `metrics` (TRL and verl metric names
under one name), `sections` (objective, reward, training status, dataset, run details, citations),
`configuration` (the settings table, each value with the file it was read from), `merge_record` (what a
merged repo holds, in its card's metadata),
`tables` (key metrics, checkpoints, eval, before/after), `usage` (the code snippets), `plots` (PNG curves),
`metadata` (`ModelCardData`), `base_card` (the base model's licence from the Hub), `render` (every card,
as huggingface_hub's `ModelCard.from_template` fills a template, each compiled once), `files` (what a
push publishes).
"""

from __future__ import annotations

from hubkit.cards.base_card import read_base_model_card
from hubkit.cards.files import adapter_card_files, gguf_card_files, merged_card_files
from hubkit.cards.inputs import BaseModelCard, CardInputs

__all__ = [
    "BaseModelCard",
    "CardInputs",
    "adapter_card_files",
    "gguf_card_files",
    "merged_card_files",
    "read_base_model_card",
]
