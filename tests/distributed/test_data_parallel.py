"""Data parallel x tensor parallel: 4 gloo processes as a 2 x 2 mesh, two tensor-parallel
copies of a Llama (GQA) each taking its share of the prompts; gathered logits and patching
sweeps equal one process's for every prompt, on every rank."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import transformers

from interp.distributed.data_parallel import _bounds
from tests.distributed.launch import torchrun
from tests.distributed.test_tensor_parallel import LLAMA_LIKE, save


def test_two_copies_of_a_two_rank_model_share_the_prompts(tmp_path):
    model = transformers.LlamaForCausalLM(
        transformers.LlamaConfig(**LLAMA_LIKE, num_key_value_heads=2)
    )
    folder = save(model, tmp_path / "llama")
    out = tmp_path / "out"
    out.mkdir()
    done = torchrun(
        Path(__file__).parent / "dp_tp_checks.py", str(out), str(folder), processes=4, timeout=400
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-5000:]
    for rank in range(4):
        results = json.loads((out / f"rank{rank}.json").read_text())
        assert len(results) == 3 + 2 * 5
        failed = [f"{r['check']}: {r['detail']}" for r in results if not r["ok"]]
        assert not failed, f"rank {rank}: " + "\n".join(failed)


@pytest.mark.parametrize(
    ("n_items", "dp_size", "expected"),
    [(5, 2, [0, 2, 5]), (4, 4, [0, 1, 2, 3, 4]), (1, 2, [0, 0, 1])],
)
def test_shares_are_contiguous_and_cover_every_item(n_items, dp_size, expected):
    assert _bounds(n_items, dp_size) == expected
