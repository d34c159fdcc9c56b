"""The demo's problems: one-step arithmetic word problems, in three disjoint parts shipped in `data/`.

- ``arithmetic_warmup.jsonl``: what the base model is taught to answer on before the run (`base_model`);
- ``arithmetic_train.jsonl``: the GRPO run's training problems;
- ``arithmetic_heldout.jsonl``: what `hubkit eval` scores the base and every checkpoint on.

Each row is ``{"question": ..., "answer": "4 * 3 = 12\\n#### 12"}``, GSM8K's shape, so the run's
GSM8K rewards read the gold number after ``####``. No question appears in two parts (compared as
`hubkit.runs.problem_hashes` normalizes them). The files are written once by this module and shipped;
regenerating gives the same bytes:

    python -m hubkit.demo.problems
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
PARTS = {"warmup": 1500, "train": 300, "heldout": 64}
SEED = 2026

NAMES = ("Ana", "Ben", "Chloe", "Dev", "Emil", "Fatima", "Gus", "Hana", "Ivan", "Jun", "Kofi", "Lena")
ITEMS = ("apple", "book", "marble", "pencil", "shell", "sticker", "card", "coin", "cookie", "stamp")
# (question template, operator): numbers up to 10, so every answer is a small whole number.
TEMPLATES = (
    ("{name} has {a} {item}s and gets {b} more. How many {item}s does {name} have now?", "+"),
    ("{name} has {a} {item}s and gives {b} away. How many {item}s does {name} have left?", "-"),
    ("{name} buys {a} boxes with {b} {item}s in each box. How many {item}s does {name} buy?", "*"),
)


@dataclass(frozen=True)
class Problem:
    """One problem: the question, the one-line working and the result."""

    question: str
    working: str
    result: int

    @property
    def answer(self) -> str:
        """The gold answer, GSM8K style (the working, then ``#### result``)."""
        return f"{self.working}\n#### {self.result}"

    def to_row(self) -> dict[str, str]:
        """The row as the files hold it (``question``, ``answer``)."""
        return {"question": self.question, "answer": self.answer}

    @classmethod
    def from_row(cls, row: dict[str, str]) -> Problem:
        """A problem from its row (the inverse of `to_row`)."""
        working, _, result = row["answer"].partition("\n#### ")
        return cls(row["question"], working, int(result))


def _draw(rng: random.Random) -> Problem:
    template, op = rng.choice(TEMPLATES)
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    if op == "-":
        a, b = max(a, b) + 1, min(a, b)  # something is left
    result = {"+": a + b, "-": a - b, "*": a * b}[op]
    question = template.format(name=rng.choice(NAMES), item=rng.choice(ITEMS), a=a, b=b)
    return Problem(question, f"{a} {op} {b} = {result}", result)


def generate(seed: int = SEED) -> dict[str, list[Problem]]:
    """Draw distinct problems and deal them into the parts, in `PARTS` order and sizes."""
    rng = random.Random(seed)
    drawn: dict[str, Problem] = {}
    while len(drawn) < sum(PARTS.values()):
        problem = _draw(rng)
        # The template's wording is fixed, so distinct texts are distinct after normalization too.
        drawn.setdefault(problem.question, problem)
    problems = iter(drawn.values())
    return {part: [next(problems) for _ in range(size)] for part, size in PARTS.items()}


def load(part: str) -> list[Problem]:
    """One shipped part (``warmup``, ``train`` or ``heldout``)."""
    lines = path(part).read_text(encoding="utf-8").splitlines()
    return [Problem.from_row(json.loads(line)) for line in lines]


def path(part: str) -> Path:
    """The shipped file of one part."""
    return DATA_DIR / f"arithmetic_{part}.jsonl"


def write(parts: dict[str, list[Problem]]) -> None:
    """Write each part to its shipped file."""
    DATA_DIR.mkdir(exist_ok=True)
    for part, problems in parts.items():
        lines = (json.dumps(p.to_row(), ensure_ascii=False) + "\n" for p in problems)
        path(part).write_text("".join(lines), encoding="utf-8")


if __name__ == "__main__":
    write(generate())
