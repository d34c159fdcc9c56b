"""A repo's changes as commits of a bounded size, each leaving the repo consistent.

The Hub recommends at most 100 files per commit (its server times a commit out after 60 s); a first push of
a run with many checkpoints has hundreds. `split_diff` cuts a `RepoDiff` into commits of at most
`max_files` files, in an order where every intermediate state of the repo is one a user can load:

1. the checkpoint folders (``checkpoints/<step>/``), oldest first, each whole in one commit where it fits;
2. the other folders (``assets/``, ``runs/``, a GGUF repo's ``lora/``);
3. the root files, weights before configs, the card (``README.md``) and the manifest (``hubkit.json``)
   last: a repo whose card names a checkpoint holds every file of it, and the card's commit is the push's
   last on that repo.

Commits are packed in that order, a unit (folder, or the root files) starting a new commit only when it
does not fit in the current one. A push killed between two of them leaves the earlier commits on the Hub;
the rerun diffs against them per file (`hubkit.publish.diff`) and commits only what is left, so nothing is
committed twice.
"""

from __future__ import annotations

from dataclasses import replace

from hubkit.publish.diff import RepoDiff
from hubkit.publish.plan import PlannedFile

# The Hub's recommendation (its "upload a large folder" guide): a commit of more files may time out.
MAX_FILES_PER_COMMIT = 100
_LAST = ("README.md", "hubkit.json")  # the card and the manifest: a repo that has them is complete
_WEIGHT_SUFFIXES = (".safetensors", ".gguf")


def _root_order(planned: PlannedFile) -> int:
    name = planned.path_in_repo
    if name in _LAST:
        return 2 + _LAST.index(name)
    return 0 if name.endswith(_WEIGHT_SUFFIXES) else 1


def _units(changed: tuple[PlannedFile, ...]) -> list[list[PlannedFile]]:
    """The changed files as units that belong in one commit: each checkpoint folder (by step), each other
    folder, then the root files in their order."""
    checkpoints: dict[str, list[PlannedFile]] = {}
    folders: dict[str, list[PlannedFile]] = {}
    root: list[PlannedFile] = []
    for planned in changed:
        parts = planned.path_in_repo.split("/")
        if len(parts) == 1:
            root.append(planned)
        elif parts[0] == "checkpoints" and len(parts) > 2:
            checkpoints.setdefault("/".join(parts[:2]), []).append(planned)
        else:
            folders.setdefault(parts[0], []).append(planned)
    by_step = sorted(checkpoints.values(), key=lambda files: (files[0].step is None, files[0].step or 0))
    return [*by_step, *folders.values(), sorted(root, key=_root_order)]


def split_files(changed: tuple[PlannedFile, ...], max_files: int) -> list[tuple[PlannedFile, ...]]:
    """`changed` as the commits' files, in order (see the module docstring); one commit when it fits."""
    if max_files < 1:
        raise ValueError(f"a commit holds at least one file, not {max_files}")
    if len(changed) <= max_files:
        return [changed] if changed else []
    commits: list[list[PlannedFile]] = [[]]
    for unit in _units(changed):
        if unit and len(commits[-1]) + len(unit) > max_files and commits[-1]:
            commits.append([])
        for planned in unit:  # a unit larger than a commit fills as many as it needs, in its order
            if len(commits[-1]) == max_files:
                commits.append([])
            commits[-1].append(planned)
    return [tuple(files) for files in commits if files]


def split_diff(diff: RepoDiff, max_files: int = MAX_FILES_PER_COMMIT) -> list[RepoDiff]:
    """The diff as commits of at most `max_files` files, in the order they are made, each titled "(i/n)";
    each one's `remote` is the repo as the diff read it (its parent is set as the earlier commits land:
    `after`)."""
    commits = split_files(diff.changed, max_files)
    if len(commits) <= 1:
        return [diff]
    title = diff.plan.title
    return [
        replace(diff, plan=replace(diff.plan, title=f"{title} ({i}/{len(commits)})"), changed=files)
        for i, files in enumerate(commits, 1)
    ]


def after(diff: RepoDiff, head_sha: str | None) -> RepoDiff:
    """`diff` to be committed on top of `head_sha` (the previous split commit's)."""
    if head_sha is None or head_sha == diff.remote.head_sha:
        return diff
    return replace(diff, remote=replace(diff.remote, head_sha=head_sha))


def count_commits(changed: tuple[PlannedFile, ...], max_files: int) -> int:
    """How many commits a repo's `changed` files take at `max_files` each (0 when none changed)."""
    return len(split_files(changed, max_files))
