"""The other runs of a run's sweep, as its card lists them: each run's value of the varied setting, a link
to each of its repos, and what its Collection note says of its evaluation.

The list sits between two HTML comments in the adapter card, so that a push of a new run of the sweep can
rewrite it in every sibling's card (`with_siblings`) without the run that card was written from: a card
rendered with a list and one rewritten to that list are the same bytes, and a rewrite changes no byte
outside the markers. What the list shows of a Collection's notes is text, never markup (`text.literal`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hubkit.cards import text
from hubkit.hub.repo_types import RepoType, repo_url

SIBLINGS_START = "<!-- hubkit: the sweep's other runs, rewritten by each push of the sweep -->"
SIBLINGS_END = "<!-- hubkit: end of the sweep's other runs -->"


@dataclass(frozen=True)
class SiblingRepo:
    """One repo of a sibling run: what it is (its companion's label: ``adapter``, ``merged``, ``GGUF``, ...)."""

    kind: str
    repo_id: str
    repo_type: RepoType

    @property
    def url(self) -> str:
        return repo_url(self.repo_id, self.repo_type)


@dataclass(frozen=True)
class SweepSibling:
    """Another run of the sweep, as the sweep's Collection lists it."""

    value: str  # its value of the varied setting
    repos: tuple[SiblingRepo, ...]
    result: str  # its adapter note's evaluation ("final accuracy … (step N)", "not evaluated"), or ""


def siblings_markdown(setting: str, siblings: Sequence[SweepSibling]) -> str:
    """The list the card shows between its markers: one line per sibling, in the order given."""
    if not siblings:
        return "No other run of the sweep is on the Hub yet: each one pushed later is listed here."
    lines = []
    for sibling in siblings:
        # Read back from the Hub: shown as text, in one line (a marker in it would end the list early).
        result = text.literal(sibling.result)
        point = " ".join(f"{setting}={sibling.value}".split())  # a note's value holds no ":", so no marker
        links = " · ".join(f"[{text.literal(r.kind)}]({r.url})" for r in sibling.repos)
        lines.append(f"- {text.code(point)}{': ' + result if result else ''} ({links})")
    return "\n".join(lines)


def siblings_region(setting: str, siblings: Sequence[SweepSibling]) -> str:
    """The markers with the list between them, as the card template writes them."""
    return f"{SIBLINGS_START}\n{siblings_markdown(setting, siblings)}\n{SIBLINGS_END}"


def with_siblings(card: bytes, setting: str, siblings: Sequence[SweepSibling]) -> bytes | None:
    """`card` with its list of siblings replaced by `siblings`, every byte before and after the markers
    as it was (a card edited by hand may hold any bytes there); None when the card does not hold exactly
    one list (a card not written by hubkit, or edited by hand: left as it is)."""
    start, end = SIBLINGS_START.encode(), SIBLINGS_END.encode()
    if card.count(start) != 1 or card.count(end) != 1:
        return None
    before, _, rest = card.partition(start)
    _, found, after = rest.partition(end)
    if not found:
        return None  # the end marker comes first
    return before + siblings_region(setting, siblings).encode("utf-8") + after
