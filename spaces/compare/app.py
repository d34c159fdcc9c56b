"""Compare a training run's checkpoints with the base model: side by side, and across training.

Pick a run (a sweep's Space compares every run of the sweep) and one of its checkpoints, type a problem,
and the base model and the checkpoint answer it in one batched call; give a reference answer to mark each
side correct or not. The "across training" tab answers one prompt with every checkpoint of the run, to
watch the answer change (and its length shrink) step by step.

Configured by `space_config.json` beside this file (written by `hubkit push`); runs on a Hugging Face
Space (ZeroGPU included) or locally against any Hub (`HF_ENDPOINT`):

    python app.py [--config space_config.json] [--host 127.0.0.1] [--port 7860]

API (gradio_client): `/compare` (prompt, checkpoint, run) -> (base answer, trained answer); `/trajectory`
(prompt, run) -> one row per checkpoint; `/checkpoints` (run) -> the checkpoint values; `/runs` () -> the
runs' names. A checkpoint is given as its subfolder, `checkpoints/global_step_N`; "" is the final adapter at
the run's repo root. A run is given by its name; "" (the default) is the first.
"""

# ZeroGPU: `spaces` must be imported before anything initialises CUDA (torch comes with the imports below).
# Off ZeroGPU (no SPACES_ZERO_GPU in the environment) its decorator returns the function unchanged.
import spaces  # isort: skip

import argparse
import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

import gradio as gr
import pandas as pd
import torch
from huggingface_hub import constants

from checkpoints import Adapter, Checkpoints
from config import CONFIG_NAME, FINAL, AppConfig, RunConfig, checkpoint_label, checkpoint_step
from engine import Answer, Engine, RequestError, Settings
from grading import Grader

logger = logging.getLogger("compare")
MODEL_QUEUE = "model"  # every event that runs the model shares one concurrency slot


def _stats(label: str, answer: Answer, done: bool, verdict: bool | None = None, checked: bool = False) -> str:
    """The line above an answer pane: tokens and time, then whether it was cut or is correct."""
    if not done and not answer.finished:
        return f"**{label}** · {answer.tokens} tokens so far…"
    parts = [f"**{label}**", f"{answer.tokens} tokens", f"{answer.seconds:.1f} s"]
    if done and not answer.finished:
        parts.append("cut at max new tokens")
    if checked:
        parts.append({True: "✓ correct", False: "✗ not correct", None: "could not check"}[verdict])
    return " · ".join(parts)


def _verdict_text(verdict: bool | None) -> str:
    return {True: "correct", False: "not correct", None: "could not check"}[verdict]


