"""What a card says about how the model was trained, all read from the run: the objective, the reward,
the configuration, the dataset, the progress of training, run details and citations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hubkit.cards import text
from hubkit.cards.metrics import logged_components
from hubkit.hub.repo_types import HUB_ENDPOINT, repo_url
from hubkit.rewards import gsm8k
from hubkit.rewards.spec import RewardSpec
from hubkit.runs.algorithm import run_algorithm
from hubkit.runs.manifest import DatasetInfo, Manifest
from hubkit.runs.model import Run
from hubkit.runs.problem_hashes import TRAIN_PROBLEM_HASHES_NAME, read_train_problem_hashes

if TYPE_CHECKING:
    from hubkit.runs.eval_results import EvalResults

AGGREGATION_MEANINGS = {
    "sum_then_normalize": (
        "GRPO on the combined reward: each answer's weighted sum Σ wᵢ·rᵢ is z-normalized within the group "
        "of answers to the same prompt, A = (r − mean) / (std + ε)."
    ),
    "normalize_then_sum": (
        "GDPO: each reward term is z-normalized within the group of answers to the same prompt first, then "
        "the normalized terms are weighted and summed, A = Σ wᵢ·(rᵢ − meanᵢ) / (stdᵢ + ε)."
    ),
}
_BATCH_WHITEN = " The sum is then whitened over the whole batch (GDPO paper, TRL, verl)."


def _component_meanings() -> dict[str, str]:
    return {
        "math_correctness": (
            "1 when the last `\\boxed{}` answer is equivalent to the reference answer (math-verify), else 0"
        ),
        "length_penalty": "minus the answer's length in tokens over {L}: longer answers score lower",
        "gsm8k_correctness": (
            f"{gsm8k.CORRECTNESS_SCORE:g} when the last number in the last `<answer>` block equals the "
            "reference number, else 0"
        ),
        "gsm8k_strict_format": (
            f"{gsm8k.STRICT_FORMAT_SCORE:g} when the whole answer is a `<reasoning>` block then an `<answer>` "
            "block, each tag on its own line"
        ),
        "gsm8k_soft_format": (
            f"{gsm8k.SOFT_FORMAT_SCORE:g} when a `<reasoning>…</reasoning>` block is followed by an "
            "`<answer>…</answer>` block"
        ),
        "gsm8k_number_only": f"{gsm8k.NUMBER_ONLY_SCORE:g} when the `<answer>` block holds a plain number",
    }


_GOALS = {
    "math_correctness": "give correct final answers",
    "gsm8k_correctness": "give correct final answers",
    "length_penalty": "keep answers short",
    "gsm8k_strict_format": "follow the `<reasoning>`/`<answer>` format",
    "gsm8k_soft_format": "follow the `<reasoning>`/`<answer>` format",
    "gsm8k_number_only": "answer with a plain number",
}


def framework_name(manifest: Manifest) -> str:
    """``TRL 1.16.0`` / ``verl 0.6.1`` (the version when the manifest records it)."""
    name = {"trl": "TRL", "verl": "verl"}[manifest.framework]
    return f"{name} {manifest.framework_version}" if manifest.framework_version else name


def dataset_link(dataset: DatasetInfo) -> str:
    """The dataset as Markdown: a link for a Hub dataset, a named local file otherwise."""
    if dataset.on_hub:
        return f"[{dataset.id}]({repo_url(dataset.id, 'dataset')})"
    return f"a local problem file ({text.code(dataset.id)})"


def objective(run: Run) -> str:
    """One paragraph: what the training rewarded, on which problems, with which algorithm."""
    manifest = run.manifest
    spec = manifest.reward
    base = f"[{manifest.base_model}]({HUB_ENDPOINT}/{manifest.base_model})"
    trained = run_algorithm(run)
    by = f"{trained.name} ({framework_name(manifest)})" if trained.name else framework_name(manifest)
    parts = [f"{by} trained a LoRA adapter on {base}"]
    quantized = run.quantized_base
    if quantized is not None:
        parts.append(f" as QLoRA, on its 4-bit quantization {text.code(quantized.trained_on)}")
    if spec is not None:
        goals: list[str] = []
        for component in spec.components:
            goal = _GOALS.get(component.name, f"score high on `{component.name}`")
            if goal not in goals:
                goals.append(goal)
        joined = goals[0] if len(goals) == 1 else ", ".join(goals[:-1]) + " and " + goals[-1]
        parts.append(f" to {joined}")
    dataset = manifest.dataset
    if dataset is not None:
        rows = f", {dataset.num_rows:,} problems" if dataset.num_rows is not None else ""
        parts.append(f", on {dataset_link(dataset)} ({dataset.split} split{rows})")
    sentence = "".join(parts) + "."
    if spec is None and not trained.reward_driven:
        return sentence
    if spec is None:
        functions = reward_functions(run)
        if not functions:
            return sentence + " The run recorded no reward spec and logged no reward function."
        names = ", ".join(text.code(name) for name in functions)
        noun = "function" if len(functions) == 1 else "functions"
        return (
            f"{sentence} It was rewarded by {len(functions)} reward {noun} ({names}), whose definitions "
            "were not recorded."
        )
    terms = len(spec.components)
    noun = "term" if terms == 1 else "terms"
    return f"{sentence} The reward has {terms} {noun}, combined as `{spec.aggregation}` (below)."


def reward_functions(run: Run) -> tuple[str, ...]:
    """The reward functions the run logged but did not describe (no reward spec): TRL's
    ``rewards/<name>/mean``, verl GDPO's ``gdpo/<name>/mean``."""
    if run.manifest.reward is not None:
        return ()
    return logged_components(run)


