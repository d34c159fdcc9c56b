"""The text side shared by both backends: chat prompts as token ids, generated ids back into answers.

A prompt is the run's system prompt (if it has one) and the problem as the user turn, rendered by the
run's own chat template with the generation prompt appended. The backends only map prompt ids to
generated ids; `completion_from_ids` turns those into the answer text, its token count (up to and
including the stop token, as the length penalty counts) and whether the token limit cut it.
"""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hubkit.errors import EvalError

# A template renders a few prompts a millisecond; these bound one that loops (seconds) or grows (tokens).
RENDER_SECONDS = 10.0
RENDER_SECONDS_PER_PROMPT = 0.02
START_SECONDS = 120.0  # the worker's imports and the tokenizer's loading, before the template runs
MAX_PROMPT_TOKENS = 65_536


@dataclass(frozen=True)
class Completion:
    """One generated answer."""

    text: str  # decoded without special tokens
    tokens: int  # generated tokens up to and including the first stop token (all of them if none came)
    truncated: bool  # no stop token came within the token limit


def load_tokenizer(tokenizer_dir: Path) -> Any:
    """The run's tokenizer, padding on the left (generation continues each row at its right end).

    Raises:
        EvalError: the tokenizer has no chat template.
    """
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, padding_side="left")
    if not tokenizer.chat_template:
        raise EvalError(
            f"the tokenizer in {tokenizer_dir.name} has no chat template: the run must save its tokenizer "
            "with the template it trained with"
        )
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def messages(question: str, system_prompt: str | None) -> list[dict[str, str]]:
    """The chat turns of one problem: the system prompt (when the run has one) and the question."""
    turns = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return [*turns, {"role": "user", "content": question}]


def render_prompts(
    tokenizer_dir: Path, questions: Sequence[str], system_prompt: str | None
) -> tuple[tuple[int, ...], ...]:
    """Every problem's prompt as token ids, through the run's chat template, rendered in a bounded process.

    The template is the run's (or the release's) code: `prompt_worker` runs it within 1 GB of memory, for at
    most `RENDER_SECONDS` plus `RENDER_SECONDS_PER_PROMPT` a prompt once it has loaded the tokenizer (within
    `START_SECONDS`), each prompt at most `MAX_PROMPT_TOKENS`.

    Raises:
        EvalError: the template failed, ran out of time or memory, or rendered a prompt too long.
    """
    worker = Path(__file__).with_name("prompt_worker.py")
    conversations = [messages(question, system_prompt) for question in questions]
    timeout = RENDER_SECONDS + RENDER_SECONDS_PER_PROMPT * len(questions)
    with tempfile.NamedTemporaryFile("w", suffix=".json") as request:
        json.dump({"conversations": conversations}, request)
        request.flush()
        command = [
            sys.executable,
            "-I",
            str(worker),
            str(tokenizer_dir),
            str(MAX_PROMPT_TOKENS),
            request.name,
        ]
        # Unbuffered: the "ready" line is read alone, the rest by communicate().
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0) as process:
            try:
                _await_ready(process)
                out, err = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired as e:
                process.kill()
                raise EvalError(
                    f"the chat template in {tokenizer_dir.name} did not render {len(questions)} prompts in "
                    f"{timeout:.0f} s: it loops or builds too much; fix the template"
                ) from e
    if process.returncode != 0:
        reason = (err.decode(errors="replace").strip().splitlines() or ["it failed"])[-1][:300]
        raise EvalError(f"the chat template in {tokenizer_dir.name} cannot render the prompts: {reason}")
    return tuple(tuple(ids) for ids in json.loads(out)["ids"])


def _await_ready(process: subprocess.Popen) -> None:
    """Wait for the worker's "ready" line (its imports and the tokenizer loaded), so that the render's time
    limit counts the template alone, on a slow machine as on a fast one."""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(START_SECONDS):
            raise subprocess.TimeoutExpired(process.args, START_SECONDS)
    process.stdout.readline()  # "ready", or nothing when the worker ended: communicate() reports it


def stop_token_ids(model_dir: Path, tokenizer: Any) -> tuple[int, ...]:
    """The ids that end an answer: the base model's ``generation_config.json`` EOS ids and the tokenizer's.

    Qwen models stop at either ``<|im_end|>`` or ``<|endoftext|>``; only the generation config names both.
    """
    ids: list[int] = []
    path = model_dir / "generation_config.json"
    if path.is_file():
        eos = json.loads(path.read_text()).get("eos_token_id")
        ids.extend(eos if isinstance(eos, list) else [eos] if isinstance(eos, int) else [])
    if tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    if not ids:
        raise EvalError(
            f"neither {model_dir.name}'s generation_config.json nor the tokenizer names an EOS token"
        )
    return tuple(dict.fromkeys(ids))


def completion_from_ids(
    ids: Sequence[int], tokenizer: Any, *, stop_ids: Sequence[int], max_new_tokens: int
) -> Completion:
    """Cut generated ids at the first stop token (padding after it is ignored) and decode them
    (`max_new_tokens`: the limit generation ran with)."""
    stops = set(stop_ids)
    end = next((i for i, token in enumerate(ids) if token in stops), None)
    if end is None:
        kept = list(ids[:max_new_tokens])
        return Completion(
            tokenizer.decode(kept, skip_special_tokens=True), len(kept), len(kept) >= max_new_tokens
        )
    return Completion(tokenizer.decode(list(ids[:end]), skip_special_tokens=True), end + 1, False)
