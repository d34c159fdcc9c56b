"""`hubkit card`: render a run's cards and images into a local folder, for preview before a push."""

from __future__ import annotations

from pathlib import Path

import click

from hubkit.cli.options import endpoint_option, quiet_option, run_options
from hubkit.cli.output import echo


@click.command()
@run_options
@click.option(
    "--repo-id",
    metavar="OWNER/NAME",
    help="The adapter repo the card is written for.  [default: as `hubkit push` chooses it: the recorded "
    "push_to, else <token owner>/<run id>]",
)
@click.option(
    "--merged-repo-id", metavar="OWNER/NAME", help="The merged model's repo.  [default: <repo-id>-merged]"
)
@click.option(
    "--merged/--no-merged", default=True, show_default=True, help="Render the merged model's card too."
)
@click.option(
    "--space/--no-space",
    default=True,
    show_default=True,
    help="Link the Space <repo-id>-demo from the cards, as `hubkit push` publishes it.",
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
    space: bool,
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
    from hubkit.space.config import default_space_repo_id

    run = load_run(find_run_dir(run_id, runs_dir, run_dir), base_model=base_model)
    token = resolve_token(endpoint, required=False)
    if repo_id is None and run.manifest.push_to is None:
        repo_id = f"{_token_owner(endpoint, token)}/{repo_name_for_run(run.manifest.run_id)}"
    repo_id = repo_id or run.manifest.push_to
    merged_repo_id = (merged_repo_id or default_merged_repo_id(repo_id)) if merged else None
    space_repo_id = default_space_repo_id(repo_id) if space else None
    for repo in filter(None, (repo_id, merged_repo_id, space_repo_id)):
        check_repo_id(repo)
    written = render_preview(
        run,
        repo_id,
        out,
        merged_repo_id=merged_repo_id,
        endpoint=endpoint,
        token=token,
        space_repo_id=space_repo_id,
    )
    if not quiet:
        for path in written:
            echo(str(path))
        if merged_repo_id and not any(path.parent.name == "merged" for path in written):
            echo("merged card skipped: the newest checkpoint saved no adapter (a push rebuilds it first)")


def _token_owner(endpoint: str, token: str | None) -> str:
    """Who the token belongs to, asked as `hubkit push` asks it (the owner of the repo it publishes)."""
    from hubkit.hub.auth import hub_client
    from hubkit.hub.failures import hub_errors

    api = hub_client(endpoint, token)
    with hub_errors("your account", api.endpoint):
        return api.whoami()["name"]
