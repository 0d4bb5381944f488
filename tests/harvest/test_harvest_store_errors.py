"""ActivationStore on a damaged harvest (a truncated, changed or missing shard, a manifest
that is not JSON or not a manifest) or with bad arguments raises an error naming the file
or value and the fix, and never yields a vector of a changed shard; the fix it names
(running the harvest again) repairs the folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from interp.harvest import ActivationStore, harvest
from tests.support.harvest_data import shakespeare_text

HOOK = "blocks.1.hook_resid_post"


def run_harvest(folder: Path) -> None:
    harvest(
        "shakespeare-char",
        folder / "small.txt",
        [HOOK],
        folder / "acts",
        seq_len=16,
        shard_tokens=150,
        progress=False,
    )


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("harvest")
    shakespeare_text(folder / "small.txt", n_chars=1200)
    run_harvest(folder)
    return folder


@pytest.fixture
def harvested(pristine, tmp_path) -> Path:
    """A fresh copy of the harvest (with its text) to damage."""
    shutil.copytree(pristine, tmp_path / "copy")
    return tmp_path / "copy"


def every_vector(store: ActivationStore) -> torch.Tensor:
    return torch.cat(list(store))


def first_shard(acts: Path) -> Path:
    return acts / json.loads((acts / "manifest.json").read_text())["shards"][0]["file"]


def test_a_truncated_shard_is_named_when_the_store_is_made(harvested):
    shard = first_shard(harvested / "acts")
    size = shard.stat().st_size
    shard.write_bytes(shard.read_bytes()[: size // 2])
    with pytest.raises(ValueError, match=rf"{shard.name} is {size // 2} bytes, but manifest.json "):
        ActivationStore(harvested / "acts", batch_size=8)


def test_a_shard_truncated_after_the_store_was_made(harvested):
    store = ActivationStore(harvested / "acts", batch_size=8, shuffle_buffer=0)
    shard = first_shard(harvested / "acts")
    shard.write_bytes(shard.read_bytes()[:100])
    with pytest.raises(ValueError, match=rf"{shard.name} is 100 bytes.*truncated or replaced"):
        every_vector(store)


def test_a_changed_shard_is_refused_and_the_harvest_command_repairs_it(tmp_path):
    shakespeare_text(tmp_path / "small.txt", n_chars=1200)
    run_harvest(tmp_path)  # its own: a harvest's identity includes the text's path
    acts = tmp_path / "acts"
    expected = every_vector(ActivationStore(acts, batch_size=8, shuffle_buffer=0))
    shard = first_shard(acts)
    data = bytearray(shard.read_bytes())
    data[-5] ^= 0xFF  # one byte of the last vector: still a valid safetensors file
    shard.write_bytes(bytes(data))
    store = ActivationStore(acts, batch_size=8, shuffle_buffer=0)
    with pytest.raises(ValueError, match=rf"{shard.name}'s bytes changed since the harvest"):
        every_vector(store)
    run_harvest(tmp_path)  # what the message says to do
    repaired = every_vector(ActivationStore(acts, batch_size=8, shuffle_buffer=0))
    torch.testing.assert_close(repaired, expected, atol=0, rtol=0)


def test_each_shard_is_hashed_once_per_store(harvested, monkeypatch):
    import interp.harvest.store as store_module

    hashed = []

    def counting_sha256(path):
        hashed.append(Path(path).name)
        return original(path)

    original = store_module.sha256_file
    monkeypatch.setattr(store_module, "sha256_file", counting_sha256)
    store = ActivationStore(harvested / "acts", batch_size=8, shuffle_buffer=64)
    n_shards = len(store.manifest["shards"])
    for epoch in range(3):
        store.set_epoch(epoch)
        every_vector(store)
    assert sorted(hashed) == sorted({record["file"] for record in store.manifest["shards"]})
    assert len(hashed) == n_shards > 1


def test_a_missing_shard_is_named(harvested):
    shard = first_shard(harvested / "acts")
    shard.unlink()
    with pytest.raises(FileNotFoundError, match=rf"{shard.name}, a shard manifest.json lists"):
        ActivationStore(harvested / "acts")


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"status": "complete", ', r"manifest.json is not valid JSON \(.*\).*new folder"),
        ("[1, 2]", r"manifest.json holds a JSON list, not a harvest manifest"),
        ('{"status": "complete"}', r"manifest.json is not a finished harvest's manifest"),
    ],
)
def test_a_damaged_manifest_is_named(harvested, text, message):
    (harvested / "acts" / "manifest.json").write_text(text)
    with pytest.raises(ValueError, match=message):
        ActivationStore(harvested / "acts")


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(batch_size=0), ValueError, r"batch_size must be an int >= 1 .*, got 0"),
        (dict(batch_size=-4), ValueError, r"batch_size must be an int >= 1 .*, got -4"),
        (dict(batch_size=2.5), TypeError, r"batch_size must be an int >= 1 .*, got 2.5"),
        (dict(batch_size="8"), TypeError, r"batch_size must be an int >= 1 .*, got '8'"),
        (dict(batch_size=True), TypeError, r"batch_size must be an int >= 1 .*, got True"),
        (dict(shuffle_buffer=-1), ValueError, r"shuffle_buffer must be an int >= 0"),
        (dict(world_size=0), ValueError, r"world_size must be an int >= 1"),
        (dict(rank=2, world_size=2), ValueError, r"rank=2 must be in \[0, world_size=2\)"),
    ],
)
def test_bad_arguments_are_named(pristine, kwargs, error, message):
    with pytest.raises(error, match=message):
        ActivationStore(pristine / "acts", **kwargs)


def test_numpy_integers_are_ints(pristine):
    np = pytest.importorskip("numpy")
    store = ActivationStore(pristine / "acts", batch_size=np.int64(8), shuffle_buffer=0)
    assert store.batch_size == 8 and isinstance(store.batch_size, int)
