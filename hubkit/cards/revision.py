"""The card of a checkpoint's branch (`step-N`): what it holds and how to load it; the full card stays on the
main branch."""

from __future__ import annotations

from huggingface_hub import ModelCardData

from hubkit.cards.render import render_card


def revision_card(repo_id: str, base_model: str, step: int, revision: str) -> str:
    """The README of the branch `revision` of `repo_id`, holding step `step`'s adapter at its root (its
    metadata's `base_model` as on the main branch)."""
    card_data = ModelCardData(
        base_model=base_model, library_name="peft", pipeline_tag="text-generation", tags=["hubkit", "lora"]
    )
    context = {"repo_id": repo_id, "base_model": base_model, "step": step, "revision": revision}
    return render_card(card_data, "revision.md.j2", context)
