"""Rendering any card: a template from `model_cards/` filled through huggingface_hub's own
`RepoCard.from_template`, so the metadata block is the client's ``CardData.to_yaml()`` (never hand-built
YAML) and the result parses exactly as the Hub's client parses it.

The adapter and merged cards pass a `ModelCardData`; the Space card (``space.md.j2``) passes a
`SpaceCardData` and renders the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hubkit.resources import model_cards_dir

if TYPE_CHECKING:
    from huggingface_hub import CardData


def template_text(name: str) -> str:
    """The text of a template in `model_cards/` (``adapter.md.j2``, ``merged.md.j2``, ``space.md.j2``).

    Raises:
        FileNotFoundError: no such template (an installation without the shipped templates).
    """
    return (model_cards_dir() / name).read_text(encoding="utf-8")


def _check_variables(name: str, template: str, provided: set[str]) -> None:
    """A variable the template uses but nobody passes would render as empty text: refuse it instead."""
    import jinja2
    from jinja2 import meta

    used = meta.find_undeclared_variables(jinja2.Environment().parse(template))
    missing = sorted(used - provided - {"card_data"})
    if missing:
        raise ValueError(f"template {name} uses {missing}, which the card does not provide")


def render_card(card_data: CardData, template: str, context: Mapping[str, Any]) -> str:
    """Render `template` (a file name in `model_cards/`) with `card_data` as its metadata block.

    The template starts with ``---\\n{{ card_data }}\\n---``; every other variable comes from `context`.

    Args:
        card_data: `ModelCardData` (model repos) or `SpaceCardData` (Spaces).
        template: the template's file name.
        context: the template's variables.

    Returns:
        The README text, ending with a newline.

    Raises:
        ValueError: the template uses a variable `context` does not provide.
    """
    from huggingface_hub import ModelCard, SpaceCard, SpaceCardData

    text = template_text(template)
    _check_variables(template, text, set(context) | set(card_data.to_dict()))
    card_class = SpaceCard if isinstance(card_data, SpaceCardData) else ModelCard
    content = str(card_class.from_template(card_data, template_str=text, **context))
    return content if content.endswith("\n") else content + "\n"
