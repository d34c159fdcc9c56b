"""A GGUF file checked against the merged model it was written from, as llama.cpp's users meet it: the
same token ids for the prompts the merged model's chat template renders, and an end token the merged model
stops at (a GGUF whose EOS differs never stops in Ollama). The file's tokenizer is read through transformers'
GGUF loader (its metadata only; no tensor is dequantized). When llama-cpp-python is installed, the file is
then run in llama.cpp on the merged model's greedy answers (`hubkit.verify.gguf_llama`): its top-1 agreement
must reach its type's floor (`agreement_floor`), and its mean KL divergence is recorded beside it.

    reference = gguf_reference(merged_dir, questions, system_prompt)   # None without llama-cpp-python
    check = check_gguf(path, merged_dir, questions, system_prompt, "me/run-GGUF/run-Q8_0.gguf", reference)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hubkit.formats.gguf_types import FILE_NAME_RE
from hubkit.verify.gguf_llama import (
    Reference,
    agreement_floor,
    llama_cpp_installed,
    measure_file,
    merged_reference,
)
from hubkit.verify.merged import MAX_NEW_TOKENS, MAX_QUESTIONS

CHECKED_TOKENS_ONLY = "tokens and EOS"  # how a check without llama.cpp is recorded
MEASURED_AGAINST = "the merged model (transformers)"


@dataclass(frozen=True)
class GGUFCheck:
    """The check of one GGUF file: `artifact` names it; `prompts` compared; `eos` the file's end token; with
    llama.cpp, `agreement` (top-1), `mean_kl` and `floor` over `tokens` answer positions (else None)."""

    artifact: str
    prompts: int
    eos: int | None
    failures: tuple[str, ...] = ()
    gguf_type: str | None = None
    size: int | None = None
    tokens: int | None = None
    agreement: float | None = None
    mean_kl: float | None = None
    floor: float | None = None

    @property
    def passed(self) -> bool:
        return not self.failures

    def refusal(self) -> str:
        return f"{self.artifact} is not the merged model's: {'; '.join(self.failures)}"

    def to_dict(self) -> dict[str, Any]:
        """The check as the GGUF record's ``verified`` entry for the file's type."""
        data: dict[str, Any] = {"prompts": self.prompts, "eos": self.eos}
        if self.agreement is None:
            return {**data, "checked": CHECKED_TOKENS_ONLY}
        return {
            **data,
            "checked": "llama.cpp",
            "against": MEASURED_AGAINST,
            "tokens": self.tokens,
            "top1_agreement": round(self.agreement, 4),
            "mean_kl": float(f"{self.mean_kl:.3g}"),
            "floor": round(self.floor or 0.0, 4),
        }


def gguf_reference(merged_dir: Path, questions: Sequence[str], system_prompt: str | None) -> Reference | None:
    """The merged model's greedy answers to the check's prompts, to run each GGUF file on; None when
    llama-cpp-python is not installed (the files are then checked for tokens and EOS only).

    Raises:
        EvalError: the merged model's chat template cannot render the prompts.
    """
    if not llama_cpp_installed():
        return None
    from hubkit.evaluate.chat import load_tokenizer, render_prompts, stop_token_ids

    prompts = render_prompts(merged_dir, questions[:MAX_QUESTIONS], system_prompt)
    stops = stop_token_ids(merged_dir, load_tokenizer(merged_dir))
    return merged_reference(merged_dir, prompts, stops, MAX_NEW_TOKENS)


def check_gguf(
    path: Path,
    merged_dir: Path,
    questions: Sequence[str],
    system_prompt: str | None,
    artifact: str,
    reference: Reference | None = None,
) -> GGUFCheck:
    """Compare the GGUF file at `path` with the merged folder it was written from (module docstring); in
    llama.cpp too when `reference` is given (`gguf_reference`) and the tokens and EOS agree.

    Raises:
        EvalError: the merged model's chat template cannot render the prompts.
        VerificationError: llama.cpp could not run the file within its bounds.
    """
    from transformers import AutoTokenizer

    from hubkit.evaluate.chat import load_tokenizer, render_prompts, stop_token_ids

    questions = questions[:MAX_QUESTIONS]
    prompts = render_prompts(merged_dir, questions, system_prompt)
    merged = load_tokenizer(merged_dir)
    stops = stop_token_ids(merged_dir, merged)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    texts = [merged.decode(list(ids), skip_special_tokens=False) for ids in prompts]
    ids = [tokenizer(text, add_special_tokens=False).input_ids for text in texts]
    failures = []
    differing = sum(list(a) != list(b) for a, b in zip(prompts, ids, strict=True))
    if differing:
        failures.append(f"its tokenizer gives other prompt token ids ({differing} of {len(prompts)})")
    eos = tokenizer.eos_token_id
    if eos not in stops:
        failures.append(f"end token {eos} where the merged model stops at {sorted(stops)}")
    named = FILE_NAME_RE.match(path.name)
    gguf_type = named[1] if named else None
    check = GGUFCheck(artifact, len(prompts), eos, tuple(failures), gguf_type, path.stat().st_size)
    if failures or reference is None or gguf_type is None or not reference.sequences:
        return check
    measure = measure_file(path, reference, artifact)
    floor = agreement_floor(gguf_type, measure.tokens)
    if measure.agreement < floor:
        failures.append(
            f"top-1 agreement {measure.agreement:.1%} in llama.cpp on {measure.tokens} tokens, below "
            f"{gguf_type}'s floor {floor:.1%} (mean KL {measure.mean_kl:.3g})"
        )
    return replace(
        check,
        failures=tuple(failures),
        tokens=measure.tokens,
        agreement=measure.agreement,
        mean_kl=measure.mean_kl,
        floor=floor,
    )
