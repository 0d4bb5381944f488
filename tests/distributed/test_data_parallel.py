"""Data parallel x tensor parallel: 4 gloo processes as a 2 x 2 mesh, two tensor-parallel
copies of a Llama (GQA) each taking its share of the prompts; gathered logits, patching
sweeps and attribution graphs equal one process's for every prompt, on every rank; a
harvest whose shards the copies share reads back as a one-process harvest."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from interp import HookedTransformer
from interp.distributed.data_parallel import _bounds
from interp.harvest import harvest
from tests.distributed.circuit_checks import HARVEST
from tests.distributed.launch import torchrun
from tests.distributed.test_tensor_parallel import LLAMA_LIKE, save
from tests.distributed.test_tp_circuits import read
from tests.support.tolerances import model_error_bound


def test_two_copies_of_a_two_rank_model_share_the_prompts(tmp_path):
    model = transformers.LlamaForCausalLM(
        transformers.LlamaConfig(**LLAMA_LIKE, num_key_value_heads=2)
    )
    folder = save(model, tmp_path / "llama")
    out = tmp_path / "out"
    out.mkdir()
    data = tmp_path / "tokens.npy"
    np.save(data, np.random.default_rng(1).integers(0, 128, size=(9, 16), dtype=np.int32))
    harvested = tmp_path / "harvest"
    done = torchrun(
        Path(__file__).parent / "dp_tp_checks.py",
        *map(str, (out, folder, data, harvested)),
        processes=4,
        timeout=400,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-5000:]
    for rank in range(4):
        results = json.loads((out / f"rank{rank}.json").read_text())
        assert len(results) == 3 + 3 * 5
        failed = [f"{r['check']}: {r['detail']}" for r in results if not r["ok"]]
        assert not failed, f"rank {rank}: " + "\n".join(failed)
    # The harvest: shards dealt to both copies, read back as one process's.
    whole = HookedTransformer.from_pretrained_no_processing(folder)
    reference = harvest(whole, data, out=tmp_path / "one", **HARVEST)
    manifest = json.loads((harvested / "manifest.json").read_text())
    assert manifest["n_shards"] == reference["n_shards"] >= 4
    for hook in HARVEST["hooks"].split(","):
        vectors, ids = read(harvested, hook)
        expected_vectors, expected_ids = read(tmp_path / "one", hook)
        assert torch.equal(ids, expected_ids)
        bound = model_error_bound(whole.cfg, magnitude=expected_vectors)
        torch.testing.assert_close(vectors, expected_vectors, atol=bound, rtol=bound)


@pytest.mark.parametrize(
    ("n_items", "dp_size", "expected"),
    [(5, 2, [0, 2, 5]), (4, 4, [0, 1, 2, 3, 4]), (1, 2, [0, 0, 1])],
)
def test_shares_are_contiguous_and_cover_every_item(n_items, dp_size, expected):
    assert _bounds(n_items, dp_size) == expected
