"""Prepare the DeepScaleR training problems for verl 0.6.1: the easiest problems, in verl's parquet format.

The problems come from `agentica-org/DeepScaleR-Preview-Dataset` (one `deepscaler.json`, columns `problem`,
`answer`, `solution`). DeepScaleR has no difficulty column, so the solve rate comes from the companion
`lime-nlp/DeepScaleR_Difficulty` (config "Difficulty Score", file `Qwen2.5-Math-7B--deepscaler--difficulty.csv`:
columns `problem`, `ground_truth`, `solved_percentage`, where `solved_percentage` is the share of 128
Qwen2.5-Math-7B samples that were correct, in percent). The two are joined on the problem text (surrounding
whitespace stripped); a problem annotated more than once keeps its lowest solve rate. The seed run kept the
problems solved 99-100 % of the time (1,840 rows expected).

A source that already carries a solve-rate column needs no companion: name it with `--solve-rate-column` and
pass `--difficulty-source none`.

Writes `<output-dir>/train.parquet` (verl's RL format: data_source, prompt, ability, reward_model, extra_info),
`<output-dir>/dataset_info.json` (dataset id, revision, filter, row count and content hash, as the run
manifest's `dataset`) and `<output-dir>/train_problems.sha256` (the normalized-text hash of every training
problem; `write_manifest.py start` copies it into the run, where `hubkit eval` checks benchmarks against it).
Examples::

    # from the Hub (needs network)
    python recipes/verl_gdpo/prepare_data.py --output-dir data/deepscaler_easy
    # from local copies of both files
    python recipes/verl_gdpo/prepare_data.py --source-file deepscaler.json \\
        --difficulty-file Qwen2.5-Math-7B--deepscaler--difficulty.csv --output-dir data/deepscaler_easy
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from hubkit.errors import HubkitError
from hubkit.runs.manifest import DatasetInfo
from hubkit.runs.problem_hashes import write_train_problem_hashes

logger = logging.getLogger("prepare_data")

DATASET_ID = "agentica-org/DeepScaleR-Preview-Dataset"
DATASET_FILE = "deepscaler.json"
DIFFICULTY_ID = "lime-nlp/DeepScaleR_Difficulty"
DIFFICULTY_FILE = "Qwen2.5-Math-7B--deepscaler--difficulty.csv"
SOLVE_RATE_COLUMN = "solved_percentage"
# The system prompt of the seed run, verbatim.
SYSTEM_PROMPT = (
    "Please reason through this problem for yourself, and then when giving your answer ONLY provide your final "
    "answer within \\boxed{} and DO NOT provide any reasoning."
)
DATA_SOURCE = "deepscaler"


class DataPrepError(HubkitError):
    """The source files are missing a column, hold no usable rows, or give an unexpected row count."""


def read_table(path: Path) -> pd.DataFrame:
    """Read a JSON array, JSON lines, CSV or parquet file into a DataFrame.

    Raises:
        DataPrepError: the file does not exist or has an unknown extension.
    """
    if not path.is_file():
        raise DataPrepError(f"no such file: {path}")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return pd.read_parquet(path)
    if suffix == ".csv":
        return pd.read_csv(path)
    if suffix == ".jsonl":
        return pd.read_json(path, lines=True, dtype=False)
    if suffix == ".json":
        # deepscaler.json is one JSON array; accept JSON lines under the same extension too.
        with path.open() as f:
            first = f.read(1)
            while first.isspace():
                first = f.read(1)
        return pd.read_json(path, lines=first != "[", dtype=False)
    raise DataPrepError(f"{path.name}: expected .json, .jsonl, .csv or .parquet")


def _require_columns(frame: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise DataPrepError(f"{what} has no column(s) {missing}; it has {sorted(frame.columns)}")


def _download(repo_id: str, filename: str, revision: str | None) -> tuple[Path, str]:
    """Download one file of a Hub dataset; returns the local path and the commit it came from."""
    from huggingface_hub import HfApi, hf_hub_download

    commit = HfApi().dataset_info(repo_id, revision=revision).sha
    path = hf_hub_download(repo_id, filename, repo_type="dataset", revision=commit)
    return Path(path), commit


def select_easy_problems(
    problems: pd.DataFrame,
    difficulty: pd.DataFrame | None,
    solve_rate_column: str,
    min_solve_rate: float,
) -> pd.DataFrame:
    """Keep the problems with an answer whose solve rate is at least `min_solve_rate` (percent).

    Args:
        problems: rows with `problem` and `answer` (and optionally `solution`, and the solve-rate column when
            `difficulty` is None).
        difficulty: rows with `problem` and the solve-rate column, joined on the stripped problem text;
            None when `problems` carries the column itself.
        solve_rate_column: the column holding the solve rate in percent (0-100).
        min_solve_rate: the lowest solve rate kept, in percent.

    Returns:
        The kept rows in source order, with a `solve_rate` column and the source row number in `source_index`.

    Raises:
        DataPrepError: a needed column is missing.
    """
    _require_columns(problems, ("problem", "answer"), "the problem file")
    frame = problems.reset_index(drop=True).copy()
    frame["source_index"] = frame.index
    frame["_key"] = frame["problem"].astype(str).str.strip()
    if difficulty is None:
        _require_columns(frame, (solve_rate_column,), "the problem file")
        frame["solve_rate"] = pd.to_numeric(frame[solve_rate_column], errors="coerce")
    else:
        _require_columns(difficulty, ("problem", solve_rate_column), "the difficulty file")
        rates = pd.DataFrame(
            {
                "_key": difficulty["problem"].astype(str).str.strip(),
                "solve_rate": pd.to_numeric(difficulty[solve_rate_column], errors="coerce"),
            }
        )
        # A problem annotated twice keeps its lowest rate: "easy" must hold for every annotation.
        rates = rates.groupby("_key", as_index=False, sort=False)["solve_rate"].min()
        frame = frame.merge(rates, on="_key", how="left", sort=False)
    has_answer = frame["answer"].notna() & (frame["answer"].astype(str).str.strip() != "")
    easy = frame["solve_rate"] >= min_solve_rate
    kept = frame[has_answer & easy].sort_values("source_index", kind="stable")
    return kept.drop(columns=["_key"]).reset_index(drop=True)


def to_verl_rows(kept: pd.DataFrame, data_source: str = DATA_SOURCE) -> pd.DataFrame:
    """verl's RL parquet rows: the system prompt, the problem as the user turn, the answer as ground truth."""
    records = []
    for i, row in enumerate(kept.itertuples(index=False)):
        records.append(
            {
                "data_source": data_source,
                "prompt": [
                    {"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": str(row.problem)},
                ],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": str(row.answer).strip()},
                "extra_info": {
                    "split": "train",
                    "index": i,
                    "source_index": int(row.source_index),
                    "solve_rate": float(row.solve_rate),
                },
            }
        )
    return pd.DataFrame.from_records(records)


