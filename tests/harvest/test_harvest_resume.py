"""interp.harvest resumes: a run killed with SIGKILL part-way and run again ends with the same
bytes as an uninterrupted run; corrupt, truncated or half-recorded shards are redone; a folder
holding another harvest is refused and left untouched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import interp
from interp.harvest import harvest
from tests.support.harvest_data import folder_bytes, shakespeare_model, shakespeare_text

HOOKS = ["blocks.0.hook_resid_post", "blocks.1.hook_mlp_out"]
OPTIONS = dict(seq_len=32, shard_tokens=93, batch_size=1, positions="1:", progress=False)
# The killed run: the same harvest, slowed by a hook that sleeps (it changes no activation).
KILLED_RUN = """
import sys, time, torch, interp
from interp.harvest import harvest
torch.set_num_threads(1)
model = interp.load_model("shakespeare-char")
model.add_perma_hook("blocks.0.hook_resid_pre", lambda x, hook: time.sleep(0.05))
harvest(model, sys.argv[1], {hooks!r}, sys.argv[2], **{options!r})
"""


@pytest.fixture(scope="module")
def model():
    return shakespeare_model()


@pytest.fixture(scope="module")
def text_file(tmp_path_factory) -> Path:
    return shakespeare_text(tmp_path_factory.mktemp("data") / "small.txt", n_chars=1500)


@pytest.fixture(scope="module")
def uninterrupted(model, text_file, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("uninterrupted")
    harvest(model, text_file, HOOKS, out, **OPTIONS)
    return out


def test_sigkill_part_way_then_resume_equals_an_uninterrupted_run(
    model, text_file, uninterrupted, tmp_path
):
    out = tmp_path / "out"
    script = KILLED_RUN.format(hooks=HOOKS, options=OPTIONS)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-c", script, str(text_file), str(out)], env=env)
    deadline = time.monotonic() + 120
    while len(list(out.glob("*.stats.safetensors"))) < 2:
        assert process.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline, "no shard was written within 120 s"
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    done = len(list(out.glob("*.stats.safetensors")))
    n_shards = len(list(uninterrupted.glob("*.stats.safetensors")))
    assert 2 <= done < n_shards, "killed part-way"
    assert b'"in_progress"' in (out / "manifest.json").read_bytes()

    harvest(model, text_file, HOOKS, out, **OPTIONS)
    assert folder_bytes(out) == folder_bytes(uninterrupted)


def test_corrupt_truncated_and_unrecorded_shards_are_redone(
    model, text_file, uninterrupted, tmp_path
):
    out = tmp_path / "out"
    harvest(model, text_file, HOOKS, out, **OPTIONS)
    expected = folder_bytes(out)
    assert expected == folder_bytes(uninterrupted)
    shard = bytearray((out / "shard-00001.safetensors").read_bytes())
    shard[-5] ^= 0xFF  # one flipped bit pattern inside an activation
    (out / "shard-00001.safetensors").write_bytes(bytes(shard))
    (out / "shard-00002.safetensors").write_bytes(expected["shard-00002.safetensors"][:1000])
    (out / "shard-00003.stats.safetensors").unlink()  # killed between the shard and its record
    (out / "shard-00004.safetensors.tmp-123").write_bytes(b"half a shard")
    rewritten = []
    original = interp.harvest.writer.write_shard

    def spy(out_dir, index, *args):
        rewritten.append(index)
        return original(out_dir, index, *args)

    interp.harvest.writer.write_shard = spy
    try:
        harvest(model, text_file, HOOKS, out, **OPTIONS)
    finally:
        interp.harvest.writer.write_shard = original
    assert rewritten == [1, 2, 3]
    assert folder_bytes(out) == expected


def test_a_folder_with_another_harvest_is_refused_untouched(model, text_file, uninterrupted):
    before = folder_bytes(uninterrupted)
    with pytest.raises(FileExistsError, match=r"holds another harvest \(hooks: .*refusing to "):
        harvest(model, text_file, HOOKS[:1], uninterrupted, **OPTIONS)
    with pytest.raises(FileExistsError, match="batch_size: 1 there, 2 now"):
        harvest(model, text_file, HOOKS, uninterrupted, **{**OPTIONS, "batch_size": 2})
    assert folder_bytes(uninterrupted) == before


def test_a_folder_with_other_files_is_refused(model, text_file, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"holds files \(notes.txt\) but no manifest.json"):
        harvest(model, text_file, HOOKS, tmp_path, **OPTIONS)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
