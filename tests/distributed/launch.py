"""Starting a script under torchrun with 2 (or more) gloo processes on this machine, for
tests: bound to 127.0.0.1 on a free port, stopped after ``timeout`` seconds (a hang fails the
test instead of stalling CI)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def torchrun(
    script: Path, *arguments: str, timeout: float = 240, processes: int = 2
) -> subprocess.CompletedProcess:
    """``torchrun --nproc-per-node processes script arguments`` with this checkout's
    ``interp``."""
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "1",
        "--nproc-per-node",
        str(processes),
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(free_port()),
        str(script),
        *arguments,
    ]
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
    )
