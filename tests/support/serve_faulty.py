"""A local Hub with faults, in a process of its own (the crash faults kill it), as `hubkit hub serve` runs one.

    python -m tests.support.serve_faulty --root DIR [--port N] [--faults SPEC]

(from the repository root; SPEC as in `faults.py`). The first line printed is the endpoint; on SIGTERM or
SIGINT the Hub stops and the last line printed is the faults' counters (`Faults.stats()`) as JSON.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from pathlib import Path

from hubkit.localhub import LocalHub
from tests.support.faults import FaultPlan, Faults


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--faults", default="", metavar="SPEC")
    args = parser.parse_args()
    try:
        faults = Faults(FaultPlan.parse(args.faults), own_process=True)
    except ValueError as e:
        parser.error(str(e))
    stopped = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopped.set())
    with LocalHub(args.root, port=args.port, hooks=faults) as hub:
        print(hub.endpoint, flush=True)
        stopped.wait()
    print(json.dumps(faults.stats()), flush=True)


if __name__ == "__main__":
    main()
