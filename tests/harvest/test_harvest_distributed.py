"""interp.harvest under torchrun: two gloo processes write the same shards, statistics and
manifest, byte for byte, as one process (shard i goes to rank i % 2; rank 0 merges)."""

from __future__ import annotations

import os
import subprocess
import sys

import torch

from interp.harvest import harvest
from tests.support.harvest_data import folder_bytes, shakespeare_text

HOOKS = "blocks.0.hook_resid_post,blocks.2.hook_mlp_out"


def test_two_gloo_processes_write_what_one_process_writes(tmp_path):
    text = shakespeare_text(tmp_path / "small.txt", n_chars=2000)
    options = ["--seq-len", "32", "--shard-tokens", "96", "--batch-size", "2", "--dtype", "bf16"]
    torchrun = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "-m",
        "interp.harvest",
    ]
    arguments = ["--model", "shakespeare-char", "--data", str(text), "--hooks", HOOKS]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [*torchrun, *arguments, "--out", str(tmp_path / "two"), *options, "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("harvested 1984 tokens x 2 hooks in 21 shards") == 1  # rank 0 only

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each torchrun process
    try:
        manifest = harvest(
            "shakespeare-char",
            text,
            HOOKS,
            tmp_path / "one",
            seq_len=32,
            shard_tokens=96,
            batch_size=2,
            dtype="bf16",
            progress=False,
        )
    finally:
        torch.set_num_threads(threads)
    assert manifest["n_shards"] == 21
    assert folder_bytes(tmp_path / "two") == folder_bytes(tmp_path / "one")
