"""Model cards name the training data as the run recorded it: a Hub dataset is linked, a local file is not."""

from __future__ import annotations

import pytest
import yaml

from hubkit.cards import render_adapter_card
from hubkit.cards.merged import render_merged_card
from hubkit.manifest import DatasetInfo, Manifest


def _manifest(dataset_id: str) -> Manifest:
    return Manifest(
        run_id="run",
        framework="trl",
        base_model="Qwen/Qwen2.5-3B-Instruct",
        dataset=DatasetInfo(id=dataset_id),
    )


def _cards(dataset_id: str) -> list[str]:
    manifest = _manifest(dataset_id)
    return [
        render_adapter_card(manifest, "me/adapter", [20, 40], has_tokenizer=True),
        render_merged_card(
            manifest, "me/adapter-merged", "me/adapter", 40, dtype="bfloat16", merged_modules=7
        ),
    ]


def _front_matter(card: str) -> dict:
    return yaml.safe_load(card.split("---\n")[1])


@pytest.mark.parametrize("card", _cards("openai/gsm8k"))
def test_a_hub_dataset_is_listed_and_linked(card):
    assert _front_matter(card)["datasets"] == ["openai/gsm8k"]
    assert "[openai/gsm8k](https://huggingface.co/datasets/openai/gsm8k)" in card


@pytest.mark.parametrize("card", _cards("gsm8k_mini.jsonl"))
def test_a_local_problem_file_is_named_but_never_linked_as_a_hub_dataset(card):
    assert "datasets" not in _front_matter(card)
    assert "a local problem file (`gsm8k_mini.jsonl`)" in card
    assert "huggingface.co/datasets" not in card