class CompareApp:
    """The Space: an engine, the runs' checkpoints, an answer checker and the Gradio page around them.

    Args:
        config: the Space's configuration.
        engine: the engine (default: one built from `config`, which loads the base model).
    """

    def __init__(self, config: AppConfig, engine: Engine | None = None) -> None:
        self.config = config
        self.engine = engine or Engine(config)
        self.catalog = Checkpoints(config)
        self.grader = Grader()
        self.startup_problems: list[str] = []
        first = config.runs[0]
        if self.catalog.list(first.name):
            try:  # the first request should not wait
                self.engine.ensure_loaded(
                    [self.catalog.validate(first.name, self.catalog.default(first.name))]
                )
            except RequestError as e:
                self.startup_problems.append(str(e))
        else:
            self.startup_problems.append(
                f"{first.adapter_repo} holds no adapter yet: refresh once it is pushed."
            )
        self.grader.start()
        # Every generate holds a ZeroGPU slice for as long as its request asks (a no-op elsewhere).
        self._generate = spaces.GPU(duration=self._gpu_seconds)(self._generate_rows)

    # --- The model calls (on the GPU on ZeroGPU) --------------------------------------------------

    def _gpu_seconds(self, prompt_ids: list[int], rows: list, settings: Settings) -> int:
        # Called by `spaces.GPU` with the generate's own arguments.
        return self.config.gpu_seconds(len(rows), settings.max_new_tokens)

    def _generate_rows(self, prompt_ids: list[int], rows: list, settings: Settings) -> Iterator[list[Answer]]:
        yield from self.engine.stream(prompt_ids, rows, settings)

    # --- Requests ---------------------------------------------------------------------------------

    def _settings(
        self, max_new_tokens: float | None, temperature: float | None, top_p: float | None
    ) -> Settings:
        config = self.config
        return self.engine.check_settings(
            Settings(
                max_new_tokens=int(
                    self.engine.default_max_new_tokens if max_new_tokens is None else max_new_tokens
                ),
                temperature=float(config.temperature if temperature is None else temperature),
                top_p=float(config.top_p if top_p is None else top_p),
            )
        )

    def stream_compare(
        self, prompt: str, checkpoint: str | None, settings: Settings, run: str | None = None
    ) -> Iterator[list[Answer]]:
        """Base and trained answers to `prompt` (the checkpoint of the run named `run`, None: the first),
        from one batched call, as they grow.

        Raises:
            RequestError: a bad prompt, run or checkpoint, or a checkpoint that cannot be loaded.
        """
        value = self.catalog.validate(run, checkpoint)
        prompt_ids = self.engine.encode(prompt)
        # Loaded outside the GPU call: on ZeroGPU, state changed inside one does not outlive it.
        self.engine.ensure_loaded([value])
        yield from self._generate(prompt_ids, [None, value], settings)

    def run_trajectory(
        self, prompt: str, settings: Settings, run: str | None = None
    ) -> list[dict[str, object]]:
        """Every checkpoint's answer to `prompt` (of the run named `run`, None: the first), in batched calls of as many checkpoints as stay loaded
        (one on a CPU) and as fit in one ZeroGPU call (`gpu_max_seconds`).

        Returns:
            One row per checkpoint (by step; the final adapter only when there are no step folders):
            checkpoint, step, tokens, seconds, finished, answer, error (a checkpoint that cannot be loaded).

        Raises:
            RequestError: a bad prompt or run, or no checkpoint at all.
        """
        prompt_ids = self.engine.encode(prompt)
        chosen = self.catalog.run(run)
        listed = self.catalog.list(chosen.name)
        values = [v for v in listed if v != FINAL] or [v for v in listed if v == FINAL]
        if not values:
            raise RequestError(f"{chosen.adapter_repo} holds no checkpoint yet.")
        rows: dict[str, dict[str, object]] = {}
        per_call = min(self.engine.capacity, self.config.rows_per_gpu_call(settings.max_new_tokens))
        for start in range(0, len(values), per_call):
            chunk = values[start : start + per_call]
            usable = []
            for value in chunk:
                try:
                    self.engine.ensure_loaded([Adapter(chosen.name, value)])  # as just listed
                    usable.append(value)
                except RequestError as e:
                    rows[value] = {"error": str(e)}
            if usable:
                adapters = [Adapter(chosen.name, value) for value in usable]
                *_, answers = self._generate(prompt_ids, adapters, settings)
                for value, answer in zip(usable, answers, strict=True):
                    rows[value] = {
                        "tokens": answer.tokens,
                        "seconds": round(answer.seconds, 3),
                        "finished": answer.finished,
                        "answer": answer.text,
                        "error": None,
                    }
        return [
            {
                "checkpoint": value,
                "step": checkpoint_step(value),
                "tokens": None,
                "seconds": None,
                "finished": None,
                "answer": None,
                **rows[value],
            }
            for value in values
        ]

    # --- Public API endpoints (gradio_client) -----------------------------------------------------

    def api_compare(self, prompt: str, checkpoint: str = "", run: str = "") -> tuple[str, str]:
        """Answer a prompt with the base model and one checkpoint (one batched call, default settings).

        Args:
            prompt: the problem.
            checkpoint: `checkpoints/global_step_N`, or "" for the final adapter at the run's repo root.
            run: the run's name (`/runs`), or "" for the first.

        Returns:
            The base model's answer and the checkpoint's answer.
        """
        with _user_errors():
            settings = self._settings(None, None, None)
            *_, (base, trained) = self.stream_compare(prompt, checkpoint, settings, run)
            return base.text, trained.text

    def api_trajectory(self, prompt: str, run: str = "") -> list[dict]:
        """Answer a prompt with every checkpoint of a run (default settings).

        Args:
            prompt: the problem.
            run: the run's name (`/runs`), or "" for the first.

        Returns:
            One row per checkpoint: checkpoint, step, tokens, seconds, finished, answer, error.
        """
        with _user_errors():
            return self.run_trajectory(prompt, self._settings(None, None, None), run)

    def api_checkpoints(self, run: str = "") -> list[str]:
        """A run's checkpoints, read again from its adapter repo: `checkpoints/global_step_N` by step, "" for
        the final adapter."""
        with _user_errors():
            return list(self.catalog.list(run))

    def api_runs(self) -> list[str]:
        """The names of the runs this Space compares, the first the default."""
        return list(self.catalog.names)

    # --- The page ---------------------------------------------------------------------------------

    def _choices(self, run: str | None) -> list[tuple[str, str]]:
        return [
            ("final adapter (newest)" if value == FINAL else checkpoint_label(value), value)
            for value in reversed(self.catalog.of(run))
        ]

    def ui_refresh(self, run: str | None, current: str | None):
        """The run's checkpoints read again (a run picked, or refreshed), the current one kept if it is one."""
        with _user_errors():
            values = self.catalog.list(run)
        value = current if current in values else self.catalog.default(run)
        return gr.update(choices=self._choices(run), value=value), self._run_links(run)

    def ui_compare(self, prompt, run, checkpoint, reference, max_new_tokens, temperature, top_p):
        with _user_errors():
            settings = self._settings(max_new_tokens, temperature, top_p)
            label = checkpoint_label(checkpoint or FINAL)
            for base, trained in self.stream_compare(prompt, checkpoint, settings, run):
                yield (
                    base.text,
                    trained.text,
                    _stats("Base model", base, False),
                    _stats(label, trained, False),
                )
            reference = (reference or "").strip()
            verdicts = self.grader.grade(reference, [base.text, trained.text]) if reference else [None, None]
            yield (
                base.text,
                trained.text,
                _stats("Base model", base, True, verdicts[0], checked=bool(reference)),
                _stats(label, trained, True, verdicts[1], checked=bool(reference)),
            )

    def ui_trajectory(self, prompt, run, reference, max_new_tokens, temperature, top_p):
        with _user_errors():
            rows = self.run_trajectory(prompt, self._settings(max_new_tokens, temperature, top_p), run)
        reference = (reference or "").strip()
        answered = [row for row in rows if row["error"] is None]
        verdicts = iter(
            self.grader.grade(reference, [row["answer"] for row in answered]) if reference else []
        )
        records = []
        for row in rows:
            verdict = row["error"] or (_verdict_text(next(verdicts)) if reference else "")
            step = row["step"] if row["step"] is not None else "final"
            answer = row["answer"] or ""
            records.append([step, row["tokens"], verdict, row["seconds"], answer[:400]])
        table = pd.DataFrame(records, columns=["step", "tokens", "verdict", "seconds", "answer"])
        plot = pd.DataFrame(
            [(row["step"], row["tokens"]) for row in answered if row["step"] is not None],
            columns=["step", "tokens"],
        )
        failed = [checkpoint_label(row["checkpoint"]) for row in rows if row["error"]]
        note = f"{len(answered)} checkpoints answered" + (
            f"; could not load: {', '.join(failed)}" if failed else ""
        )
        return table, plot, note

    def build(self) -> gr.Blocks:
        """The Gradio page, with its queue set: one model call at a time, `queue_size` waiting."""
        config = self.config
        with gr.Blocks(title=config.title) as demo:
            gr.Markdown(f"# {config.title}\n{self._links()}\n\n{self._hardware()}", elem_id="header")
            if self.startup_problems:
                gr.Markdown("**Note:** " + " ".join(self.startup_problems), elem_id="startup-problems")
            with gr.Row():
                with gr.Column(scale=3):
                    prompt = gr.Textbox(
                        label="Problem",
                        lines=4,
                        max_length=config.max_prompt_chars,
                        placeholder="Type a problem, or pick an example below",
                        elem_id="prompt",
                    )
                    reference = gr.Textbox(
                        label="Reference answer (optional)",
                        info="Marks each answer correct or not (math-verify).",
                        max_lines=1,
                        elem_id="reference",
                    )
                with gr.Column(scale=2):
                    first = config.runs[0].name
                    run_choice = gr.Dropdown(
                        choices=list(self.catalog.names),
                        value=first,
                        label="Run",
                        info="Each run of the sweep: its checkpoints are listed below.",
                        visible=len(config.runs) > 1,
                        elem_id="run",
                    )
                    run_links = gr.Markdown(self._run_links(first), elem_id="run-links")
                    with gr.Row():
                        checkpoint = gr.Dropdown(
                            choices=self._choices(first),
                            value=self.catalog.default(first),
                            label="Checkpoint",
                            info="The base model answers beside it.",
                            # API clients send values outside a session's choices; the server validates.
                            allow_custom_value=True,
                            elem_id="checkpoint",
                            scale=4,
                        )
                        refresh = gr.Button("↻ Refresh", elem_id="refresh", size="sm", scale=1, min_width=90)
                    with gr.Accordion("Generation settings", open=False):
                        max_new_tokens = gr.Slider(
                            1,
                            config.max_new_tokens_limit,
                            value=self.engine.default_max_new_tokens,
                            step=1,
                            label="Max new tokens",
                        )
                        temperature = gr.Slider(
                            0.0, 2.0, value=config.temperature, step=0.05, label="Temperature (0: greedy)"
                        )
                        top_p = gr.Slider(0.05, 1.0, value=config.top_p, step=0.05, label="Top-p")
            settings = [max_new_tokens, temperature, top_p]
            with gr.Tabs():
                with gr.Tab("Side by side"):
                    run = gr.Button("Compare", variant="primary", elem_id="compare")
                    with gr.Row():
                        with gr.Column(variant="panel"):
                            base_stats = gr.Markdown("**Base model**", elem_id="base-stats")
                            base_answer = gr.Textbox(
                                show_label=False, container=False, lines=14, elem_id="base-answer"
                            )
                        with gr.Column(variant="panel"):
                            trained_stats = gr.Markdown("**Checkpoint**", elem_id="trained-stats")
                            trained_answer = gr.Textbox(
                                show_label=False, container=False, lines=14, elem_id="trained-answer"
                            )
                with gr.Tab("Across training"):
                    run_all = gr.Button(
                        "Answer with every checkpoint", variant="primary", elem_id="trajectory"
                    )
                    note = gr.Markdown()
                    with gr.Row():
                        table = gr.Dataframe(
                            label="Answers by step",
                            wrap=True,
                            column_widths=["9%", "10%", "15%", "11%", "55%"],
                            scale=3,
                            elem_id="trajectory-table",
                        )
                        plot = gr.LinePlot(
                            x="step", y="tokens", y_lim=[0, None], title="Answer length by step", scale=2
                        )
            if config.examples:
                gr.Examples(
                    [[example.prompt, example.answer or ""] for example in config.examples],
                    inputs=[prompt, reference],
                    label="Examples",
                )
            refresh.click(
                self.ui_refresh, [run_choice, checkpoint], [checkpoint, run_links], api_visibility="private"
            )
            run_choice.change(
                self.ui_refresh, [run_choice, checkpoint], [checkpoint, run_links], api_visibility="private"
            )
            for trigger in (run.click, prompt.submit):
                trigger(
                    self.ui_compare,
                    [prompt, run_choice, checkpoint, reference, *settings],
                    [base_answer, trained_answer, base_stats, trained_stats],
                    concurrency_id=MODEL_QUEUE,
                    api_visibility="private",
                )
            run_all.click(
                self.ui_trajectory,
                [prompt, run_choice, reference, *settings],
                [table, plot, note],
                concurrency_id=MODEL_QUEUE,
                api_visibility="private",
            )
            gr.api(self.api_compare, api_name="compare", concurrency_id=MODEL_QUEUE)
            gr.api(self.api_trajectory, api_name="trajectory", concurrency_id=MODEL_QUEUE)
            gr.api(self.api_checkpoints, api_name="checkpoints", concurrency_limit=4)
            gr.api(self.api_runs, api_name="runs", concurrency_limit=4)
        # Both set explicitly: on ZeroGPU an unset max_size becomes 1.
        return demo.queue(default_concurrency_limit=1, max_size=config.queue_size)

    def _hardware(self) -> str:
        engine = self.engine
        where = "a GPU" if engine.device.startswith("cuda") else "a CPU"
        kept = "one checkpoint" if engine.capacity == 1 else f"up to {engine.capacity} checkpoints"
        dtype = str(engine.dtype).removeprefix("torch.")
        return (
            f"Running on {where} in {dtype}: {kept} in memory beside the base model, "
            f"answers of up to {engine.default_max_new_tokens} new tokens unless set otherwise."
        )

    def _links(self) -> str:
        runs = self.config.runs
        compared = f"{len(runs)} runs, each its own adapter repo" if len(runs) > 1 else None
        return f"Base model {_link(self.config.base_model)}" + (f" · {compared}." if compared else ".")

    def _run_links(self, name: str | None) -> str:
        """The chosen run's repos: its checkpoints' and its merged model's."""
        run: RunConfig = self.catalog.run(name)
        parts = [f"Checkpoints from {_link(run.adapter_repo)}"]
        if run.merged_repo:
            parts.append(f"merged model {_link(run.merged_repo)}")
        return " · ".join(parts) + "."


