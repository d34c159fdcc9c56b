"""What a card is written from: the run, the repos it is published to, the base model's card, the eval."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hubkit.errors import PublishError

if TYPE_CHECKING:
    from hubkit.cards.sweep_siblings import SweepSibling
    from hubkit.runs import Run
    from hubkit.runs.eval_results import EvalResults


@dataclass(frozen=True)
class BaseModelCard:
    """The base model's licence, as its own card on the Hub states it: ``license`` (``apache-2.0``,
    ``other`` ...; None when it states none) and, for a custom one (``other``), its name (``qwen-research``)
    and an absolute link to its text."""

    repo_id: str
    license: str | None = None
    license_name: str | None = None
    license_link: str | None = None


@dataclass(frozen=True)
class CardInputs:
    """Everything the adapter and merged cards say, gathered by the push (or by `hubkit card`).

    `steps`: every step the adapter repo holds after this push, including steps published earlier (the
    newest is the adapter at the root); `adapter_bytes`: the published adapters' sizes (weights + config),
    by step, a step missing shown without one; `has_tokenizer`: the repo's root holds the run's tokenizer
    (else the usage loads the base's). The release's other repos (merged and GGUF, each with the step it
    holds; Space; samples) are named while it has them, made by this push or an earlier one; `merged_verified` is
    ``hubkit_merge.verified``; `sweep_siblings` from `hubkit.publish.sweep.siblings.read_siblings`.

    Raises:
        PublishError: no steps, or a merged repo without its step.
    """

    run: Run
    repo_id: str
    steps: tuple[int, ...]
    base: BaseModelCard
    adapter_bytes: dict[int, int] = field(default_factory=dict)
    has_tokenizer: bool = False
    merged_repo_id: str | None = None
    merged_step: int | None = None
    gguf_repo_id: str | None = None
    gguf_step: int | None = None
    merged_verified: Mapping[str, Any] | None = None
    eval: EvalResults | None = None
    space_repo_id: str | None = None
    samples_repo_id: str | None = None
    sweep_siblings: tuple[SweepSibling, ...] = ()

    def __post_init__(self) -> None:
        if not self.steps:
            raise PublishError(f"cannot write a card for {self.repo_id} without any checkpoint")
        if (self.merged_repo_id is None) != (self.merged_step is None):
            raise PublishError("a merged repo needs its merged step (and a merged step its repo)")
        if (self.gguf_repo_id is None) != (self.gguf_step is None):
            raise PublishError("a GGUF repo needs its step (and a GGUF step its repo)")
        object.__setattr__(self, "steps", tuple(sorted(set(self.steps))))

    @property
    def root_step(self) -> int:
        """The step of the adapter at the repo root: the newest one in the repo."""
        return self.steps[-1]
