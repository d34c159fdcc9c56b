"""`hubkit space`: run a published run's comparison Space on this machine."""

from __future__ import annotations

import click

from hubkit.cli.options import RUN, Target, command, endpoint_option
from hubkit.cli.output import echo


@command(
    target=(*RUN, "repo_id"),
    repo_id="The adapter repo.  [default: the run's recorded push_to; without a run: required]",
)
@click.option(
    "--port", type=click.IntRange(1, 65535), default=7860, show_default=True, help="Port on 127.0.0.1."
)
@endpoint_option
def space(target: Target, port: int, endpoint: str) -> None:
    """Run the comparison Space on 127.0.0.1 against the published repos.

    The same app `hubkit push` publishes as <repo-id>-demo: the base model and any checkpoint answer
    side by side, and one prompt is answered by every checkpoint. With --run-id the configuration
    comes from the run (as the push writes it); with --repo-id alone, from the repo's hubkit.json.

    \b
        $ hubkit space --run-id RUN
        $ hubkit space --repo-id me/qwen3-4b-grpo --port 7861
    """
    from hubkit.hub.auth import hub_client, resolve_token
    from hubkit.space.config import SpaceConfig, space_config_from_hub
    from hubkit.space.serve import serve_locally
    from hubkit.space.template_check import check_chat_template

    if target.run_given:
        run = target.load()
        repo_id = target.repo_id or run.manifest.push_to
        if not repo_id:
            raise click.UsageError(f"run {run.manifest.run_id} records no push_to: pass --repo-id OWNER/NAME")
        config = SpaceConfig.from_run(run, repo_id)
    elif target.repo_id:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()  # the release's adapters are downloaded to be checked: errors stay one line
        config = space_config_from_hub(
            hub_client(endpoint, resolve_token(endpoint, required=False)), target.repo_id
        )
    else:
        raise click.UsageError("pass --run-id RUN (or --run-dir PATH), or --repo-id OWNER/NAME")
    check_chat_template(hub_client(endpoint, resolve_token(endpoint, required=False)), config)
    served = ", ".join(run.adapter_repo for run in config.app.runs)
    echo(f"Serving {served} from {endpoint} on http://127.0.0.1:{port}/ (Ctrl-C stops it)")
    serve_locally(config, port=port, endpoint=endpoint)
