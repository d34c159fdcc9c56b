"""Rendering any card: a template from `model_cards/` filled as huggingface_hub's own
`RepoCard.from_template` fills it, so the metadata block is the client's ``CardData.to_yaml()`` (never
hand-built YAML) and the result parses exactly as the Hub's client parses it.

`from_template` compiles its template at every call. A push renders a card per checkpoint (each
``step-N`` branch has one) besides the repo cards: 14 renders for a 13-checkpoint run, whose compiling
and variable check took 80 ms of a 0.74 s push adding one checkpoint at the seed's size. So each
template is compiled once per process, with jinja's default settings as `from_template` uses them, and
rendered with the same arguments it passes (`card_data` as YAML, the card data's fields, the context).

The adapter and merged cards pass a `ModelCardData`; the Space card (``space.md.j2``) passes a
`SpaceCardData` and renders the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hubkit.resources import model_cards_dir

if TYPE_CHECKING:
    import jinja2
    from huggingface_hub import CardData


@functools.cache
def _compiled(name: str) -> tuple[jinja2.Template, frozenset[str]]:
    """A shipped template, compiled, and the variables it uses (FileNotFoundError in an installation without
    the shipped templates)."""
    import jinja2
    from jinja2 import meta

    text = (model_cards_dir() / name).read_text(encoding="utf-8")
    environment = jinja2.Environment()  # the settings `jinja2.Template(text)` in from_template gets
    parsed = environment.parse(text)  # parsed once: compiled from this tree, its variables read off it
    return environment.from_string(parsed), frozenset(meta.find_undeclared_variables(parsed))


def render_card(card_data: CardData, template: str, context: Mapping[str, Any]) -> str:
    """The README text (ending with a newline) of `template` (a file name in `model_cards/`) with
    `card_data` (`ModelCardData` or `SpaceCardData`) as its metadata block.

    The template starts with ``---\n{{ card_data }}\n---``; every other variable comes from `context`.

    Raises:
        ValueError: the template uses a variable `context` does not provide (it would render as empty
            text).
    """
    from huggingface_hub import ModelCard, SpaceCard, SpaceCardData

    compiled, used = _compiled(template)
    fields = card_data.to_dict()
    missing = sorted(used - set(context) - set(fields) - {"card_data"})
    if missing:
        raise ValueError(f"template {template} uses {missing}, which the card does not provide")
    card_class = SpaceCard if isinstance(card_data, SpaceCardData) else ModelCard
    text = compiled.render(card_data=card_data.to_yaml(), **{**fields, **context})
    content = str(card_class(text))  # parsed as the client parses a card, as from_template returns it
    return content if content.endswith("\n") else content + "\n"
