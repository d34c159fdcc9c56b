"""Push plans and reports as text for people: what the CLI prints, built without printing."""

from __future__ import annotations

from hubkit.hub.retry import HUB_COMMITS_PER_REPO_PER_HOUR
from hubkit.publish.adapter_repo import LeftOutOf
from hubkit.publish.push_record import FileStatus
from hubkit.publish.request import PushReport, RepoReport
from hubkit.publish.split import MAX_FILES_PER_COMMIT, count_commits
from hubkit.publish.storage import storage_by_repo


def human_size(num_bytes: int) -> str:
    """A byte count for people: "840 B", "75.8 KB", "1.2 GB" (decimal units, as the Hub shows)."""
    if num_bytes < 1000:
        return f"{num_bytes} B"
    value = float(num_bytes)
    for unit in ("KB", "MB", "GB"):
        value /= 1000
        if value < 1000 or unit == "GB":
            break
    return f"{value:.1f} {unit}"


def describe_dry_run(report: PushReport, max_files: int = MAX_FILES_PER_COMMIT) -> str:
    """The dry-run listing: each repo, then each file with its size and what is new in it.

    "New" is relative to the last push recorded in the run directory: a dry run does not contact the Hub.
    Then where the checkpoints were read from, what their folders hold that is left out (and why), and
    what vetting changed on the way.
    """
    lines = []
    for repo in report.plan.repos:
        record = report.records.get(repo.repo_id)
        visibility = "private" if repo.private else "public"
        lines.append(
            f"{repo.repo_id} ({repo.repo_type}, {visibility} if created): {len(repo.files)} files, "
            f"{human_size(repo.total_size)}"
        )
        if record is None:
            lines.append("  no earlier push recorded from this run directory: every file is new")
        else:
            lines.append(
                f"  compared with the last push from this run directory (commit {record.commit_sha[:10]})"
            )
        if repo.steps:  # a Space holds no checkpoint
            lines.append(f"  steps: {', '.join(str(s) for s in repo.steps)}")
        new_bytes = 0
        for planned in repo.files:
            status = record.status(planned) if record else FileStatus.NEW
            new_bytes += planned.size if status is not FileStatus.UNCHANGED else 0
            lines.append(f"  {status.value:<9} {planned.path_in_repo:<60} {human_size(planned.size):>10}")
        lines.append(f"  to upload: {human_size(new_bytes)}")
    if report.plan.branches:
        lines.append(f"{report.repo_id} branches (each a checkpoint's adapter at the root, and a card):")
    for branch in report.plan.branches:
        record = report.records.get(f"{branch.repo_id}@{branch.revision}")
        statuses = {record.status(f) if record else FileStatus.NEW for f in branch.files}
        state = "unchanged" if statuses == {FileStatus.UNCHANGED} else "new" if record is None else "changed"
        lines.append(f"  {branch.revision:<12} {len(branch.files)} files, {state}")
    lines.append(describe_commits(report, max_files))
    lines.append(describe_storage(dry_run_storage(report)))
    if report.checkpoints_from:
        lines.append(report.checkpoints_from[:1].upper() + report.checkpoints_from[1:])
    lines.extend(describe_left_out(report.left_out))
    if report.changes:
        lines.append("Changed on the way (written from what was read):")
        lines.extend(f"  {change}" for change in report.changes)
    lines.extend(report.notes)
    lines.append("Dry run: nothing was sent; a push uploads only the files that differ from the remote.")
    return "\n".join(lines)