def reward_functions_rows(run: Run) -> tuple[tuple[str, str, str], ...]:
    """The Reward section of a run without a reward spec: each logged function, its weight when the
    trainer's ``reward_weights`` gives every function the same one, and that its definition was not
    recorded."""
    functions = reward_functions(run)
    weights = run.trainer_settings.values.get("reward_weights") if run.trainer_settings else None
    # TRL saves its log with sorted keys: the functions' order (that of reward_weights) is lost, so a
    # weight is shown only when every function has the same one (TRL's default is 1.0 each).
    if weights is None:
        weight = (
            "1.0"
            if run.trainer_settings and run.trainer_settings.source == "training_args.bin"
            else text.MISSING
        )
    elif isinstance(weights, list) and weights and len(set(weights)) == 1:
        weight = text.setting(weights[0])
    else:
        weight = text.MISSING
    return tuple((text.code(name), weight, "definition not recorded") for name in functions)


@dataclass(frozen=True)
class RewardSection:
    """The reward as the card shows it: formula block, components table, aggregation name and meaning."""

    formula_block: str
    components: tuple[tuple[str, str, str, str], ...]  # name, weight, parameters, meaning (all cell-safe)
    aggregation: str
    meaning: str
    std: str
    epsilon: str


def reward_section(spec: RewardSpec | None) -> RewardSection | None:
    """The reward section, or None for a run without a reward spec."""
    if spec is None:
        return None
    meanings = _component_meanings()
    rows = []
    for component in spec.components:
        length = component.params.get("max_completion_length", "L")
        meaning = meanings.get(component.name, "").replace("{L}", str(length))
        params = ", ".join(f"{k} = {text.setting(v)}" for k, v in sorted(component.params.items()))
        rows.append(
            (
                text.code(component.name),
                text.setting(component.weight),
                text.cell(params or text.MISSING),
                meaning,
            )
        )
    meaning = AGGREGATION_MEANINGS[spec.aggregation] + (_BATCH_WHITEN if spec.batch_whiten else "")
    return RewardSection(
        formula_block=text.fence(spec.formula(), "text"),
        components=tuple(rows),
        aggregation=spec.aggregation,
        meaning=meaning,
        std=spec.std,
        epsilon=f"{spec.epsilon:g}",
    )


