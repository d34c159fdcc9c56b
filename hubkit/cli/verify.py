"""`hubkit verify --repo-id R`: a published release's merged model checked against its adapter, as users load
them, then each of its GGUF files against the merged model (in llama.cpp when llama-cpp-python is installed);
each table printed beside the figures its card recorded; exit status 1 naming the artifact and the difference
when one is not the model it was made from."""

from __future__ import annotations

import click

from hubkit.cli.options import Target, command, endpoint_option, options_of
from hubkit.cli.output import echo

FIGURES = (
    ("prompts", "Prompts"),
    ("tokens", "Tokens"),
    ("max_abs_logit_diff", "Max |Δ logit|"),
    ("bound", "Bound"),
    ("top1_agreement", "Top-1 agreement"),
    ("adapter_effect", "Adapter vs base"),
)
GGUF_FIGURES = (("prompts", "Prompts"), ("tokens", "Tokens"), ("top1_agreement", "Top-1 agreement"))
GGUF_FIGURES += (("mean_kl", "Mean KL"),)


def _gguf_cell(key: str, value: object) -> str:
    """A GGUF figure as the GGUF card prints it (agreement in percent to a tenth, KL to 3 digits)."""
    if not isinstance(value, int | float):
        return "–"
    if key == "top1_agreement":
        return f"{100 * float(value):.1f} %"
    return f"{float(value):.3g}" if key == "mean_kl" else str(int(value))


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        echo(
            "  ".join(
                cell.rjust(width) if i else cell.ljust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )


def _options() -> list[click.Option]:
    from hubkit.publish.request import PushRequest

    return options_of(PushRequest, "merged_repo_id", "gguf_repo_id")


@command(
    target=("repo_id",),
    repo_id={"help": "The adapter repo `hubkit push` published.", "required": True},
    options=_options,
)
@endpoint_option
def verify(target: Target, merged_repo_id: str | None, gguf_repo_id: str | None, endpoint: str) -> None:
    """Check a release's merged model against the adapter it was merged from, loaded as users load them:
    the same prompt token ids and end tokens, next-token logits within the dtype's bound, top-1 agreement,
    and the adapter against the base; then each GGUF file against the merged model: its prompt token ids
    and end token, and in llama.cpp its top-1 agreement and mean KL. Exits 1 naming the artifact and the
    difference when one fails.

    \b
        $ hubkit verify --repo-id me/qwen3-4b-grpo
    """
    from hubkit.errors import VerificationError
    from hubkit.verify.release import verify_release

    repo_id = target.repo_id
    check, recorded, gguf = verify_release(repo_id, merged_repo_id, gguf_repo_id, endpoint=endpoint)
    measured = check.to_dict()
    rows = [("", *(title for _, title in FIGURES)), ("measured now", *(str(measured[k]) for k, _ in FIGURES))]
    if recorded is not None:
        rows.append(("the card says", *(str(recorded.get(k, "")) for k, _ in FIGURES)))
    echo(f"{check.artifact} against {repo_id} {check.adapter} ({check.dtype})")
    _table(rows)
    if not check.passed:
        raise VerificationError(check.refusal())
    for file_check, file_recorded in gguf:
        echo(f"{file_check.artifact} ({file_check.gguf_type}) against {check.artifact}")
        figures = file_check.to_dict()
        rows = [("", *(title for _, title in GGUF_FIGURES))]
        rows.append(("measured now", *(_gguf_cell(k, figures.get(k)) for k, _ in GGUF_FIGURES)))
        if file_recorded is not None:
            rows.append(("the card says", *(_gguf_cell(k, file_recorded.get(k)) for k, _ in GGUF_FIGURES)))
        _table(rows)
    failed = [c.refusal() for c, _ in gguf if not c.passed]
    if failed:
        raise VerificationError("; ".join(failed))
