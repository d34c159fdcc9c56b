"""Stands in for `python -m verl.trainer.main_ppo` in launch.sh tests: replays a finished verl run.

Each saved step of SOURCE_RUN (a real verl 0.6.1 run, `checkpoints/global_step_N/`) appears in the
launch's run directory one by one, as verl saves it: the step's folder first, then its metrics lines and
`latest_checkpointed_iteration.txt`, with REPLAY_PAUSE seconds between steps. verl itself cannot train
inside the test process's environment; this is the only part of the launch that is not real.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path


def main() -> None:
    source = Path(os.environ["SOURCE_RUN"])
    run_dir = Path(os.environ["RUN_DIR_FOR_REPLAY"])
    pause = float(os.environ.get("REPLAY_PAUSE", "2"))
    metrics = [json.loads(line) for line in (source / "metrics.jsonl").read_text().splitlines() if line]
    steps = sorted(int(p.name.rsplit("_", 1)[1]) for p in (source / "checkpoints").glob("global_step_*"))
    logged = 0
    for step in steps:
        time.sleep(pause)
        shutil.copytree(
            source / "checkpoints" / f"global_step_{step}",
            run_dir / f"global_step_{step}",
            ignore=shutil.ignore_patterns("optim_*", "extra_state_*"),
        )
        with open(os.environ["VERL_FILE_LOGGER_PATH"], "a") as f:
            for record in metrics[logged:]:
                if record["step"] <= step:
                    f.write(json.dumps(record) + "\n")
                    logged += 1
        (run_dir / "latest_checkpointed_iteration.txt").write_text(str(step))
        print(f"replayed global_step_{step}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
