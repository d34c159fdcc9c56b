"""`hubkit verify --repo-id R`: a published release's merged model checked against its adapter, as users load
them; the table printed beside the figures its card recorded; exit status 1 naming the artifact and the
difference when it is not the adapter's model."""

from __future__ import annotations

import click

from hubkit.cli.options import endpoint_option
from hubkit.cli.output import echo

FIGURES = (
    ("prompts", "Prompts"),
    ("tokens", "Tokens"),
    ("max_abs_logit_diff", "Max |Δ logit|"),
    ("bound", "Bound"),
    ("top1_agreement", "Top-1 agreement"),
    ("adapter_effect", "Adapter vs base"),
)


@click.command()
@click.option(
    "--repo-id", required=True, metavar="OWNER/NAME", help="The adapter repo `hubkit push` published."
)
@click.option("--merged-repo-id", metavar="OWNER/NAME", help="The merged repo.  [default: <repo-id>-merged]")
@endpoint_option
def verify(repo_id: str, merged_repo_id: str | None, endpoint: str) -> None:
    """Check a release's merged model against the adapter it was merged from, loaded as users load them:
    the same prompt token ids and end tokens, next-token logits within the dtype's bound, top-1 agreement,
    and the adapter against the base. Exits 1 naming the artifact and the difference when it fails.

    \b
        $ hubkit verify --repo-id me/qwen3-4b-grpo
    """
    from hubkit.errors import VerificationError
    from hubkit.verify.release import verify_release

    check, recorded = verify_release(repo_id, merged_repo_id, endpoint=endpoint)
    measured = check.to_dict()
    rows = [("", *(title for _, title in FIGURES)), ("measured now", *(str(measured[k]) for k, _ in FIGURES))]
    if recorded is not None:
        rows.append(("the card says", *(str(recorded.get(k, "")) for k, _ in FIGURES)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    echo(f"{check.artifact} against {repo_id} {check.adapter} ({check.dtype})")
    for row in rows:
        echo(
            "  ".join(
                cell.rjust(width) if i else cell.ljust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )
    if not check.passed:
        raise VerificationError(check.refusal())
