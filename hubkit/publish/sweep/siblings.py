"""The runs of a sweep as its Collection lists them, for the list each run's card gives of the others
(`hubkit.cards.sweep_siblings`): read before a run's cards are written, and written into every other run's
card by the same push (a repo plan of it), so that a run added later is listed by all that came before.

A Collection read back from the Hub is untrusted: only items whose note hubkit wrote (``setting=value ·
kind: …``, `hubkit.publish.sweep.collection.run_note`) with a valid repo id count, and a sibling's card is rewritten
only between its markers, bounded in size, vetted, and committed only when it changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hubkit.cards.sweep_siblings import SiblingRepo, SweepSibling, siblings_region, with_siblings
from hubkit.hub.download import download_repo_file
from hubkit.hub.failures import hub_errors
from hubkit.hub.hashing import hash_bytes
from hubkit.hub.remote import RemoteRepo, read_remote
from hubkit.publish.plan import PlannedFile, RepoPlan
from hubkit.publish.sweep.page import MAX_RUNS, note_point, release_items
from hubkit.publish.vetted import Vetter
from hubkit.release.companions import ADAPTER, LABELS
from hubkit.safety import kinds

if TYPE_CHECKING:
    from huggingface_hub import Collection, HfApi

    from hubkit.runs import Run


def value_key(text: str) -> tuple[int, float, str]:
    """Sort numbers by value, before other values by text."""
    try:
        return (0, float(text), "")
    except ValueError:
        return (1, 0.0, text)


def find_collection(api: HfApi, namespace: str, title: str) -> Collection | None:
    """The Collection of `namespace` titled `title`, with all its items; None when there is none."""
    for listed in api.list_collections(owner=namespace, limit=100):
        if listed.title == title:
            return api.get_collection(listed.slug)  # a listing holds the first items only
    return None


def read_siblings(api: HfApi, run: Run, adapter_repo_id: str) -> tuple[SweepSibling, ...]:
    """The other runs of the run's sweep its Collection holds now, for the run's card (none for a run of no
    sweep, or a sweep not on the Hub yet); its Collection is looked for under the adapter repo's owner.

    Raises:
        HubkitError: the Hub refused or could not be reached (`hub_errors`).
    """
    sweep = run.manifest.sweep
    if sweep is None:
        return ()
    with hub_errors(f"collection {sweep.name}", api.endpoint):
        collection = find_collection(api, adapter_repo_id.split("/")[0], sweep.name)
    return siblings_of(f"{sweep.value}", sweep_runs(collection))


def sweep_runs(
    collection: Collection | None, joined: Sequence[tuple[str, str, str]] = ()
) -> list[SweepSibling]:
    """Every run the Collection holds (the first `MAX_RUNS`, as the comparison page), one per value of the
    varied setting (its repos in the order of `RELEASE`), ordered by value; with `joined`, (repo id, type, note) of
    the repos a push puts in it, as the Collection will hold them after the push."""
    own = {repo_id for repo_id, _, _ in joined}
    entries = [
        (item.item_id, item.item_type, item.note or "", value, kind)
        for item, value, kind in release_items(collection)
        if item.item_id not in own
    ]
    for repo_id, repo_type, note in joined:
        point = note_point(note)
        if point is not None:
            entries.append((repo_id, repo_type, note, *point))
    runs: dict[str, list[tuple[SiblingRepo, str]]] = {}
    for repo_id, repo_type, note, value, kind in entries:
        if value not in runs and len(runs) == MAX_RUNS:
            continue
        result = note.partition(": ")[2]
        runs.setdefault(value, []).append((SiblingRepo(kind, repo_id, repo_type), result))
    siblings = []
    for value in sorted(runs, key=value_key):
        repos = sorted(runs[value], key=lambda r: (LABELS.index(r[0].kind), r[0].repo_id))
        result = next((note for repo, note in repos if repo.kind == ADAPTER.label), "")
        siblings.append(SweepSibling(value, tuple(repo for repo, _ in repos), result))
    return siblings


def siblings_of(value: str, runs: Sequence[SweepSibling]) -> tuple[SweepSibling, ...]:
    """The runs other than the one at `value`."""
    return tuple(run for run in runs if run.value != value)


def sibling_adapters(runs: Sequence[SweepSibling], value: str) -> list[str]:
    """The adapter repo of every run other than the one at `value`: the cards a push rewrites."""
    return [r.repo_id for run in siblings_of(value, runs) for r in run.repos if r.kind == ADAPTER.label]


@dataclass(frozen=True)
class SiblingCard:
    """A sibling's adapter repo as the read stage found it, with its card (read up to a card's size; None
    when it has none, or a bigger one: left as it is)."""

    remote: RemoteRepo
    card: bytes | None


def read_card(api: HfApi, repo_id: str) -> SiblingCard:
    """A sibling's repo and card, read before anything is decided.

    Raises:
        HubkitError: the Hub refused or could not be reached (`hub_errors`).
    """
    with hub_errors(repo_id, api.endpoint):
        remote = read_remote(api, repo_id)
    listed = remote.files.get("README.md")
    bound = kinds.max_bytes_of("README.md") or 0
    if listed is None or listed.size > bound:
        return SiblingCard(remote, None)
    path = download_repo_file(
        repo_id, "README.md", revision=remote.head_sha, endpoint=api.endpoint, token=api.token
    )
    return SiblingCard(remote, None if path is None else path.read_bytes()[:bound])


def plan_card(
    read: SiblingCard, setting: str, siblings: Sequence[SweepSibling], vetter: Vetter
) -> tuple[RepoPlan | None, str | None]:
    """The sibling's card with its list of the sweep's runs rewritten, as a plan of the push (None: its card
    holds no list, or none hubkit can commit), and a note when its card is left as it is for a reason the
    user should know."""
    repo_id = read.remote.repo_id
    card = with_siblings(read.card, setting, siblings) if read.card is not None else None
    if card is None:
        return None, None
    try:
        card.decode("utf-8")
    except UnicodeDecodeError:  # the Hub's client commits a README only as UTF-8 text: no byte is changed
        return None, f"{repo_id}: its card is not UTF-8 text: its list of the sweep's runs was left as it is"
    # What the push writes is vetted (the list); the bytes around it are the card as the Hub holds it.
    vetter.data("README.md", kinds.CARD, siblings_region(setting, siblings).encode("utf-8"))
    planned = (PlannedFile("README.md", kinds.CARD, hash_bytes(card), content=card),)
    return RepoPlan(repo_id=repo_id, files=planned, title="hubkit sweep: the sweep's runs"), None
