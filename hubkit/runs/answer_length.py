"""How long an answer may be: the length the run trained with, from what the run recorded.

In this order: ``--max-new-tokens``; the manifest's hyperparameters (``max_completion_length``, TRL's name,
or ``max_response_length``, verl's); for a TRL run without recorded hyperparameters, what its trainer
saved (``training_args.bin`` or ``trainer_state.json``, read by `hubkit.runs`: see
`hubkit.formats.training_args` for how a pickle is read without running it); else
`FALLBACK_MAX_NEW_TOKENS`, said as such.
"""

from __future__ import annotations

from dataclasses import dataclass

from hubkit.formats.json_fields import is_count
from hubkit.runs.manifest import Manifest
from hubkit.runs.model import Run

# Without a recorded answer length, answers get this many tokens (the GSM8K seed run's 768, rounded up).
FALLBACK_MAX_NEW_TOKENS = 1024
# The hyperparameter names of the answer length, TRL's then verl's.
_LENGTH_KEYS = ("max_completion_length", "max_response_length")


@dataclass(frozen=True)
class AnswerLength:
    """The answer token limit of an evaluation, and where it came from.

    Args:
        tokens: the limit.
        source: where it came from, in words (``the run's max_completion_length``, ...).
        recorded: False when the run records no answer length and the fallback is used.
    """

    tokens: int
    source: str
    recorded: bool = True


def manifest_length(manifest: Manifest) -> AnswerLength | None:
    """The answer length a manifest records (TRL's or verl's name), or None: what a published release's
    `hubkit.json` says, where the trainer's own files are not at hand."""
    for key in _LENGTH_KEYS:
        recorded = manifest.hyperparameters.get(key)
        if is_count(recorded):
            return AnswerLength(recorded, f"the run's {key}")
    return None


def answer_length(run: Run, requested: int | None) -> AnswerLength:
    """The answer token limit, and its source, for evaluating `run` (a run directory, or a release read
    back); `requested` is ``--max-new-tokens``, if given."""
    if requested is not None:
        return AnswerLength(requested, "--max-new-tokens")
    in_manifest = manifest_length(run.manifest)
    if in_manifest is not None:
        return in_manifest
    settings = run.trainer_settings
    if settings is not None:
        recorded = settings.values.get("max_completion_length")
        if is_count(recorded):
            where = f"{run.latest.path.name}/{settings.source}" if run.latest is not None else settings.source
            return AnswerLength(recorded, f"the run's max_completion_length (from {where})")
    return AnswerLength(
        FALLBACK_MAX_NEW_TOKENS,
        f"hubkit's default: the run records no {' or '.join(_LENGTH_KEYS)}",
        recorded=False,
    )