def _link(repo: str) -> str:
    return f"[{repo}]({constants.ENDPOINT}/{repo})"


@contextlib.contextmanager
def _user_errors() -> Iterator[None]:
    """Turn a refused request into `gr.Error` (shown to the user; the client raises AppError), and any
    other failure into one with a short message, so that one bad request never takes the app down."""
    try:
        yield
    except gr.Error:
        raise
    except RequestError as e:
        raise gr.Error(str(e)) from e
    except torch.OutOfMemoryError as e:
        raise gr.Error("Out of memory: lower max new tokens, or compare fewer checkpoints.") from e
    except Exception as e:
        logger.exception("request failed")
        raise gr.Error(f"The request failed ({type(e).__name__}); try again.") from e


def main(argv: list[str] | None = None) -> None:
    """Load the config and the models, then serve the page."""
    parser = argparse.ArgumentParser(description="Compare a run's checkpoints with the base model.")
    parser.add_argument("--config", type=Path, default=Path(__file__).resolve().parent / CONFIG_NAME)
    parser.add_argument("--host", default=None, help="default: GRADIO_SERVER_NAME, else 127.0.0.1")
    parser.add_argument("--port", type=int, default=None, help="default: GRADIO_SERVER_PORT, else 7860")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for noisy in ("httpx", "httpx2"):  # one line per Hub request
        logging.getLogger(noisy).setLevel(logging.WARNING)
    app = CompareApp(AppConfig.load(args.config))
    app.build().launch(server_name=args.host, server_port=args.port)


if __name__ == "__main__":
    main()
