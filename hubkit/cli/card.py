"""`hubkit card`: the cards and images a push would publish for a run, written to a local folder for
preview: the push's own dry run, whose plan holds them."""

from __future__ import annotations

from pathlib import Path

import click

from hubkit.cli.options import endpoint_option, quiet_option, run_options
from hubkit.cli.output import echo

# The owner a preview names when there is no token to ask the Hub for one (before `hf auth login`).
PREVIEW_OWNER = "your-username"


@click.command()
@run_options
@click.option(
    "--repo-id",
    metavar="OWNER/NAME",
    help="The adapter repo the card is written for.  [default: as `hubkit push` chooses it: the recorded "
    f"push_to, else <token owner>/<run id>; without a token, {PREVIEW_OWNER}/<run id>]",
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
    from hubkit.adapters.base_check import BaseConfig
    from hubkit.cards import read_base_model_card
    from hubkit.hub.auth import hub_client, resolve_token, token_owner
    from hubkit.publish import PushRequest
    from hubkit.publish.push import PushSession
    from hubkit.publish.release_repos import ReleaseRepos
    from hubkit.publish.request import repo_name_for_run
    from hubkit.runs import find_run_dir, load_run

    run = load_run(find_run_dir(run_id, runs_dir, run_dir), base_model=base_model)
    token = resolve_token(endpoint, required=False)
    if repo_id is None and run.manifest.push_to is None:
        owner = token_owner(hub_client(endpoint, token)) if token else PREVIEW_OWNER
        repo_id = f"{owner}/{repo_name_for_run(run.manifest.run_id)}"
    # The dry run reads the base model's card and config from the client's cache: fetched into it here.
    manifest = run.manifest
    revision = manifest.base_model_revision
    read_base_model_card(manifest.base_model, revision, endpoint=endpoint, token=token)
    BaseConfig.download(manifest.base_model, revision, endpoint=endpoint, token=token)
    request = PushRequest(
        run_dir=run.run_dir,
        repo_id=repo_id,
        base_model=base_model,
        merged=merged,
        merged_repo_id=merged_repo_id,
        space=space,
        endpoint=endpoint,
        token=token,
        dry_run=True,
    )
    with PushSession(request) as session:
        report = session.push(run=run)
    repos = ReleaseRepos.of(request, report.repo_id)
    folders = {repos.adapter: "", repos.merged: "merged", repos.gguf: "gguf"}
    written = []
    for repo in report.plan.repos:
        folder = folders.get(repo.repo_id)
        for planned in repo.files if folder is not None else ():
            if planned.path_in_repo == "README.md" or planned.path_in_repo.startswith("assets/"):
                path = out / folder / planned.path_in_repo
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(planned.read_bytes())
                written.append(path)
    if not quiet:
        for path in written:
            echo(str(path))
