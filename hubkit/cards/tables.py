"""The card's tables and examples built from numbers: key metrics at the first, middle and last logged
step, the checkpoint table, the evaluation table, and before/after answers from the eval's samples."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hubkit.cards import text
from hubkit.cards.inputs import CardInputs
from hubkit.cards.metrics import MetricSeries, select, snapshot_steps
from hubkit.release.layout import checkpoint_dir, revision_name
from hubkit.safety.local_paths import mask_homes

if TYPE_CHECKING:
    from hubkit.runs.eval_results import EvalResults, ModelResult, Sample

# The metrics the checkpoint table shows at each step, when logged (components: every `component:*`).
_CHECKPOINT_COLUMNS = ("reward", "component:*", "length_mean", "kl")
_SHORT_LABELS = {"reward": "reward", "length_mean": "length (mean)", "kl": "KL"}
STEP_ANSWER_CHARS = 80  # an answer's start in the every-step table
ANSWER_CHARS = 1500  # a before/after answer is shown up to this many characters


@dataclass(frozen=True)
class Table:
    """A Markdown table whose cells are already cell-safe text."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: tuple[bool, ...]  # right-aligned columns

    @property
    def markdown(self) -> str:
        """The table as Markdown lines (header, alignment row, one line per row)."""
        align = ["---:" if right else "---" for right in self.numeric]
        lines = [self.header, tuple(align), *self.rows]
        return "\n".join("| " + " | ".join(line) + " |" for line in lines)


def key_metrics_table(series: Sequence[MetricSeries]) -> Table | None:
    """Each logged key metric at the first, middle and last logged step; None when nothing was logged."""
    steps = snapshot_steps(tuple(series))
    if not steps:
        return None
    rows = tuple(
        (text.cell(s.label), text.code(s.logged_as), *(text.number(s.at(step)) for step in steps))
        for s in series
    )
    header = ("metric", "logged as", *(f"step {step}" for step in steps))
    return Table(header=header, rows=rows, numeric=(False, False, *(True,) * len(steps)))


def _column_label(series: MetricSeries) -> str:
    return _SHORT_LABELS.get(series.key) or series.key.removeprefix("component:")


def checkpoint_table(inputs: CardInputs, series: Sequence[MetricSeries]) -> Table:
    """Every step in the repo: its subfolder and its branch (the two ways to load it), adapter size, the
    metrics logged at it, and its eval if any."""
    shown = select(series, _CHECKPOINT_COLUMNS)
    evaluation = inputs.eval
    header = ["step", "subfolder", "revision", "adapter size", *(text.cell(_column_label(s)) for s in shown)]
    if evaluation is not None:
        header += ["eval accuracy", "eval tokens (mean)"]
    rows = []
    for step in inputs.steps:
        row = [
            str(step),
            text.code(checkpoint_dir(step)),
            text.code(revision_name(step)),
            text.size(inputs.adapter_bytes.get(step)),
        ]
        row += [text.number(s.at(step)) for s in shown]
        if evaluation is not None:
            result = result_at(evaluation, step)
            row += (
                [text.percent(result.accuracy), text.number(result.tokens_mean)]
                if result
                else [text.MISSING] * 2
            )
        rows.append(tuple(row))
    numeric = (True, False, False, True, *(True,) * (len(header) - 4))
    return Table(header=tuple(header), rows=tuple(rows), numeric=numeric)


def result_at(evaluation: EvalResults | None, step: int | None) -> ModelResult | None:
    """The result of the model at `step` (None: the base), or None when it was not evaluated."""
    return next((m for m in evaluation.summary.models if m.step == step), None) if evaluation else None


def eval_table(evaluation: EvalResults) -> Table:
    """Accuracy (95 % interval), answer length and the share cut at the token limit, per evaluated model."""
    summary = evaluation.summary
    models = ([summary.base] if summary.base else []) + list(summary.checkpoints)
    rows = tuple(
        (
            "base model" if m.step is None else f"step {m.step}",
            text.percent(m.accuracy),
            f"{text.percent(m.ci95[0])} – {text.percent(m.ci95[1])}",
            f"{m.correct}/{m.n}",
            text.number(m.tokens_mean),
            text.number(m.tokens_median),
            str(m.tokens_max),
            text.percent(m.truncated_share),
        )
        for m in models
    )
    return Table(
        ("model", "accuracy", "95 % interval", "correct", "tokens (mean)", "median", "max", "cut at limit"),
        rows,
        (False, *(True,) * 7),
    )


def example_step(inputs: CardInputs) -> int | None:
    """The checkpoint whose answers the card compares with the base: the root adapter's step when it was
    evaluated, else the newest evaluated step in the repo, else the eval's best; None without an eval."""
    evaluation = inputs.eval
    if evaluation is None:
        return None
    evaluated = {m.step for m in evaluation.summary.checkpoints}
    in_repo = [step for step in inputs.steps if step in evaluated]
    if in_repo:
        return in_repo[-1]
    best = evaluation.best()
    return best.step if best else None


@dataclass(frozen=True)
class AnswerPair:
    """One problem answered by the base model and by a checkpoint (texts ready for code blocks)."""

    problem: str
    reference: str
    before: str
    before_verdict: str
    after: str
    after_verdict: str
    # the base and every evaluated checkpoint on this problem: tokens, verdict, the answer's start
    every_step: Table


def _shown(answer: str) -> str:
    answer = mask_homes(answer)
    if len(answer) <= ANSWER_CHARS:
        return answer
    return f"{answer[:ANSWER_CHARS]}\n[… {len(answer) - ANSWER_CHARS:,} more characters]"


def _verdict(sample: Sample) -> str:
    cut = ", cut at the token limit" if sample.truncated else ""
    return f"{'correct' if sample.correct else 'wrong'}, {sample.tokens} tokens{cut}"


def before_after(inputs: CardInputs, limit: int = 3) -> tuple[AnswerPair, ...]:
    """Up to `limit` problems answered by the base and by `example_step`'s checkpoint, the telling ones first."""
    step = example_step(inputs)
    if inputs.eval is None or step is None:
        return ()
    return tuple(
        AnswerPair(
            problem=text.fence(before.problem),
            reference=text.code(before.reference),
            before=text.fence(_shown(before.answer)),
            before_verdict=_verdict(before),
            after=text.fence(_shown(after.answer)),
            after_verdict=_verdict(after),
            every_step=_every_step(inputs.eval, before.problem_index),
        )
        for before, after in inputs.eval.before_after(step, limit=limit)
    )


def _start(answer: str) -> str:
    flat = " ".join(mask_homes(answer).split())
    return flat if len(flat) <= STEP_ANSWER_CHARS else flat[:STEP_ANSWER_CHARS] + "…"


def _every_step(evaluation: EvalResults, problem_index: int) -> Table:
    """One row per evaluated model (the base first, then by step): its answer's length, verdict and start."""
    answers = sorted(
        (s for s in evaluation.samples if s.problem_index == problem_index),
        key=lambda s: (s.step is not None, s.step or 0),
    )
    rows = tuple(
        (
            "base" if s.step is None else f"step {s.step}",
            f"{s.tokens:,}",
            ("correct" if s.correct else "wrong") + (", cut" if s.truncated else ""),
            text.literal(_start(s.answer)),
        )
        for s in answers
    )
    return Table(("model", "tokens", "verdict", "answer (start)"), rows, (False, True, False, False))
