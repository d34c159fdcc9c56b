"""The card of a checkpoint's branch (`step-N`): what it holds and how to load it; the full card stays on the
main branch."""

from __future__ import annotations

from huggingface_hub import ModelCardData

from hubkit.cards.render import render_card


def revision_card(repo_id: str, base_model: str, step: int, revision: str) -> str:
    """The README of the branch holding step `step`'s adapter at its root.

    Args:
        repo_id: the adapter repo.
        base_model: the base model's Hub id (the card's `base_model`, as on the main branch).
        step: the checkpoint's training step.
        revision: the branch's name.

    Returns:
        The README text.
    """
    card_data = ModelCardData(
        base_model=base_model, library_name="peft", pipeline_tag="text-generation", tags=["hubkit", "lora"]
    )
    context = {"repo_id": repo_id, "base_model": base_model, "step": step, "revision": revision}
    return render_card(card_data, "revision.md.j2", context)
