"""Push a TRL (transformers `Trainer`) run while it trains.

    from hubkit.integrations.trl import HubkitPushCallback
    trainer = GRPOTrainer(..., callbacks=[HubkitPushCallback(repo_id="me/qwen2.5-3b-grpo-gsm8k")])

After each checkpoint save the new step is pushed on a background thread: training never waits for the
network, one push runs at a time, and saves made while a push runs are folded into the next one. A push
that fails is logged and retried at the next save; it never stops training. When training ends the
callback waits for the push in flight, then pushes the final step and the merged model.

The run directory is the one holding hubkit.json: the Trainer's `output_dir`, or its parent (recipes
save checkpoints to `<run_dir>/checkpoints`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from transformers import TrainerCallback

from hubkit.publish.push import PushSession
from hubkit.publish.request import HUB_ENDPOINT, PushReport, PushRequest, gguf_type_names
from hubkit.runs.manifest import MANIFEST_NAME

if TYPE_CHECKING:
    from transformers import TrainerControl, TrainerState, TrainingArguments

logger = logging.getLogger(__name__)


def find_run_dir(output_dir: str | Path) -> Path:
    """The run directory of a Trainer writing to `output_dir`: the first of it and its parent with hubkit.json."""
    output = Path(output_dir).resolve()
    for candidate in (output, output.parent):
        if (candidate / MANIFEST_NAME).is_file():
            return candidate
    return output


class BackgroundPusher:
    """Runs pushes of one run on a thread of its own, one at a time, coalescing requests.

    Args:
        request: what to push (not a dry run).
    """

    def __init__(self, request: PushRequest) -> None:
        self.request = request
        self.reports: list[PushReport] = []
        self.failures = 0
        self._session = PushSession(request)
        self._wanted = threading.Condition()
        self._due = False
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="hubkit-push", daemon=True)
        self._thread.start()

    def request_push(self) -> None:
        """Ask for a push of what the run has saved so far; returns at once."""
        with self._wanted:
            self._due = True
            self._wanted.notify()

    def _run(self) -> None:
        while True:
            with self._wanted:
                while not self._due and not self._closing:
                    self._wanted.wait()
                if not self._due:
                    return
                self._due = False
            self._push(merge=False)

    def _push(self, *, merge: bool) -> PushReport | None:
        try:
            report = self._session.push(may_merge=merge)
        except Exception as e:  # a push must never stop training: report it, retry at the next save
            self.failures += 1
            logger.warning(
                "hubkit: pushing %s failed, retrying at the next save: %s", self.request.run_dir.name, e
            )
            return None
        self.reports.append(report)
        for repo in report.repos:
            if not repo.unchanged:
                logger.info("hubkit: pushed steps %s to %s", ", ".join(map(str, repo.steps)), repo.url)
        return report

    def finish(self, *, merge: bool = True) -> PushReport | None:
        """Wait for the push in flight, then push everything once more (with the merged model).

        Returns:
            The final push's report, or None when it failed (logged; `hubkit push` can finish the job).
        """
        with self._wanted:
            self._closing = True
            self._wanted.notify()
        self._thread.join()
        try:
            return self._push(merge=merge)
        finally:
            self._session.close()


class HubkitPushCallback(TrainerCallback):
    """A `TrainerCallback` that publishes each saved checkpoint while training runs.

    Args:
        repo_id: the adapter repo; default: the run's recorded `push_to`, else `<token owner>/<run id>`.
        endpoint: the Hub URL (default huggingface.co; `HF_ENDPOINT` is not read here, pass it).
        merged: push the merged model at the end of training.
        gguf: also write the merged model as GGUF files of these types (``("q8_0",)``) at the end of
            training, pushed to `<repo>-GGUF`.
        private: create the repos private.
        token: the Hub token; default `HF_TOKEN` or `hf auth login`'s.
        run_dir: the run directory; default found from the Trainer's `output_dir`.
    """

    def __init__(
        self,
        repo_id: str | None = None,
        *,
        endpoint: str = HUB_ENDPOINT,
        merged: bool = True,
        gguf: Sequence[str] = (),
        private: bool = False,
        token: str | None = None,
        run_dir: str | Path | None = None,
    ) -> None:
        self._settings = {
            "repo_id": repo_id,
            "endpoint": endpoint,
            "merged": merged,
            "gguf": gguf_type_names(gguf),  # an unknown type is refused now, not at the first save
            "private": private,
        }
        self._token = token
        self._run_dir = Path(run_dir) if run_dir is not None else None
        self.pusher: BackgroundPusher | None = None

    def _pusher(self, args: TrainingArguments) -> BackgroundPusher:
        if self.pusher is None:
            run_dir = self._run_dir or find_run_dir(args.output_dir)
            request = PushRequest(run_dir=run_dir, token=self._token, **self._settings)  # type: ignore[arg-type]
            self.pusher = BackgroundPusher(request)
        return self.pusher

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: object
    ) -> None:
        if state.is_world_process_zero:  # one process pushes; the others saved nothing of their own
            self._pusher(args).request_push()

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: object
    ) -> None:
        if state.is_world_process_zero and self.pusher is not None:
            self.pusher.finish(merge=bool(self._settings["merged"]))
