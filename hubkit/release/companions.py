"""The repos of a release, one table: the adapter repo and each companion repo beside it (what it is, how it
is named, its repo type, the option naming another, its key in the adapter card, its place in a sweep's
Collection, its URL). Every default repo id, link and Collection order of hubkit reads it.

    me/run          the adapters (every checkpoint), the adapter card
    me/run-merged   the newest checkpoint merged into the base
    me/run-GGUF     the merged model as GGUF files (`--gguf`)
    me/run-demo     the Space comparing the base with any checkpoint (a run of a sweep has none of its own:
                    the sweep's one Space, me/SWEEP-demo, compares every run of it)
    me/run-samples  every answer its models wrote (a dataset)
    me/SWEEP-sweep  a sweep's comparison page (a dataset), named from the sweep as its Space is

A new companion repo is one entry of `RELEASE` (its `kind` a field of `ReleaseRepos`, `ReleaseLinks` and
`CardInputs` as ``<kind>_repo_id``) and the builder of its files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hubkit.hub.repo_types import RepoType, repo_url


def _sweep_repo_name(sweep_name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", sweep_name).strip("-")[:80] or "sweep"


@dataclass(frozen=True)
class Companion:
    """One repo of a release.

    Args:
        kind: its key in the adapter card's ``hubkit_release``, and the field naming it in `ReleaseRepos`
            and `ReleaseLinks` (``<kind>_repo_id`` in `CardInputs`).
        label: what a sweep's Collection notes and a card's list of sibling runs call it.
        suffix: its default name: the adapter repo's, with this appended.
        repo_type: the Hub's type of the repo.
        flag: the `hubkit push` option naming another repo for it.
    """

    kind: str
    label: str
    suffix: str
    repo_type: RepoType
    flag: str

    def default_repo_id(self, adapter_repo_id: str) -> str:
        """Its repo beside `adapter_repo_id` unless `flag` names another: ``<adapter repo><suffix>``."""
        return adapter_repo_id + self.suffix

    def sweep_repo_id(self, namespace: str, sweep_name: str) -> str:
        """The sweep's one repo of this kind (its page, its Space): the sweep's name as a repo name."""
        return f"{namespace}/{_sweep_repo_name(sweep_name)}{self.suffix}"

    def url(self, repo_id: str) -> str:
        """Its page on the public Hub (the cards' links)."""
        return repo_url(repo_id, self.repo_type)


ADAPTER = Companion("adapter", "adapter", "", "model", "--repo-id")
MERGED = Companion("merged", "merged", "-merged", "model", "--merged-repo-id")
GGUF = Companion("gguf", "GGUF", "-GGUF", "model", "--gguf-repo-id")
SPACE = Companion("space", "Space", "-demo", "space", "--space-repo-id")
SAMPLES = Companion("samples", "samples", "-samples", "dataset", "--samples-repo-id")
# A run's repos, in the order a sweep's Collection lists them.
RELEASE = (ADAPTER, MERGED, GGUF, SPACE, SAMPLES)
# The companion repos the adapter card links (``hubkit_release``).
COMPANIONS = RELEASE[1:]
# A sweep's comparison page: a repo of the sweep (`sweep_repo_id`), listed first in its Collection.
SWEEP_PAGE = Companion("page", "comparison", "-sweep", "dataset", "--sweep")
# What a Collection note calls each repo of a run (its position: the index here).
LABELS = tuple(c.label for c in RELEASE)
