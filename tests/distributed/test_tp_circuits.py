"""Attribution graphs of a tensor-parallel model over 2 gloo processes against the same
checkpoint and random transcoders in one process, on GPT-2- and Llama- (grouped-query)
shaped random checkpoints: adjacency within fp32 reduction-order rounding, the same active
and selected features, logit targets and pruning, on every rank; what is not covered is
refused on every rank. One torchrun launch runs every check (``circuit_checks.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.distributed.launch import torchrun
from tests.distributed.test_tensor_parallel import checkpoints, save

MODELS = {"gpt2": "gpt2", "llama": "llama-gqa"}  # circuit_checks' name: the checkpoint's


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[int, list[dict]]:
    root = tmp_path_factory.mktemp("tp_circuits")
    every = checkpoints()
    specs = [f"{name}={save(every[key][0], root / name)}" for name, key in MODELS.items()]
    out = root / "out"
    out.mkdir()
    done = torchrun(Path(__file__).parent / "circuit_checks.py", str(out), *specs)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return {rank: json.loads((out / f"rank{rank}.json").read_text()) for rank in (0, 1)}


@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_graphs_equal_one_process_on_every_rank(results, model, rank):
    mine = [result for result in results[rank] if result["model"] == model]
    checks = {result["check"] for result in mine}
    for variant in ("skip", "noskip", "skip partial", "noskip partial"):
        assert f"{variant} adjacency" in checks, checks
    assert "head loadings are refused" in checks
    failed = [f"{r['check']}: {r['detail']}" for r in mine if not r["ok"]]
    assert not failed, "\n".join(failed)