def wall_time(manifest: Manifest) -> str | None:
    """``3 h 05 min`` between the recorded start and end, or None when either is missing."""
    started, finished = text.parse_time(manifest.started_at), text.parse_time(manifest.finished_at)
    if started is None or finished is None:
        return None
    return text.duration((finished - started).total_seconds())


def max_steps(run: Run) -> int | None:
    """The planned number of steps (``max_steps``, or verl's ``total_training_steps``), as the manifest or
    the trainer recorded it."""
    recorded = run.trainer_settings.values if run.trainer_settings else {}
    for key in ("max_steps", "total_training_steps"):
        value = run.manifest.hyperparameters.get(key, recorded.get(key))
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


@dataclass(frozen=True)
class TrainingStatus:
    """Where training stands: the one reading of it (`Run.finished`) every part of a card uses."""

    finished: bool
    step: int
    total: int | None

    @property
    def words(self) -> str:
        """``finished at step 6 of 6`` / ``still training: step 3 of 6``."""
        of = f" of {self.total}" if self.total else ""
        return (
            f"finished at step {self.step}{of}" if self.finished else f"still training: step {self.step}{of}"
        )


def training_status(run: Run, steps: tuple[int, ...]) -> TrainingStatus:
    """Whether training finished (`Run.finished`), and the newest step logged, saved or published."""
    logged = [row.step for row in run.metrics.rows]
    saved = [c.step for c in run.checkpoints]
    return TrainingStatus(run.finished, max([*logged, *saved, *steps]), max_steps(run))


def progress(run: Run, steps: tuple[int, ...]) -> str:
    """Where training stands: ``Training finished at step N.`` or ``still running at step N of M``."""
    status = training_status(run, steps)
    of = f" of {status.total}" if status.total else ""
    if status.finished:
        return f"Training finished at step {status.step}{of}."
    return (
        f"**Training is still running**: this card was written at step {status.step}{of} and is refreshed by "
        "each push."
    )


def dataset_rows(dataset: DatasetInfo) -> tuple[tuple[str, str], ...]:
    """The dataset table: source, config, split, revision, filter, rows, content hash (what was recorded)."""
    rows = [("source", dataset_link(dataset))]
    if dataset.config:
        rows.append(("config", dataset.config))
    rows.append(("split", dataset.split))
    if dataset.revision:
        rows.append(("revision", text.code(dataset.revision)))
    if dataset.filter:
        rows.append(("filter", text.prose(dataset.filter)))
    if dataset.num_rows is not None:
        rows.append(("rows", f"{dataset.num_rows:,}"))
    if dataset.content_sha256:
        rows.append(("content sha256", text.code(dataset.content_sha256)))
    return tuple((name, text.cell(value)) for name, value in rows)


def run_details(run: Run, steps: tuple[int, ...]) -> tuple[tuple[str, str], ...]:
    """Run id, framework, training status, dates and trackers (with a link when the run recorded one)."""
    manifest = run.manifest
    rows = [("run id", text.code(manifest.run_id)), ("framework", framework_name(manifest))]
    rows.append(("training", training_status(run, steps).words))
    rows.append(("started", manifest.started_at or text.MISSING))
    if manifest.finished_at:
        rows.append(("ended", manifest.finished_at))
    rows += [(f"tracker: {tracker.name}", f"<{tracker.url}>") for tracker in manifest.trackers]
    recorded = {tracker.name for tracker in manifest.trackers}
    for tracker in run.trackers:
        if tracker.name in recorded:
            continue
        shown = [f"<{tracker.url}>"] if tracker.url else []
        shown += [tracker.detail] if tracker.detail else []
        rows.append((f"tracker: {tracker.name}", ", ".join(shown) or "logged (no link recorded)"))
    return tuple((name, text.cell(value)) for name, value in rows)


