"""`hubkit push`: publish a run's checkpoints to an adapter repo on the Hub."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from hubkit.cli.options import endpoint_option, quiet_option, run_options

if TYPE_CHECKING:
    from huggingface_hub import HfApi

    from hubkit.adapters import PreparedAdapter
    from hubkit.merge import MergeResult
    from hubkit.publish import CommitResult, PushPlan, RepoDiff
    from hubkit.publish.record import PushRecord
    from hubkit.runs import Checkpoint, Run


def _parse_steps(_ctx: click.Context, _param: click.Parameter, value: str | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    try:
        steps = tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise click.BadParameter(f"expected comma-separated step numbers like 20,40, got {value!r}") from None
    if not steps or min(steps) < 0:
        raise click.BadParameter(f"expected comma-separated step numbers like 20,40, got {value!r}")
    return steps


def _size(num_bytes: int) -> str:
    """A byte count for people: "840 B", "75.8 KB", "1.2 GB" (decimal units, as the Hub shows)."""
    if num_bytes < 1000:
        return f"{num_bytes} B"
    value = float(num_bytes)
    for unit in ("KB", "MB", "GB"):
        value /= 1000
        if value < 1000 or unit == "GB":
            break
    return f"{value:.1f} {unit}"


def describe_plan(plan: PushPlan, records: dict[str, PushRecord | None]) -> str:
    """The dry-run listing: each repo, then each file with its size and what is new in it.

    "New" is relative to the last push recorded in the run directory (`records`, by repo id): a dry run
    does not contact the Hub.
    """
    from hubkit.publish.record import FileStatus

    lines = []
    for repo in plan.repos:
        record = records.get(repo.repo_id)
        visibility = "private" if repo.private else "public"
        lines.append(
            f"{repo.repo_id} ({repo.repo_type}, {visibility} if created): {len(repo.files)} files, {_size(repo.total_size)}"
        )
        if record is None:
            lines.append("  no earlier push recorded from this run directory: every file is new")
        else:
            lines.append(
                f"  compared with the last push from this run directory (commit {record.commit_sha[:10]})"
            )
        lines.append(f"  steps: {', '.join(str(s) for s in repo.steps)}")
        new_bytes = 0
        for planned in repo.files:
            status = record.status(planned) if record else FileStatus.NEW
            new_bytes += planned.size if status is not FileStatus.UNCHANGED else 0
            lines.append(f"  {status.value:<9} {planned.path_in_repo:<60} {_size(planned.size):>10}")
        lines.append(f"  to upload: {_size(new_bytes)}")
    lines.append("Dry run: nothing was sent; a push uploads only the files that differ from the remote.")
    return "\n".join(lines)


def _describe_result(result: CommitResult, endpoint: str) -> str:
    if result.commit_sha is None:
        return f"{result.repo_id}: up to date, nothing uploaded"
    steps = f"steps {', '.join(str(s) for s in result.steps)}; " if result.steps else ""
    return (
        f"{result.repo_id}: committed {result.commit_sha[:10]} ({steps}{result.uploaded_files} files, "
        f"{_size(result.uploaded_bytes)}) {endpoint.rstrip('/')}/{result.repo_id}"
    )


def _push_once(api: HfApi, plan: PushPlan, run_dir: Path, console: Console) -> tuple[CommitResult, ...]:
    from hubkit.publish import commit_push, diff_push
    from hubkit.publish.record import save_record

    diffs: tuple[RepoDiff, ...] = diff_push(api, plan)
    for diff in diffs:
        if diff.plan.private and diff.remote.private is False:
            console.print(
                f"{diff.plan.repo_id} already exists and is public: --private only applies to new repos "
                "(change the visibility in the repo's settings)",
                highlight=False,
            )
    total = sum(d.upload_size for d in diffs)
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
    with Progress(
        *columns, TimeRemainingColumn(), console=console, disable=console.quiet or not total
    ) as progress:
        task = progress.add_task("uploading", total=total)
        results = commit_push(api, diffs, on_uploaded=lambda f: progress.advance(task, f.size))
    for diff, result in zip(diffs, results, strict=True):
        save_record(run_dir, api.endpoint, diff.plan, result.commit_sha or diff.remote.head_sha or "")
        console.print(_describe_result(result, api.endpoint), highlight=False)
    return results


@dataclass
class _PushState:
    """What one `hubkit push` keeps between looks at a run: settings, and work already done."""

    run_dir: Path
    repo_id: str
    merged_repo_id: str | None  # None with --no-merged
    private: bool
    endpoint: str
    token: str | None
    api: HfApi | None  # None for a dry run
    console: Console
    staging: Path
    prepared: dict[int, PreparedAdapter] = field(default_factory=dict)
    merges: dict[int, MergeResult] = field(default_factory=dict)
    checked: set[int] = field(default_factory=set)
    pushed: set[tuple[str, str, str]] = field(default_factory=set)
    published: set[int] | None = None  # steps in the adapter repo: read once, then grown by each push

    def look(self, run: Run, chosen: tuple[Checkpoint, ...], *, merge: bool) -> None:
        """Plan `chosen`, then print the plan (dry run) or push what differs from the remote."""
        from hubkit.publish import plan_push, prepare_adapters
        from hubkit.publish.adapter_repo import check_adapters_against_base
        from hubkit.publish.merged_repo import add_merged_repo

        adapters = prepare_adapters(run, chosen, self.staging, self.prepared)
        # Planned once with local knowledge only, so that every local refusal comes before any connection.
        plan = plan_push(run, self.repo_id, adapters, private=self.private, token=self.token)
        published = self._published_steps()
        if published - {a.step for a in adapters}:
            # The repo holds other steps: the card lists them and the root stays at the newest.
            plan = plan_push(
                run, self.repo_id, adapters, private=self.private, token=self.token, published_steps=published
            )
        if self.api is None:
            self._print_dry_run(run, plan, adapters)
            return
        check_adapters_against_base(self.api, run, adapters, self.checked)
        newest_published = max(published, default=-1)
        if self.merged_repo_id and adapters and merge and adapters[-1].step < newest_published:
            # The merged model follows the adapter at the repo root, which stays at the newer step.
            self.console.print(
                f"The adapter repo already holds step {newest_published}, newer than this push's steps: "
                "the merged model is left as it is",
                highlight=False,
            )
        elif self.merged_repo_id and adapters and merge:
            self.console.print(
                f"Merging step {adapters[-1].step} into {run.manifest.base_model}", highlight=False
            )
            plan = add_merged_repo(
                plan,
                run,
                adapters[-1],
                self.staging,
                self.merges,
                adapter_repo_id=self.repo_id,
                repo_id=self.merged_repo_id,
                endpoint=self.endpoint,
                token=self.token,
                private=self.private,
            )
        # While watching, a plan already pushed as it is needs no look at the remote.
        signature = {(r.repo_id, f.path_in_repo, f.hashes.sha256) for r in plan.repos for f in r.files}
        if signature != self.pushed:
            _push_once(self.api, plan, self.run_dir, self.console)
            self.pushed = signature
            published.update(a.step for a in adapters)

    def _published_steps(self) -> set[int]:
        """Steps already in the adapter repo: from the remote, or (dry run) the last recorded push."""
        from hubkit.publish.adapter_repo import steps_in_paths
        from hubkit.publish.commit import hub_errors
        from hubkit.publish.record import load_record
        from hubkit.publish.remote import read_remote

        if self.published is None:
            if self.api is None:
                record = load_record(self.run_dir, self.endpoint, self.repo_id)
                self.published = set(steps_in_paths(record.files)) if record else set()
            else:
                with hub_errors(self.repo_id, self.endpoint):
                    self.published = set(steps_in_paths(read_remote(self.api, self.repo_id).files))
        return self.published

    def _print_dry_run(self, run: Run, plan: PushPlan, adapters: list[PreparedAdapter]) -> None:
        from hubkit.publish.record import load_record

        records = {r.repo_id: load_record(self.run_dir, self.endpoint, r.repo_id) for r in plan.repos}
        self.console.print(describe_plan(plan, records), highlight=False)
        if self.merged_repo_id and adapters:
            self.console.print(
                f"{self.merged_repo_id}: step {adapters[-1].step} would be merged into "
                f"{run.manifest.base_model} and pushed (a dry run does not merge)",
                highlight=False,
            )


@click.command()
@run_options
@click.option("--repo-id", required=True, metavar="OWNER/NAME", help="The adapter repo to publish to.")
@click.option("--steps", callback=_parse_steps, metavar="N,M,...", help="Publish only these steps.")
@click.option("--every", type=click.IntRange(min=1), help="Publish only steps that are multiples of N.")
@click.option("--private", is_flag=True, help="Create the repo private (if the push creates it).")
@click.option("--dry-run", is_flag=True, help="Print the plan (repos, files, sizes); send nothing.")
@click.option(
    "--watch", is_flag=True, help="Keep pushing new checkpoints until the run finishes (Ctrl-C stops)."
)
@click.option(
    "--watch-interval",
    type=click.FloatRange(min=0.05),
    default=30.0,
    show_default=True,
    help="Seconds between looks.",
)
@click.option(
    "--merged/--no-merged",
    default=True,
    show_default=True,
    help="Also merge the newest pushed checkpoint into the base model and push it to its own repo "
    "(with --watch: once the run has finished).",
)
@click.option(
    "--merged-repo-id", metavar="OWNER/NAME", help="The merged model's repo.  [default: <repo-id>-merged]"
)
@endpoint_option
@quiet_option
def push(
    run_id: str | None,
    runs_dir: Path | None,
    run_dir: Path | None,
    base_model: str | None,
    repo_id: str,
    steps: tuple[int, ...] | None,
    every: int | None,
    private: bool,
    dry_run: bool,
    watch: bool,
    watch_interval: float,
    merged: bool,
    merged_repo_id: str | None,
    endpoint: str,
    quiet: bool,
) -> None:
    """Publish a run's checkpoints as one adapter repo.

    Every chosen step goes to checkpoints/global_step_N/, the newest also to the root, with the
    tokenizer, hubkit.json, metrics.jsonl and a model card. Only files that differ from the remote
    are uploaded, in one commit.

    \b
        $ hubkit push --run-id RUN --repo-id me/qwen3-4b-grpo
        $ hubkit push --run-dir runs/RUN --repo-id me/qwen3-4b-grpo --every 100 --dry-run
    """
    from huggingface_hub.utils import disable_progress_bars

    from hubkit.publish import hub_client, resolve_token, select_checkpoints
    from hubkit.publish.merged_repo import default_merged_repo_id
    from hubkit.publish.plan import check_repo_id
    from hubkit.runs import find_run_dir, load_run

    if dry_run and watch:
        raise click.UsageError("--dry-run and --watch cannot be combined")
    console = Console(quiet=quiet, soft_wrap=True)
    disable_progress_bars()  # hubkit shows its own progress (one bar per push, not one per file)
    path = find_run_dir(run_id, runs_dir, run_dir)
    check_repo_id(repo_id)
    merged_repo_id = (merged_repo_id or default_merged_repo_id(repo_id)) if merged else None
    if merged_repo_id:
        check_repo_id(merged_repo_id)
    token = resolve_token(endpoint, required=not dry_run)
    api = None if dry_run else hub_client(endpoint, token)
    with tempfile.TemporaryDirectory(prefix="hubkit-push-") as staging:
        state = _PushState(
            path, repo_id, merged_repo_id, private, endpoint, token, api, console, Path(staging)
        )
        while True:
            run = load_run(path, base_model=base_model)
            done = run.finished and not run.pending
            # While watching, listed steps that do not exist yet are simply not due yet.
            chosen = select_checkpoints(run, None if watch else steps, every)
            chosen = tuple(c for c in chosen if not (watch and steps) or c.step in steps)
            if chosen or not watch:
                state.look(run, chosen, merge=not watch or done)
            if not watch or done:
                if watch and steps:
                    select_checkpoints(run, steps, every)  # refuses listed steps the run never saved
                return
            time.sleep(watch_interval)
