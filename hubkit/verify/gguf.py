"""A GGUF file checked against the merged model it was written from, as llama.cpp's users meet it: the
same token ids for the prompts the merged model's chat template renders, and an end token the merged model
stops at (a GGUF whose EOS differs never stops in Ollama). The file's tokenizer is read through transformers'
GGUF loader (its metadata only; no tensor is dequantized)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GGUFCheck:
    """The check of one GGUF file: `artifact` names it; `prompts` compared; `eos` the file's end token."""

    artifact: str
    prompts: int
    eos: int | None
    failures: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.failures

    def refusal(self) -> str:
        return f"{self.artifact} is not the merged model's: {'; '.join(self.failures)}"


def check_gguf(
    path: Path, merged_dir: Path, questions: Sequence[str], system_prompt: str | None, artifact: str
) -> GGUFCheck:
    """Compare the GGUF file at `path` with the merged folder it was written from (module docstring).

    Raises:
        EvalError: the merged model's chat template cannot render the prompts.
    """
    from transformers import AutoTokenizer

    from hubkit.evaluate.chat import load_tokenizer, render_prompts, stop_token_ids

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
    return GGUFCheck(artifact, len(prompts), eos, tuple(failures))
