"""ActivationStore yields every harvested vector exactly once an epoch, across DataLoader
workers and ranks, shuffled by seed and epoch; export_saelens writes SAELens's
cached-activations layout (a datasets folder, one column per hook plus token_ids)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from torch.utils.data import DataLoader

from interp.harvest import ActivationStore, export_saelens, harvest
from tests.support.harvest_data import shakespeare_text

HOOK = "blocks.1.hook_resid_post"


@pytest.fixture(scope="module")
def harvested(tmp_path_factory) -> Path:
    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("harvest")
    shakespeare_text(folder / "small.txt", n_chars=2500)
    harvest(
        "shakespeare-char",
        folder / "small.txt",
        [HOOK, "blocks.0.hook_mlp_out"],
        folder / "acts",
        seq_len=16,
        shard_tokens=150,
        positions="1:",
        progress=False,
    )
    return folder / "acts"


def all_vectors(folder: Path, hook: str = HOOK) -> torch.Tensor:
    files = sorted(folder.glob("shard-?????.safetensors"))
    return torch.cat([load_file(f)[hook] for f in files])


def as_rows(vectors: torch.Tensor) -> list[tuple[float, ...]]:
    return sorted(map(tuple, vectors.tolist()))


def test_every_vector_exactly_once_across_dataloader_workers(harvested):
    expected = all_vectors(harvested)
    store = ActivationStore(harvested, HOOK, batch_size=64, shuffle_buffer=500, seed=1)
    assert store.n_tokens == len(expected) == 156 * 15 and store.d == 128
    seen = []
    for epoch in range(2):
        store.set_epoch(epoch)
        batches = list(DataLoader(store, batch_size=None, num_workers=2))
        got = torch.cat(batches)
        assert as_rows(got) == as_rows(expected)  # a permutation: each vector exactly once
        assert sum(len(b) < 64 for b in batches) <= 2  # one short batch a worker, at most
        seen.append(got)
    assert not torch.equal(seen[0], seen[1]), "epochs shuffle differently"
    assert not torch.equal(seen[0], expected), "shuffled"


def test_ranks_and_workers_split_the_shards_and_single_vectors_with_tokens(harvested):
    expected = all_vectors(harvested)
    token_ids = torch.cat(
        [load_file(f)["token_ids"] for f in sorted(harvested.glob("shard-?????.safetensors"))]
    )
    parts = []
    for rank in range(2):
        store = ActivationStore(
            harvested, HOOK, rank=rank, world_size=2, with_tokens=True, shuffle_buffer=0
        )
        pairs = list(DataLoader(store, batch_size=None, num_workers=2))
        parts.append(pairs)
    pairs = parts[0] + parts[1]
    assert len(pairs) == len(expected)
    lookup = {tuple(v.tolist()): int(t) for v, t in zip(expected, token_ids, strict=True)}
    for vector, token in pairs:
        assert lookup[tuple(vector.tolist())] == int(token)
    assert as_rows(torch.stack([v for v, _ in pairs])) == as_rows(expected)


def test_unshuffled_single_process_reads_in_shard_order(harvested):
    store = ActivationStore(harvested, HOOK, batch_size=1000, shuffle_buffer=0)
    assert torch.equal(torch.cat(list(store)), all_vectors(harvested))


def test_store_errors_name_the_fix(harvested, tmp_path):
    with pytest.raises(ValueError, match=r"This harvest has hooks \[.*\]; choose one with hook="):
        ActivationStore(harvested)
    with pytest.raises(KeyError, match="'blocks.3.hook_resid_post' was not harvested"):
        ActivationStore(harvested, "blocks.3.hook_resid_post")
    with pytest.raises(FileNotFoundError, match="manifest.json does not exist"):
        ActivationStore(tmp_path)


def test_export_saelens_layout(harvested, tmp_path):
    datasets = pytest.importorskip("datasets")
    out = export_saelens(harvested, tmp_path / "saelens", HOOK)
    dataset = datasets.load_from_disk(str(out))
    assert dataset.column_names == [HOOK, "token_ids"]
    feature = dataset.features[HOOK]
    assert isinstance(feature, datasets.Array2D) and feature.shape == (15, 128)
    assert feature.dtype == "float32"
    assert dataset.features["token_ids"].length == 15
    dataset.set_format(type="torch", columns=[HOOK, "token_ids"])  # as SAELens reads it
    assert len(dataset) == 156
    rows = dataset[0 : len(dataset)]  # SAELens reads slices: ds[start:end][hook_name]
    assert torch.equal(rows[HOOK].reshape(-1, 128), all_vectors(harvested))
    files = sorted(harvested.glob("shard-?????.safetensors"))
    ids = torch.cat([load_file(f)["token_ids"] for f in files]).reshape(-1, 15)
    assert torch.equal(rows["token_ids"].int(), ids)
