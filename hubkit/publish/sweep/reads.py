"""What the read stage of a push reads of the run's sweep, at once with every other read: its Collection
(once: found by its title among its owner's), the comparison page's repo, every other run's evaluation as
published, and every other run's adapter repo with its card. Nothing is decided here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hubkit.errors import HubkitError
from hubkit.hub.failures import hub_errors
from hubkit.hub.remote import RemoteRepo, read_remote
from hubkit.publish.sweep.page import PublishedRun, read_sweep_runs
from hubkit.publish.sweep.siblings import (
    SiblingCard,
    find_collection,
    read_card,
    sibling_adapters,
    siblings_of,
    sweep_runs,
)
from hubkit.release.companions import SWEEP_PAGE

if TYPE_CHECKING:
    from huggingface_hub import Collection, HfApi

    from hubkit.cards.sweep_siblings import SweepSibling
    from hubkit.runs import Run
    from hubkit.runs.manifest import SweepInfo


@dataclass(frozen=True)
class SweepReads:
    """The sweep as the Hub holds it before the push."""

    sweep: SweepInfo
    namespace: str  # the adapter repo's owner: the Collection's and the page's
    collection: Collection | None  # None: not on the Hub yet
    page: RemoteRepo
    published: tuple[PublishedRun, ...]  # every other run, in the Collection's order
    cards: dict[str, SiblingCard] = field(default_factory=dict)  # every other run's adapter repo, by id
    notes: tuple[str, ...] = ()  # a sibling's card that could not be read

    @property
    def page_id(self) -> str:
        return self.page.repo_id

    @property
    def siblings(self) -> tuple[SweepSibling, ...]:
        """The other runs as the Collection lists them now (the run's card lists them)."""
        return siblings_of(f"{self.sweep.value}", sweep_runs(self.collection))

    @property
    def remotes(self) -> dict[str, RemoteRepo]:
        return {self.page.repo_id: self.page, **{r: card.remote for r, card in self.cards.items()}}


def read_sweep(api: HfApi, run: Run, adapter_repo: str) -> SweepReads | None:
    """The run's sweep as the Hub holds it (None for a run of no sweep).

    Raises:
        HubkitError: the Collection, the page or a run's evaluation cannot be read (`hub_errors`); a
            sibling's card that cannot be read is noted instead.
    """
    sweep = run.manifest.sweep
    if sweep is None:
        return None
    namespace = adapter_repo.split("/")[0]
    with hub_errors(f"collection {sweep.name}", api.endpoint):
        collection = find_collection(api, namespace, sweep.name)
        published = read_sweep_runs(collection, adapter_repo, endpoint=api.endpoint, token=api.token)
    page_id = SWEEP_PAGE.sweep_repo_id(namespace, sweep.name)
    with hub_errors(page_id, api.endpoint):
        page = read_remote(api, page_id, "dataset")
    cards, notes = {}, []
    for repo_id in sibling_adapters(sweep_runs(collection), f"{sweep.value}"):
        try:
            cards[repo_id] = read_card(api, repo_id)
        except HubkitError as error:
            notes.append(f"{repo_id}: its card's list of the sweep's runs was not updated: {error}")
    return SweepReads(sweep, namespace, collection, page, tuple(published), cards, tuple(notes))