@dataclass(frozen=True)
class Citation:
    """A work the card cites: what it is for, its title and link, and BibTeX when known exactly."""

    role: str
    title: str
    url: str
    bibtex: str | None = None


GRPO_CITATION = Citation(
    role="GRPO",
    title="DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models",
    url="https://huggingface.co/papers/2402.03300",
    bibtex="""@article{shao2024deepseekmath,
    title        = {{DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models}},
    author       = {Zhihong Shao and Peiyi Wang and Qihao Zhu and Runxin Xu and Junxiao Song and Mingchuan Zhang and Y. K. Li and Y. Wu and Daya Guo},
    year         = 2024,
    eprint       = {arXiv:2402.03300},
}""",
)
GDPO_CITATION = Citation(
    role="GDPO (normalize-then-sum aggregation)",
    title="GDPO: Group reward-Decoupled Normalization Policy Optimization for Multi-reward RL Optimization",
    url="https://huggingface.co/papers/2601.05242",
)
DPO_CITATION = Citation(
    role="DPO",
    title="Direct Preference Optimization: Your Language Model is Secretly a Reward Model",
    url="https://huggingface.co/papers/2305.18290",
)
_DATASET_CITATIONS = {
    "openai/gsm8k": Citation(
        role="dataset",
        title="Training Verifiers to Solve Math Word Problems",
        url="https://huggingface.co/papers/2110.14168",
        bibtex="""@article{cobbe2021gsm8k,
    title   = {Training Verifiers to Solve Math Word Problems},
    author  = {Cobbe, Karl and Kosaraju, Vineet and Bavarian, Mohammad and Chen, Mark and Jun, Heewoo and Kaiser, Lukasz and Plappert, Matthias and Tworek, Jerry and Hilton, Jacob and Nakano, Reiichiro and Hesse, Christopher and Schulman, John},
    journal = {arXiv preprint arXiv:2110.14168},
    year    = {2021}
}""",
    ),
}


def citations(run: Run) -> tuple[Citation, ...]:
    """The algorithm's papers (GRPO's for GRPO and GDPO, which builds on it; GDPO's; DPO's) and the
    dataset's."""
    manifest, trained = run.manifest, run_algorithm(run).name
    found = [GRPO_CITATION] if trained in ("GRPO", "GDPO") else []
    found += [GDPO_CITATION] if trained == "GDPO" else []
    found += [DPO_CITATION] if trained == "DPO" else []
    dataset = manifest.dataset
    if dataset is not None and dataset.on_hub:
        found.append(
            _DATASET_CITATIONS.get(
                dataset.id,
                Citation(
                    role="dataset",
                    title=f"{dataset.id} (see its card for how to cite it)",
                    url=repo_url(dataset.id, "dataset"),
                ),
            )
        )
    return tuple(found)


def contamination(run: Run, evaluation: EvalResults | None) -> str:
    """What the card can say about contamination, from what the data preparation and the eval recorded."""
    hashes = read_train_problem_hashes(run.run_dir)
    if hashes is None:
        parts = [
            "The run records no hashes of its training problems: benchmarks cannot be checked against them."
        ]
    else:
        parts = [
            f"The data preparation recorded the normalized-text SHA-256 of all {len(hashes):,} training problems "
            f"({text.code(TRAIN_PROBLEM_HASHES_NAME)}): any benchmark can be checked against them."
        ]
    if evaluation is not None:
        problems = evaluation.summary.problems
        checked = problems.contamination
        split = f", {problems.split} split" if problems.split else ""
        where = f"{problems.n} evaluation problems ({text.code(problems.source)}{split})"
        if checked.checked:
            parts.append(f"The {where} were checked against them: {checked.overlap} overlap.")
        else:
            parts.append(f"The {where} were not checked for contamination.")
    return " ".join(parts)
