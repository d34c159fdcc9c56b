"""`hubkit card`: render a run's cards and images into a local folder, for preview before a push."""

from __future__ import annotations

from pathlib import Path

import click

from hubkit.cli.options import endpoint_option, quiet_option, run_options

PLACEHOLDER_OWNER = "your-name"


@click.command()
@run_options
@click.option(
    "--repo-id",
    metavar="OWNER/NAME",
    help=f"The adapter repo the card is written for.  [default: the recorded push_to, else {PLACEHOLDER_OWNER}/<run id>]",
)
@click.option(
    "--merged-repo-id", metavar="OWNER/NAME", help="The merged model's repo.  [default: <repo-id>-merged]"
)
@click.option(
    "--merged/--no-merged", default=True, show_default=True, help="Render the merged model's card too."
)
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The folder to write README.md, assets/ and merged/README.md to.",
)
@endpoint_option
@quiet_option
def card(
    run_id: str | None,
    runs_dir: Path | None,
    run_dir: Path | None,
    base_model: str | None,
    repo_id: str | None,
    merged_repo_id: str | None,
    merged: bool,
    out: Path,
    endpoint: str,
    quiet: bool,
) -> None:
    """Render the cards a push would publish for a run (the base model's licence is read from --endpoint).

    \b
    $ hubkit card --run-id RUN --repo-id me/qwen3-4b-gdpo --out card-preview/
    """
    from hubkit.cards.preview import render_preview
    from hubkit.hub.auth import resolve_token
    from hubkit.publish.merged_repo import default_merged_repo_id
    from hubkit.publish.plan import check_repo_id
    from hubkit.publish.request import repo_name_for_run
    from hubkit.runs import find_run_dir, load_run

    run = load_run(find_run_dir(run_id, runs_dir, run_dir), base_model=base_model)
    repo_id = (
        repo_id or run.manifest.push_to or f"{PLACEHOLDER_OWNER}/{repo_name_for_run(run.manifest.run_id)}"
    )
    merged_repo_id = (merged_repo_id or default_merged_repo_id(repo_id)) if merged else None
    for repo in filter(None, (repo_id, merged_repo_id)):
        check_repo_id(repo)
    token = resolve_token(endpoint, required=False)
    written = render_preview(run, repo_id, out, merged_repo_id=merged_repo_id, endpoint=endpoint, token=token)
    if not quiet:
        for path in written:
            click.echo(str(path))
        if merged_repo_id and not any(path.parent.name == "merged" for path in written):
            click.echo(
                "merged card skipped: the newest checkpoint saved no adapter (a push rebuilds it first)"
            )
