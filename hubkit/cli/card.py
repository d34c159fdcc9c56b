"""`hubkit card`: the cards and images a push would publish for a run, written to a local folder for
preview: the push's own dry run, whose plan holds them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from hubkit.cli.options import RUN, Target, command, endpoint_option, options_of, quiet_option
from hubkit.cli.output import echo

if TYPE_CHECKING:
    from hubkit.publish import PushReport, PushRequest

# The owner a preview names when there is no token to ask the Hub for one (before `hf auth login`).
PREVIEW_OWNER = "your-username"


def _options() -> list[click.Option]:
    from hubkit.publish.request import PushRequest

    return options_of(PushRequest, "merged", "merged_repo_id", "space")


@command(
    target=(*RUN, "repo_id"),
    repo_id="The adapter repo the card is written for.  [default: as `hubkit push` chooses it: the recorded "
    f"push_to, else <token owner>/<run id>; without a token, {PREVIEW_OWNER}/<run id>]",
    options=_options,
)
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The folder to write README.md, assets/ and merged/README.md to.",
)
@endpoint_option
@quiet_option
def card(target: Target, out: Path, endpoint: str, quiet: bool, **options: Any) -> None:
    """Render the cards a push with these options would publish for a run: its dry run, the planned cards
    and images written to --out (the base model's licence is read from --endpoint).

    \b
    $ hubkit card --run-id RUN --repo-id me/qwen3-4b-gdpo --out card-preview/
    """
    from hubkit.adapters.base_check import BaseConfig
    from hubkit.cards import read_base_model_card
    from hubkit.hub.auth import hub_client, resolve_token, token_owner
    from hubkit.publish import PushRequest
    from hubkit.publish.push import PushSession
    from hubkit.publish.request import repo_name_for_run

    run = target.load()
    token = resolve_token(endpoint, required=False)
    repo_id = target.repo_id
    if repo_id is None and run.manifest.push_to is None:
        owner = token_owner(hub_client(endpoint, token)) if token else PREVIEW_OWNER
        repo_id = f"{owner}/{repo_name_for_run(run.manifest.run_id)}"
    # The dry run reads the base model's card and config from the client's cache: fetched into it here.
    manifest = run.manifest
    revision = manifest.base_model_revision
    read_base_model_card(manifest.base_model, revision, endpoint=endpoint, token=token)
    BaseConfig.download(manifest.base_model, revision, endpoint=endpoint, token=token)
    request = PushRequest(
        run.run_dir, repo_id, target.base_model, endpoint=endpoint, token=token, dry_run=True, **options
    )
    with PushSession(request) as session:
        report = session.push(run=run)
    for path in _write_cards(request, report, out):
        if not quiet:
            echo(str(path))


def _write_cards(request: PushRequest, report: PushReport, out: Path) -> list[Path]:
    """The planned cards and images of the adapter, merged and GGUF repos, written under `out`."""
    from hubkit.publish.release_repos import ReleaseRepos

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
    return written