def content_sha256(rows: pd.DataFrame) -> str:
    """A hash of what training sees (prompts and ground truths, in order), independent of parquet encoding."""
    digest = hashlib.sha256()
    for prompt, reward in zip(rows["prompt"], rows["reward_model"], strict=True):
        line = json.dumps({"prompt": list(prompt), "ground_truth": reward["ground_truth"]}, sort_keys=True)
        digest.update(line.encode() + b"\n")
    return digest.hexdigest()


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--output-dir", type=Path, required=True, help="where train.parquet goes")
    parser.add_argument("--dataset-id", default=DATASET_ID, help="Hub id of the problems (recorded)")
    parser.add_argument("--revision", default=None, help="Hub revision of the problems (default: main)")
    parser.add_argument("--source-file", type=Path, default=None, help="a local copy instead of the Hub file")
    parser.add_argument(
        "--difficulty-source",
        default=DIFFICULTY_ID,
        help="Hub id of the solve-rate companion, or 'none' when the problems carry --solve-rate-column",
    )
    parser.add_argument("--difficulty-revision", default=None)
    parser.add_argument("--difficulty-file", type=Path, default=None, help="a local copy of the companion")
    parser.add_argument("--solve-rate-column", default=SOLVE_RATE_COLUMN, help="solve rate in percent")
    parser.add_argument("--min-solve-rate", type=float, default=99.0, help="keep problems solved >= this %%")
    parser.add_argument("--data-source", default=DATA_SOURCE, help="verl's data_source field")
    parser.add_argument("--expect-rows", type=int, default=None, help="fail unless exactly this many rows")
    return parser.parse_args(argv)


def prepare(args: argparse.Namespace) -> DatasetInfo:
    """Read, filter, convert and write; returns what the manifest records."""
    if args.source_file is not None:
        problems, revision = read_table(args.source_file), args.revision
    else:
        path, revision = _download(args.dataset_id, DATASET_FILE, args.revision)
        problems = read_table(path)

    use_companion = args.difficulty_source.lower() != "none"
    difficulty, difficulty_revision = None, None
    if use_companion and args.difficulty_file is not None:
        difficulty, difficulty_revision = read_table(args.difficulty_file), args.difficulty_revision
    elif use_companion:
        path, difficulty_revision = _download(
            args.difficulty_source, DIFFICULTY_FILE, args.difficulty_revision
        )
        difficulty = read_table(path)

    kept = select_easy_problems(problems, difficulty, args.solve_rate_column, args.min_solve_rate)
    if kept.empty:
        raise DataPrepError(
            f"no problem has {args.solve_rate_column} >= {args.min_solve_rate}: check the files"
        )
    if args.expect_rows is not None and len(kept) != args.expect_rows:
        raise DataPrepError(
            f"kept {len(kept)} rows, expected {args.expect_rows}: the source revision or the filter differs"
        )
    rows = to_verl_rows(kept, args.data_source)

    source = f"{args.difficulty_source}@{difficulty_revision or 'local'}" if use_companion else "the problems"
    info = DatasetInfo(
        id=args.dataset_id,
        split="train",
        revision=revision,
        filter=(
            f"{args.solve_rate_column} >= {args.min_solve_rate:g}% (from {source}, joined on problem text); "
            "rows without an answer dropped"
        ),
        num_rows=len(rows),
        content_sha256=content_sha256(rows),
    )
    args.output_dir.mkdir(parents=True, exist_ok=True)
    rows.to_parquet(args.output_dir / "train.parquet", index=False)
    (args.output_dir / "dataset_info.json").write_text(json.dumps(asdict(info), indent=2) + "\n")
    write_train_problem_hashes(args.output_dir, (prompt[-1]["content"] for prompt in rows["prompt"]))
    logger.info("kept %d of %d problems -> %s", len(rows), len(problems), args.output_dir / "train.parquet")
    return info


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        prepare(_parse_args(argv))
    except HubkitError as e:
        sys.exit(f"Error: {e}")


if __name__ == "__main__":
    main()
