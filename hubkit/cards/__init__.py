"""Model cards rendered from a run's manifest (Jinja templates in the top-level `model_cards/`, shipped in the wheel).

The adapter card is a placeholder: YAML metadata the Hub understands (base model, `library_name:
peft`, `base_model_relation: adapter`, ...) and a usage snippet that works as written.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import jinja2
import yaml

from hubkit.errors import PublishError
from hubkit.manifest import Manifest
from hubkit.resources import model_cards_dir

TEMPLATES_DIR = model_cards_dir()


def adapter_card_metadata(manifest: Manifest) -> dict[str, object]:
    """The adapter card's YAML front matter, from the manifest."""
    tags = ["hubkit", "lora", "peft", manifest.framework]
    if manifest.reward is not None and manifest.reward.aggregation == "normalize_then_sum":
        tags.append("gdpo")
    else:
        tags.append("grpo")
    metadata: dict[str, object] = {
        "base_model": manifest.base_model,
        "base_model_relation": "adapter",
        "library_name": "peft",
        "pipeline_tag": "text-generation",
        "tags": tags,
    }
    if manifest.dataset is not None and manifest.dataset.on_hub:
        metadata["datasets"] = [manifest.dataset.id]
    return metadata


def render_adapter_card(
    manifest: Manifest, repo_id: str, steps: Sequence[int], *, has_tokenizer: bool
) -> str:
    """The README.md of an adapter repo.

    Args:
        manifest: the run's manifest.
        repo_id: the adapter repo, used in the usage snippet.
        steps: the published checkpoint steps; the last one is the adapter at the root.
        has_tokenizer: whether the repo root holds the run's tokenizer (else the snippet loads the base's).

    Returns:
        The card as Markdown with YAML front matter.

    Raises:
        PublishError: no steps (there is nothing to describe).
    """
    if not steps:
        raise PublishError(f"cannot write a card for {repo_id} without any checkpoint")
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    reward = manifest.reward
    algorithm = (
        "GDPO (normalize-then-sum)" if reward and reward.aggregation == "normalize_then_sum" else "GRPO"
    )
    return environment.get_template("adapter.md.j2").render(
        front_matter=yaml.safe_dump(adapter_card_metadata(manifest), sort_keys=False),
        repo_id=repo_id,
        tokenizer_repo=repo_id if has_tokenizer else manifest.base_model,
        base_model=manifest.base_model,
        framework={"trl": "TRL", "verl": "verl"}[manifest.framework],
        algorithm=algorithm,
        dataset=manifest.dataset,
        steps=sorted(steps),
        final_step=max(steps),
    )
