"""The merged-model repo's card: what it was merged from, and how to load it."""

from __future__ import annotations

import jinja2
import yaml

from hubkit.cards import TEMPLATES_DIR
from hubkit.manifest import Manifest


def merged_card_metadata(manifest: Manifest) -> dict[str, object]:
    """The merged card's YAML front matter: a finetune of the base (`merge` would mean two parents)."""
    gdpo = manifest.reward is not None and manifest.reward.aggregation == "normalize_then_sum"
    metadata: dict[str, object] = {
        "base_model": manifest.base_model,
        "base_model_relation": "finetune",
        "library_name": "transformers",
        "pipeline_tag": "text-generation",
        "tags": ["hubkit", "merged-lora", manifest.framework, "gdpo" if gdpo else "grpo"],
    }
    if manifest.dataset is not None and manifest.dataset.on_hub:
        metadata["datasets"] = [manifest.dataset.id]
    return metadata


def render_merged_card(
    manifest: Manifest, repo_id: str, adapter_repo_id: str, step: int, *, dtype: str, merged_modules: int
) -> str:
    """The README.md of a merged-model repo.

    Args:
        manifest: the run's manifest.
        repo_id: the merged repo, used in the usage snippet.
        adapter_repo_id: the adapter repo the merged checkpoint is published in.
        step: the merged checkpoint's step.
        dtype: the merged weights' dtype (`MergeResult.dtype`).
        merged_modules: how many modules were merged (`MergeResult.merged_modules`).

    Returns:
        The card as Markdown with YAML front matter.
    """
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    gdpo = manifest.reward is not None and manifest.reward.aggregation == "normalize_then_sum"
    return environment.get_template("merged.md.j2").render(
        front_matter=yaml.safe_dump(merged_card_metadata(manifest), sort_keys=False),
        repo_id=repo_id,
        base_model=manifest.base_model,
        adapter_repo_id=adapter_repo_id,
        step=step,
        algorithm="GDPO (normalize-then-sum)" if gdpo else "GRPO",
        framework={"trl": "TRL", "verl": "verl"}[manifest.framework],
        dataset=manifest.dataset,
        dtype=dtype,
        merged_modules=merged_modules,
    )
