"""How long an answer may be: the length the run trained with, from what the run recorded.

In this order: ``--max-new-tokens``; the manifest's hyperparameters (``max_completion_length``, TRL's name,
or ``max_response_length``, verl's); for a TRL run without ``hubkit.json``, the ``max_completion_length``
in its newest checkpoint's ``training_args.bin``; else `FALLBACK_MAX_NEW_TOKENS`, said as such.

``training_args.bin`` is TRL's config pickled by ``torch.save``, and a run directory is untrusted input: it
is read by torch's weights-only unpickler, with every class it names replaced by `_Record`, a plain holder
of the fields, so that nothing of TRL, transformers or accelerate (and nothing else) is run or even
imported. A file naming a class outside those three packages is not read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hubkit.errors import HubkitError
from hubkit.formats.json_file import read_bounded
from hubkit.runs import Run

# Without a recorded answer length, answers get this many tokens (the GSM8K seed run's 768, rounded up).
FALLBACK_MAX_NEW_TOKENS = 1024
TRAINING_ARGS_NAME = "training_args.bin"
# The hyperparameter names of the answer length, TRL's then verl's.
_LENGTH_KEYS = ("max_completion_length", "max_response_length")
# A GRPOConfig pickles to about 8 KB; anything far larger is not TRL's arguments.
_MAX_TRAINING_ARGS_BYTES = 1024 * 1024
# The packages whose classes a TRL training_args.bin names (GRPOConfig, transformers' enums and
# AcceleratorConfig, accelerate's PartialState and DistributedType).
_TRAINER_PACKAGES = ("trl.", "transformers.", "accelerate.")


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


class _Record:
    """What every class named in ``training_args.bin`` becomes: its pickled fields, nothing run."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.args = args  # an enum member's value, for example

    def __setstate__(self, state: object) -> None:
        if isinstance(state, dict):
            self.__dict__.update(state)


def read_training_args(path: Path) -> dict[str, Any] | None:
    """The fields of a TRL ``training_args.bin``, read without running any of its classes.

    Args:
        path: the file.

    Returns:
        Field name → value (enums and nested configs are `_Record`s), or None when the file is not one that
        can be read so (too large, not a torch file, a class outside TRL, transformers and accelerate).
    """
    import io
    import pickle

    import torch

    try:
        data = read_bounded(path, _MAX_TRAINING_ARGS_BYTES)
        names = torch.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data))
    except (HubkitError, RuntimeError, ValueError, OSError):
        return None
    if not all(name.startswith(_TRAINER_PACKAGES) for name in names):
        return None
    stand_ins = [(type(name.rpartition(".")[2], (_Record,), {}), name) for name in names]
    try:
        with torch.serialization.safe_globals(stand_ins):
            loaded = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except (pickle.UnpicklingError, RuntimeError, AttributeError, TypeError, ValueError, EOFError):
        return None  # what the restricted unpickler raises for a file it cannot read
    return dict(vars(loaded)) if isinstance(loaded, _Record) else None


def _positive_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def answer_length(run: Run, requested: int | None) -> AnswerLength:
    """The answer token limit for evaluating `run`.

    Args:
        run: the run (a run directory, or a release read back).
        requested: ``--max-new-tokens``, if given.

    Returns:
        The limit and its source.
    """
    if requested is not None:
        return AnswerLength(requested, "--max-new-tokens")
    for key in _LENGTH_KEYS:
        recorded = _positive_int(run.manifest.hyperparameters.get(key))
        if recorded is not None:
            return AnswerLength(recorded, f"the run's {key}")
    latest = run.latest
    if run.framework == "trl" and latest is not None and (latest.path / TRAINING_ARGS_NAME).is_file():
        fields = read_training_args(latest.path / TRAINING_ARGS_NAME) or {}
        recorded = _positive_int(fields.get("max_completion_length"))
        if recorded is not None:
            where = f"{latest.path.name}/{TRAINING_ARGS_NAME}"
            return AnswerLength(recorded, f"the run's max_completion_length (from {where})")
    return AnswerLength(
        FALLBACK_MAX_NEW_TOKENS,
        f"hubkit's default: the run records no {' or '.join(_LENGTH_KEYS)}",
        recorded=False,
    )
