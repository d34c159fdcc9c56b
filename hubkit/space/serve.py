"""`hubkit space`: the same app run on 127.0.0.1 against the published repos."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from hubkit.errors import SpaceError
from hubkit.resources import space_dir
from hubkit.space.config import APP_NAME, SpaceConfig, app_config_module
from hubkit.space.files import APP_FILE


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def serve_locally(config: SpaceConfig, *, port: int, endpoint: str | None = None) -> None:
    """Run the Space's app (the copy shipped with hubkit) on 127.0.0.1 until it exits or Ctrl-C stops it.

    `endpoint`: the Hub the app loads the models from (default: `HF_ENDPOINT`, else huggingface.co).

    Raises:
        SpaceError: the app exited with an error (its output says why).
    """
    env = dict(os.environ)
    if endpoint:
        env["HF_ENDPOINT"] = endpoint.rstrip("/")
    env.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    with tempfile.TemporaryDirectory(prefix="hubkit-space-") as workdir:
        config_path = Path(workdir) / app_config_module().CONFIG_NAME
        config_path.write_text(config.to_json(), encoding="utf-8")
        command = [
            sys.executable,
            str(space_dir(APP_NAME) / APP_FILE),
            f"--config={config_path}",
            "--host=127.0.0.1",
            f"--port={port}",
        ]
        process = subprocess.Popen(command, env=env)
        # Stopped with SIGTERM as with Ctrl-C, so that the app never outlives this process.
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            status = process.wait()
        except KeyboardInterrupt:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
            if process.poll() is None:
                process.kill()
            process.wait()
            return
        finally:
            signal.signal(signal.SIGTERM, previous)
    if status != 0:
        raise SpaceError(f"the Space app exited with status {status}: see its output above")
