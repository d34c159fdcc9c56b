"""The runs of a sweep as its Collection lists them, for the list each run's card gives of the others
(`hubkit.cards.sweep_siblings`): read before a run's cards are written, and written into every other run's
card after the run joined the sweep, so that a run added later is listed by all that came before.

A Collection read back from the Hub is untrusted: only items whose note hubkit wrote (``setting=value ·
kind: …``, `hubkit.publish.sweep.collection.run_note`) with a valid repo id count, and a sibling's card is rewritten
only between its markers, bounded in size, vetted, and committed only when it changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hubkit.cards.sweep_siblings import SiblingRepo, SweepSibling, siblings_region, with_siblings
from hubkit.errors import HubkitError
from hubkit.hub.download import download_repo_file
from hubkit.hub.failures import hub_errors
from hubkit.hub.hashing import hash_bytes
from hubkit.publish.commit import commit_repo
from hubkit.publish.diff import diff_repo
from hubkit.publish.plan import PlannedFile, RepoPlan
from hubkit.publish.remote import read_remote
from hubkit.publish.sweep.page import KIND_ORDER, MAX_RUNS, release_items
from hubkit.publish.vetted import Vetter
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


def sweep_runs(collection: Collection | None) -> list[SweepSibling]:
    """Every run the Collection holds (the first `MAX_RUNS`, as the comparison page), one per value of the
    varied setting (its repos in `KIND_ORDER`), ordered by value."""
    runs: dict[str, list[tuple[SiblingRepo, str]]] = {}
    for item, value, kind in release_items(collection):
        if value not in runs and len(runs) == MAX_RUNS:
            continue
        result = (item.note or "").partition(": ")[2]
        runs.setdefault(value, []).append((SiblingRepo(kind, item.item_id, item.item_type), result))
    siblings = []
    for value in sorted(runs, key=value_key):
        repos = sorted(runs[value], key=lambda r: (KIND_ORDER.index(r[0].kind), r[0].repo_id))
        result = next((note for repo, note in repos if repo.kind == "adapter"), "")
        siblings.append(SweepSibling(value, tuple(repo for repo, _ in repos), result))
    return siblings


def siblings_of(value: str, runs: Sequence[SweepSibling]) -> tuple[SweepSibling, ...]:
    """The runs other than the one at `value`."""
    return tuple(run for run in runs if run.value != value)


def update_sibling_cards(
    api: HfApi, collection: Collection, setting: str, value: str, vetter: Vetter
) -> list[str]:
    """Rewrite the list of siblings in the card of every run of the Collection other than the one at
    `value` (just pushed, its card written with the list); what changed or could not be, one line each.
    A card that cannot be read or written is noted, not raised: the run's own release is published."""
    runs = sweep_runs(collection)
    notes = []
    for run in runs:
        if run.value == value:
            continue
        for repo in run.repos:
            if repo.kind != "adapter":
                continue
            try:
                note = _rewrite_card(api, repo.repo_id, setting, siblings_of(run.value, runs), vetter)
            except HubkitError as error:
                note = f"{repo.repo_id}: its card's list of the sweep's runs was not updated: {error}"
            if note:
                notes.append(note)
    return notes


def _rewrite_card(
    api: HfApi, repo_id: str, setting: str, siblings: Sequence[SweepSibling], vetter: Vetter
) -> str | None:
    with hub_errors(repo_id, api.endpoint):
        remote = read_remote(api, repo_id)
    listed = remote.files.get("README.md")
    bound = kinds.max_bytes_of("README.md") or 0
    if listed is None or listed.size > bound:
        return None
    path = download_repo_file(
        repo_id, "README.md", revision=remote.head_sha, endpoint=api.endpoint, token=api.token
    )
    if path is None:
        return None
    card = with_siblings(path.read_bytes()[:bound], setting, siblings)
    if card is None:
        return None
    try:
        card.decode("utf-8")
    except UnicodeDecodeError:  # the Hub's client commits a README only as UTF-8 text: no byte is changed
        return f"{repo_id}: its card is not UTF-8 text: its list of the sweep's runs was left as it is"
    # What the push writes is vetted (the list); the bytes around it are the card as the Hub holds it.
    vetter.data("README.md", kinds.CARD, siblings_region(setting, siblings).encode("utf-8"))
    planned = (PlannedFile("README.md", kinds.CARD, hash_bytes(card), content=card),)
    plan = RepoPlan(repo_id=repo_id, files=planned, title="hubkit sweep: the sweep's runs")
    committed = commit_repo(api, diff_repo(plan, remote))
    return (
        None
        if committed.unchanged
        else f"{repo_id}: its card lists the sweep's runs again ({committed.commit_sha})"
    )