def describe_commits(report: PushReport, max_files: int = MAX_FILES_PER_COMMIT) -> str:
    """How many commits the push makes (each repo or branch with a file not in its last recorded push, in
    commits of at most `max_files` files: `hubkit.publish.split`), per repo, against the Hub's commits per
    repo per hour."""
    per_repo: dict[str, int] = {}
    split: list[str] = []
    for plan in (*report.plan.repos, *report.plan.branches):
        key = plan.repo_id if plan.revision == "main" else f"{plan.repo_id}@{plan.revision}"
        record = report.records.get(key)
        changed = tuple(
            f for f in plan.files if record is None or record.status(f) is not FileStatus.UNCHANGED
        )
        commits = count_commits(changed, max_files)
        per_repo[plan.repo_id] = per_repo.get(plan.repo_id, 0) + commits
        if commits > 1:
            split.append(f"{key} in {commits} ({len(changed)} files)")
    total = sum(per_repo.values())
    busiest, most = max(per_repo.items(), key=lambda item: item[1], default=("", 0))
    line = f"Commits: {total} ({', '.join(f'{r}: {n}' for r, n in per_repo.items() if n) or 'none'})"
    if split:
        line += f", of at most {max_files} files: {', '.join(split)}"
    if most <= HUB_COMMITS_PER_REPO_PER_HOUR:
        return f"{line}; within the Hub's {HUB_COMMITS_PER_REPO_PER_HOUR} commits per repo per hour."
    return (
        f"{line}; {busiest} needs {most}, more than the Hub's {HUB_COMMITS_PER_REPO_PER_HOUR} commits per "
        "repo per hour: the push waits for the Hub's limit (up to --max-wait) or stops saying when to run it "
        "again; --every N or --steps publishes fewer branches."
    )


def dry_run_storage(report: PushReport) -> dict[str, int]:
    """The bytes each repo of a dry run's plan adds that its last recorded push did not hold."""
    held: dict[str, set[str]] = {}
    for key, record in report.records.items():
        if record is not None:
            held.setdefault(key.split("@", 1)[0], set()).update(record.files.values())
    return storage_by_repo(report.plan, held)


def describe_storage(by_repo: dict[str, int]) -> str:
    """What the Hub does not hold yet (`hubkit.publish.storage`), in total and per repo: printed before the
    first byte is sent, and by a dry run."""
    total = sum(by_repo.values())
    repos = ", ".join(f"{r}: {human_size(n)}" for r, n in by_repo.items() if n) or "nothing new"
    return f"Storage: {human_size(total)} ({total:,} bytes) new to the Hub ({repos})."


def describe_left_out(left_out: tuple[LeftOutOf, ...]) -> list[str]:
    """What is not published, one line per file, folders with the same left-out files listed together."""
    by_files: dict[tuple, list[str]] = {}
    for item in left_out:
        by_files.setdefault(item.files, []).append(item.folder)
    lines = []
    for files, folders in by_files.items():
        lines.append(f"Left out of {', '.join(folders)} (never published):")
        lines.extend(f"  {f.name:<40} {f.reason}" for f in files)
    return lines


def describe_repo(repo: RepoReport) -> str:
    """One line per pushed repo: its commit (or up to date), steps, files, bytes and URL."""
    if repo.unchanged:
        return f"{repo.repo_id}: up to date, nothing uploaded"
    steps = f"steps {', '.join(str(s) for s in repo.steps)}; " if repo.steps else ""
    return (
        f"{repo.repo_id}: committed {repo.commit_sha[:10]} ({steps}{repo.files_uploaded} files, "  # type: ignore[index]
        f"{human_size(repo.bytes_uploaded)}{f', in {repo.commits} commits' if repo.commits > 1 else ''}) "
        f"{repo.url}"
    )


def describe_revisions(revisions: tuple[RepoReport, ...]) -> str | None:
    """One line for every checkpoint branch of a push, or None when it has none."""
    if not revisions:
        return None
    names = [r.revision for r in revisions]
    committed = sum(1 for r in revisions if not r.unchanged)
    span = names[0] if len(names) == 1 else f"{names[0]} … {names[-1]}"
    state = f"{committed} committed, {len(names) - committed} up to date" if committed else "up to date"
    return f"{revisions[0].repo_id} branches {span} ({len(names)}): {state}"
