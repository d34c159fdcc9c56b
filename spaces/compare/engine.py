"""One base model in memory, the runs' adapters loaded on demand, and batched generation across them.

Every answer the app shows comes from `Engine.stream`: one `generate` call in which each row of the
batch uses its own adapter (PEFT's mixed-adapter batch, `adapter_names=[...]`, with `"__base__"` for
the base model; DoRA adapters, which PEFT refuses there, answer one row after the other). Side by side is
a batch of two rows (base, checkpoint); the trajectory is one row per checkpoint of a run. A row names its
adapter as an `Adapter` (run, checkpoint), checked by `checkpoints.Checkpoints`; each loads from its run's
adapter repo. Adapters are loaded on first use into a bounded cache; the least recently used one is
unloaded when it is full, but never the last one (PEFT then keeps a stale active adapter and
`generate` fails): a new one is loaded first.

What the hardware allows (`hardware.py`) sets the dtype, how many adapters stay loaded and the default
answer length.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    StoppingCriteriaList,
)

from checkpoints import Adapter
from config import FINAL, AppConfig, checkpoint_step
from hardware import Limits, resolve_dtype
from render import RequestError, render_bounded
from streaming import Cancelled, OneRow, RowStreamer

logger = logging.getLogger(__name__)

BASE = "__base__"  # PEFT's name for "no adapter" in a mixed batch
_STREAM_INTERVAL_S = 0.1  # how often partial answers are handed on while generating


@dataclass(frozen=True)
class Settings:
    """Generation settings of one request (temperature 0 is greedy decoding)."""

    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0


@dataclass(frozen=True)
class Answer:
    """One row's answer.

    Args:
        text: the decoded answer (special tokens removed).
        token_ids: the generated ids, without the stop token.
        seconds: from the start of the call until this row stopped.
        finished: True when the row ended with a stop token, False when cut at max_new_tokens (or still
            being generated, in a partial answer).
    """

    text: str
    token_ids: tuple[int, ...]
    seconds: float
    finished: bool

    @property
    def tokens(self) -> int:
        return len(self.token_ids)


def _short(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    text = lines[0] if lines else ""
    return f"{type(error).__name__}: {text[:200]}" if text else type(error).__name__


def _contiguous_input(module: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    return (args[0].contiguous(), *args[1:])


class Engine:
    """The base model, the adapter cache and generation.

    Args:
        config: the Space's configuration.
        device: where the model runs (default: CUDA when available, else CPU). On ZeroGPU this is "cuda"
            from start-up (`import spaces` first): the weights are placed there outside GPU calls.

    Attributes:
        dtype: the base model's dtype (`resolve_dtype`).
        capacity, default_max_new_tokens: the device's `Limits`.
    """

    def __init__(self, config: AppConfig, device: str | None = None) -> None:
        self.config = config
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        on_gpu = self.device.startswith("cuda")
        limits = Limits.for_device(config, self.device)
        self.capacity = limits.capacity
        self.default_max_new_tokens = limits.default_max_new_tokens
        tokenizer_repo, tokenizer_revision = (
            (config.runs[0].adapter_repo, config.runs[0].adapter_revision)
            if config.chat_template == "adapter"
            else (config.base_model, config.base_revision)
        )
        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer_repo, revision=tokenizer_revision)
        if config.chat_template != "none" and not self.tokenizer.chat_template:
            raise ValueError(
                f"the tokenizer of {tokenizer_repo} has no chat template: set chat_template to 'none' "
                "or publish the run's tokenizer"
            )
        base_config = AutoConfig.from_pretrained(config.base_model, revision=config.base_revision)
        self.dtype = resolve_dtype(config.dtype, self.device, base_config.dtype)
        base = AutoModelForCausalLM.from_pretrained(
            config.base_model, revision=config.base_revision, config=base_config, dtype=self.dtype
        )
        self.base = base.to(self.device).eval()
        if not on_gpu:
            # On a CPU, torch's bfloat16 linear given a non-contiguous input (generate's slice of the last
            # position) can make a float32 copy of the weight: 1.5 GB more for Qwen3-4B's output layer under
            # PEFT's generate, measured by bench/space.py --memory. A contiguous input avoids it.
            self.base.get_output_embeddings().register_forward_pre_hook(_contiguous_input)
        self.model = None  # the PeftModel, created with the first adapter
        eos = self.base.generation_config.eos_token_id
        eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
        if self.tokenizer.eos_token_id is not None:
            eos_ids.append(self.tokenizer.eos_token_id)
        if not eos_ids:
            raise ValueError(f"{config.base_model} names no eos token in its generation config or tokenizer")
        self.stop_ids = tuple(dict.fromkeys(eos_ids))
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else self.stop_ids[0]
        self._loaded: OrderedDict[Adapter, str] = OrderedDict()  # adapter -> PEFT's name for it, LRU first
        self._lock = threading.Lock()  # adapter loads/unloads and generation: the model is shared state
        self._run_index = {run.name: index for index, run in enumerate(config.runs)}

    # --- Adapters ---------------------------------------------------------------------------------

    @property
    def loaded(self) -> tuple[Adapter, ...]:
        """The adapters loaded now, least recently used first."""
        with self._lock:
            return tuple(self._loaded)

    def ensure_loaded(self, values: Sequence[Adapter]) -> tuple[str, ...]:
        """Load the adapters of `values` that are not loaded yet, unloading least recently used others.

        Args:
            values: validated adapters (`Checkpoints.validate`); at most `capacity` of them.

        Returns:
            Their PEFT adapter names, in order.

        Raises:
            RequestError: an adapter could not be loaded (the others stay usable).
        """
        with self._lock:
            return self._ensure_loaded(values)

    def _ensure_loaded(self, values: Sequence[Adapter]) -> tuple[str, ...]:
        wanted = list(dict.fromkeys(values))
        if len(wanted) > self.capacity:
            raise ValueError(f"{len(wanted)} adapters requested at once, the cache holds {self.capacity}")
        for value in wanted:
            if value in self._loaded:
                self._loaded.move_to_end(value)
                continue
            # Unload before loading to bound memory, but never the last adapter or one this request needs.
            while len(self._loaded) >= self.capacity and len(self._loaded) > 1:
                if not self._unload_one(keep=wanted):
                    break
            self._load(value)
        while len(self._loaded) > self.capacity and self._unload_one(keep=wanted):
            pass
        return tuple(self._loaded[value] for value in values)

    def _unload_one(self, keep: Sequence[Adapter]) -> bool:
        for value in self._loaded:
            if value not in keep:
                name = self._loaded.pop(value)
                if name in self.model.active_adapters:  # hand "active" on first (PEFT warns otherwise)
                    self.model.set_adapter(next(iter(self._loaded.values())))
                self.model.delete_adapter(name)
                logger.info("unloaded %s %s", value.run, value.label)
                return True
        return False

    def _adapter_name(self, value: Adapter) -> str:
        # PEFT adapter names become module keys: no "/" or "." (a run's name may hold both).
        step = checkpoint_step(value.checkpoint)
        return f"r{self._run_index[value.run]}_" + ("final" if step is None else f"step_{step}")

    def _load(self, value: Adapter) -> None:
        from peft import PeftModel

        run = self.config.runs[self._run_index[value.run]]
        name = self._adapter_name(value)
        kwargs: dict[str, object] = {
            "adapter_name": name,
            "revision": run.adapter_revision,
            "is_trainable": False,
            # Without it PEFT picks CUDA whenever it is visible, which breaks ZeroGPU (peft issue 3793).
            "torch_device": self.device,
        }
        if value.checkpoint != FINAL:
            kwargs["subfolder"] = value.checkpoint
        started = time.perf_counter()
        try:
            if self.model is None:
                self.model = PeftModel.from_pretrained(self.base, run.adapter_repo, **kwargs)
            else:
                self.model.load_adapter(run.adapter_repo, **kwargs)
        except Exception as e:  # a broken or missing adapter must not take the app down
            if self.model is not None and name in self.model.peft_config and len(self.model.peft_config) > 1:
                self.model.delete_adapter(name)
            logger.warning("could not load %s %s: %s", value.run, value.label, _short(e))
            raise RequestError(f"The {value.label} could not be loaded ({_short(e)}).") from e
        self.model.eval()
        self._loaded[value] = name
        logger.info("loaded %s %s in %.2f s", value.run, value.label, time.perf_counter() - started)

    # --- Prompts and generation -------------------------------------------------------------------

    def encode(self, prompt: str) -> list[int]:
        """The prompt's token ids, with the system prompt and chat template.

        Raises:
            RequestError: empty, or longer than the limits in characters or tokens.
        """
        if not prompt or not prompt.strip():
            raise RequestError("The prompt is empty: type a problem first.")
        if len(prompt) > self.config.max_prompt_chars:
            raise RequestError(
                f"The prompt has {len(prompt)} characters; this Space accepts up to {self.config.max_prompt_chars}."
            )
        if self.config.chat_template == "none":
            text = prompt
        else:
            messages = [{"role": "user", "content": prompt}]
            if self.config.system_prompt:
                messages.insert(0, {"role": "system", "content": self.config.system_prompt})
            text = render_bounded(self.tokenizer, messages)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) > self.config.max_prompt_tokens:
            raise RequestError(
                f"The prompt is {len(ids)} tokens long; this Space accepts up to {self.config.max_prompt_tokens}."
            )
        return ids

    def check_settings(self, settings: Settings) -> Settings:
        """Refuse settings outside the Space's limits.

        Raises:
            RequestError: max_new_tokens, temperature or top_p out of range.
        """
        limit = self.config.max_new_tokens_limit
        if not 1 <= settings.max_new_tokens <= limit:
            raise RequestError(
                f"max new tokens must be between 1 and {limit}, got {settings.max_new_tokens}."
            )
        if not 0.0 <= settings.temperature <= 2.0:
            raise RequestError(f"temperature must be between 0 and 2, got {settings.temperature}.")
        if not 0.0 < settings.top_p <= 1.0:
            raise RequestError(f"top-p must be above 0 and at most 1, got {settings.top_p}.")
        return settings

    def stream(
        self, prompt_ids: Sequence[int], rows: Sequence[Adapter | None], settings: Settings
    ) -> Iterator[list[Answer]]:
        """Answer one prompt with several adapters in one batched `generate`, yielding partial answers.

        Args:
            prompt_ids: from `encode`.
            rows: one adapter per row (None: the base model); at most `capacity` adapters.
            settings: checked generation settings.

        Yields:
            One `Answer` per row, every `_STREAM_INTERVAL_S` while generating; the last yield holds the
            final answers (token ids from `generate`'s output).

        Raises:
            RequestError: an adapter could not be loaded.
        """
        if all(value is None for value in rows):
            raise ValueError("stream needs at least one adapter row")
        streamer = RowStreamer(len(rows))
        cancel = threading.Event()
        outcome: dict[str, object] = {}
        thread = threading.Thread(
            target=self._generate,
            args=(list(prompt_ids), list(rows), settings, streamer, cancel, outcome),
            daemon=True,
        )
        started = time.perf_counter()
        tokens: list[list[int]] = [[] for _ in rows]
        stopped_at: list[float | None] = [None] * len(rows)
        thread.start()
        try:
            last_yield = 0.0
            while (step := streamer.queue.get()) is not None:
                now = time.perf_counter() - started
                for row, new in enumerate(step):
                    for token in new:
                        if stopped_at[row] is None and token in self.stop_ids:
                            stopped_at[row] = now
                        elif stopped_at[row] is None:
                            tokens[row].append(token)
                if now - last_yield >= _STREAM_INTERVAL_S:
                    last_yield = now
                    yield [
                        Answer(
                            self._decode(ids), tuple(ids), stopped_at[row] or now, stopped_at[row] is not None
                        )
                        for row, ids in enumerate(tokens)
                    ]
        finally:
            cancel.set()  # the consumer went away (client disconnected): stop generating
            thread.join()
        if "error" in outcome:
            raise outcome["error"]  # type: ignore[misc]
        total = time.perf_counter() - started
        output = outcome["output"]  # a batch's tensor, or each row's ids when the rows ran one by one
        sequences = output.tolist() if isinstance(output, torch.Tensor) else output
        answers = []
        for row, sequence in enumerate(s[len(prompt_ids) :] for s in sequences):  # type: ignore[union-attr]
            ids, finished = self._until_stop(sequence)
            answers.append(Answer(self._decode(ids), tuple(ids), stopped_at[row] or total, finished))
        yield answers

    def generate(
        self, prompt_ids: Sequence[int], rows: Sequence[Adapter | None], settings: Settings
    ) -> list[Answer]:
        """`stream` without the partial answers: the final answers only."""
        answers: list[Answer] = []
        for answers in self.stream(prompt_ids, rows, settings):  # noqa: B007  (the last yield is the result)
            pass
        return answers

    def _until_stop(self, sequence: list[int]) -> tuple[list[int], bool]:
        for index, token in enumerate(sequence):
            if token in self.stop_ids:
                return sequence[:index], True
        return sequence, False

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def _uses_dora(self) -> bool:
        return any(getattr(c, "use_dora", False) for c in getattr(self.model, "peft_config", {}).values())

    def _generate_alone(
        self,
        input_ids: torch.Tensor,
        name: str | None,
        row: int,
        streamer: RowStreamer,
        options: dict[str, object],
    ) -> list[int]:
        """One row's answer by one model (None: the base), streamed into `row` of `streamer`."""
        if name is None:
            context: contextlib.AbstractContextManager[object] = self.model.disable_adapter()
        else:
            self.model.set_adapter(name)
            context = contextlib.nullcontext()
        with context:
            output = self.model.generate(
                input_ids=input_ids,
                attention_mask=torch.ones_like(input_ids),
                streamer=OneRow(streamer, row),
                **options,
            )
        return output[0].tolist()

    def _generate(
        self,
        prompt_ids: list[int],
        rows: list[Adapter | None],
        settings: Settings,
        streamer: RowStreamer,
        cancel: threading.Event,
        outcome: dict[str, object],
    ) -> None:
        try:
            with self._lock:
                values = [value for value in rows if value is not None]
                names = dict(zip(values, self._ensure_loaded(values), strict=True))
                input_ids = torch.tensor([prompt_ids] * len(rows), dtype=torch.long, device=self.device)
                sampling: dict[str, object] = (
                    {
                        "do_sample": True,
                        "temperature": settings.temperature,
                        "top_p": settings.top_p,
                        "top_k": None,
                    }
                    if settings.temperature > 0
                    else {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
                )
                options: dict[str, object] = {
                    "max_new_tokens": settings.max_new_tokens,
                    "eos_token_id": list(self.stop_ids),
                    "pad_token_id": self.pad_id,
                    "stopping_criteria": StoppingCriteriaList([Cancelled(cancel)]),
                    **sampling,
                }
                with torch.inference_mode():
                    if not self._uses_dora():
                        outcome["output"] = self.model.generate(
                            input_ids=input_ids,
                            attention_mask=torch.ones_like(input_ids),
                            adapter_names=[BASE if v is None else names[v] for v in rows],
                            streamer=streamer,
                            **options,
                        )
                    else:  # PEFT refuses DoRA in a mixed batch: one row after the other
                        outcome["output"] = [
                            self._generate_alone(
                                input_ids[:1], None if v is None else names[v], row, streamer, options
                            )
                            for row, v in enumerate(rows)
                        ]
        except BaseException as e:  # handed to the consumer, which raises it in the request's thread
            outcome["error"] = e
        finally:
            streamer.end()
