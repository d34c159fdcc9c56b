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
    """The base model's licence, as its own card on the Hub states it.

    Args:
        repo_id: the base model's Hub id.
        license: the card's ``license`` (``apache-2.0``, ``other`` ...); None when it states none.
        license_name: for a custom licence (``license: other``), its name (``qwen-research``).
        license_link: for a custom licence, an absolute link to its text.
    """

    repo_id: str
    license: str | None = None
    license_name: str | None = None
    license_link: str | None = None


@dataclass(frozen=True)
class CardInputs:
    """Everything the adapter and merged cards say, gathered by the push (or by `hubkit card`).

    Args:
        run: the run.
        repo_id: the adapter repo, "owner/name".
        steps: every step the adapter repo holds after this push, including steps published earlier; the
            newest one is the adapter at the root.
        adapter_bytes: the published adapter's size in bytes (weights + config), by step; steps missing
            here are shown without a size.
        has_tokenizer: whether the adapter repo's root holds the run's tokenizer (else the usage loads the base's).
        merged_repo_id: the merged model's repo, while the release has one (made by this push or an earlier
            one), else None.
        merged_step: the step merged into `merged_repo_id`.
        gguf_repo_id: the release's GGUF repo (``<repo>-GGUF``) while it has one, else None.
        gguf_step: the step whose merge `gguf_repo_id` holds.
        merged_verified: the check of `merged_repo_id` against its step (``hubkit_merge.verified``), if run.
        space_repo_id: the release's Space (``<repo>-demo``), when it has one.
        samples_repo_id: the release's samples dataset (``<repo>-samples``), when it has one.
        sweep_siblings: the other runs of the run's sweep on the Hub (`hubkit.publish.sweep.siblings.read_siblings`).
        base: the base model's licence (`hubkit.cards.read_base_model_card`).
        eval: the run's evaluation (`hubkit.runs.eval_results.load_eval`), or None.

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
