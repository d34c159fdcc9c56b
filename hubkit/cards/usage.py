"""The usage snippets of the cards: each one a complete Python program that works exactly as written
(tests extract them from a published card and run them against a Hub)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from hubkit.cards.inputs import CardInputs
from hubkit.cards.tables import example_step
from hubkit.cards.vocabulary import resized_vocabulary
from hubkit.evaluate.backend_vllm import VLLM_LORA_RANKS, vllm_misapplies
from hubkit.formats.peft import read_saved_adapter_config
from hubkit.release.layout import checkpoint_dir, revision_name
from hubkit.runs.answer_length import answer_length
from hubkit.runs.manifest import Manifest

DEFAULT_PROBLEM = "What is the sum of the first 20 positive integers?"


@dataclass(frozen=True)
class Snippets:
    """The usage code blocks (Python source, without fences)."""

    checkpoint: str  # one checkpoint from its subfolder, with a chat-template generation
    revision: str  # the same checkpoint from its branch
    root: str  # the newest adapter, at the repo root
    merged: str | None  # the merged model with transformers (when the push makes one)
    vllm: str | None  # vLLM with a LoRARequest on the checkpoint's branch, downloaded (None: see `vllm_note`)
    tgi: str  # Text Generation Inference serving the checkpoint's branch
    vllm_note: str | None = (
        None  # why vLLM's LoRA would not apply this adapter as PEFT does (then no snippet)
    )


def py(value: str) -> str:
    """A Python string literal in double quotes (a JSON string is one, with non-ASCII kept as is)."""
    return json.dumps(value, ensure_ascii=False)


def vllm_max_lora_rank(r: int | None) -> int:
    """The smallest `max_lora_rank` vLLM accepts that holds rank `r` (16 when the rank is unknown)."""
    if r is None:
        return 16
    return next((rank for rank in VLLM_LORA_RANKS if rank >= r), VLLM_LORA_RANKS[-1])


def _problem(inputs: CardInputs) -> str:
    """A problem to ask: one the eval used (so the prompt matches the run's), else a generic one."""
    evaluation = inputs.eval
    if evaluation is not None and evaluation.samples:
        step = example_step(inputs)
        samples = evaluation.samples_of(step) or evaluation.samples
        return samples[0].problem
    return DEFAULT_PROBLEM


def _messages(manifest: Manifest, problem: str) -> str:
    system = (
        f'{{"role": "system", "content": {py(manifest.system_prompt)}}}, ' if manifest.system_prompt else ""
    )
    return f'messages = [{system}{{"role": "user", "content": {py(problem)}}}]'


def _load_base(manifest: Manifest, rows: int | None = None) -> str:
    revision = f", revision={py(manifest.base_model_revision)}" if manifest.base_model_revision else ""
    load = f"base = AutoModelForCausalLM.from_pretrained({py(manifest.base_model)}{revision})"
    if rows is None:
        return load
    return f"{load}\nbase.resize_token_embeddings({rows})  # the rows the adapter's tokens were added in"


def _vllm_note(inputs: CardInputs, resized: bool) -> str | None:
    """Why the vLLM LoRA snippet is left out (`vllm_misapplies`, the rule of `hubkit eval --backend vllm`, or
    a resized vocabulary, which vLLM's base does not have), or None."""
    latest = inputs.run.latest
    config = read_saved_adapter_config(latest.adapter_dir) if latest and latest.adapter_dir else None
    what = vllm_misapplies(config) if config else None
    if what is None and resized:
        what = "a vocabulary resized for added tokens"
    if what is None:
        return None
    served = (
        f"serve the merged model ({inputs.merged_repo_id}) instead"
        if inputs.merged_repo_id
        else ("serve a merged model instead (`hubkit merge`)")
    )
    return f"vLLM's LoRA applies plain LoRA on the base as it is, not {what}: {served}."


def _generate(manifest: Manifest, problem: str, tokens: int) -> str:
    return "\n".join(
        [
            _messages(manifest, problem),
            "inputs = tokenizer.apply_chat_template(",
            '    messages, add_generation_prompt=True, return_dict=True, return_tensors="pt"',
            ")",
            f"outputs = model.generate(**inputs, max_new_tokens={tokens})",
            'print(tokenizer.decode(outputs[0][inputs["input_ids"].shape[1] :], skip_special_tokens=True))',
        ]
    )


def snippets(inputs: CardInputs) -> Snippets:
    """The adapter card's usage code (the merged card uses `Snippets.merged`)."""
    manifest = inputs.run.manifest
    repo, step = inputs.repo_id, inputs.root_step
    tokenizer_repo = repo if inputs.has_tokenizer else manifest.base_model
    problem = _problem(inputs)
    tokens = answer_length(inputs.run, None).tokens  # what the run trained with, as `hubkit eval` reads it
    resized = resized_vocabulary(inputs.run)
    rows = resized.rows if resized else None
    checkpoint = "\n".join(
        [
            "from peft import PeftModel",
            "from transformers import AutoModelForCausalLM, AutoTokenizer",
            "",
            _load_base(manifest, rows),
            f"tokenizer = AutoTokenizer.from_pretrained({py(tokenizer_repo)})",
            f"model = PeftModel.from_pretrained(base, {py(repo)}, subfolder={py(checkpoint_dir(step))})",
            "",
            _generate(manifest, problem, tokens),
        ]
    )
    branch = revision_name(step)
    by_revision = f"model = PeftModel.from_pretrained(base, {py(repo)}, revision={py(branch)})  # the same adapter, as a branch"
    root = "\n".join(
        [
            "from peft import PeftModel",
            "from transformers import AutoModelForCausalLM",
            "",
            _load_base(manifest, rows),
            f"model = PeftModel.from_pretrained(base, {py(repo)})  # step {step}, the adapter at the repo root",
        ]
    )
    merged = None
    if inputs.merged_repo_id is not None:
        merged = "\n".join(
            [
                "from transformers import AutoModelForCausalLM, AutoTokenizer",
                "",
                f"model = AutoModelForCausalLM.from_pretrained({py(inputs.merged_repo_id)})",
                f"tokenizer = AutoTokenizer.from_pretrained({py(inputs.merged_repo_id)})",
                "",
                _generate(manifest, problem, tokens),
            ]
        )
    revision = f", revision={py(manifest.base_model_revision)}" if manifest.base_model_revision else ""
    rank = vllm_max_lora_rank(manifest.lora.r if manifest.lora else None)
    vllm_note = _vllm_note(inputs, resized is not None)
    vllm = (
        None
        if vllm_note
        else "\n".join(
            [
                "from huggingface_hub import snapshot_download",
                "from vllm import LLM, SamplingParams",
                "from vllm.lora.request import LoRARequest",
                "",
                "# vLLM loads an adapter from a local folder or a repo's root: download the checkpoint's branch.",
                f"local_dir = snapshot_download({py(repo)}, revision={py(branch)})",
                f'adapter = LoRARequest("global_step_{step}", 1, local_dir)',
                f"llm = LLM(model={py(manifest.base_model)}{revision}, enable_lora=True, max_lora_rank={rank})",
                _messages(manifest, problem),
                f"params = SamplingParams(temperature=0.0, max_tokens={tokens})",
                "outputs = llm.chat(messages, params, lora_request=adapter)",
                "print(outputs[0].outputs[0].text)",
            ]
        )
    )
    tgi = "\n".join(
        [
            f"text-generation-launcher --model-id {manifest.base_model} \\",
            f"    --lora-adapters {repo}@{branch}",
        ]
    )
    return Snippets(
        checkpoint=checkpoint,
        revision=by_revision,
        root=root,
        merged=merged,
        vllm=vllm,
        tgi=tgi,
        vllm_note=vllm_note,
    )


def gguf_python(inputs: CardInputs, gguf_repo_id: str, file_name: str) -> str:
    """llama-cpp-python chatting with one GGUF file of the release (named exactly: a pattern of its type
    would also match the base model's file of that type under ``base/``), as the run asked."""
    tokens = answer_length(inputs.run, None).tokens
    return "\n".join(
        (
            "from llama_cpp import Llama",
            "",
            f"llm = Llama.from_pretrained(repo_id={py(gguf_repo_id)}, filename={py(file_name)})",
            _messages(inputs.run.manifest, _problem(inputs)),
            f"answer = llm.create_chat_completion(messages=messages, max_tokens={tokens})",
            'print(answer["choices"][0]["message"]["content"])',
        )
    )


def gguf_lora_python(inputs: CardInputs, gguf_repo_id: str, base_file: str, lora_file: str) -> str:
    """llama-cpp-python answering with one checkpoint: the base model's GGUF file with that step's GGUF LoRA
    applied over it (what ``llama-cli -m BASE --lora LORA`` runs)."""
    tokens = answer_length(inputs.run, None).tokens
    return "\n".join(
        (
            "from huggingface_hub import hf_hub_download",
            "from llama_cpp import Llama",
            "",
            f"base = hf_hub_download({py(gguf_repo_id)}, {py(base_file)})",
            f"lora = hf_hub_download({py(gguf_repo_id)}, {py(lora_file)})",
            "llm = Llama(model_path=base, lora_path=lora, n_ctx=4096, verbose=False)",
            _messages(inputs.run.manifest, _problem(inputs)),
            f"answer = llm.create_chat_completion(messages=messages, max_tokens={tokens})",
            'print(answer["choices"][0]["message"]["content"])',
        )
    )
