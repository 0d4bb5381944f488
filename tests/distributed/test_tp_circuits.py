"""Tensor parallel over 2 gloo processes against one process, for the circuits and harvest
packages, in one torchrun launch (``circuit_checks.py``):

- attribution graphs on GPT-2-, Llama- (grouped-query), Gemma 2- (one key/value head, soft
  caps) and Mixtral-shaped random checkpoints with
  random transcoders: adjacency within fp32 reduction-order rounding, the same active and
  selected features, logit targets and pruning, on every rank; what is not covered refused
  on every rank;
- a sharded harvest of a Llama with one key/value head (shared by both ranks): per-rank
  parts and a manifest, which ``ActivationStore`` reads back equal to a one-process harvest.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from safetensors import safe_open

from interp import HookedTransformer
from interp.harvest import ActivationStore, harvest
from tests.distributed.circuit_checks import HARVEST
from tests.distributed.launch import torchrun
from tests.distributed.test_tensor_parallel import LLAMA_LIKE, checkpoints, save
from tests.support.tolerances import model_error_bound

# circuit_checks' name: the checkpoint's
MODELS = {
    "gpt2": "gpt2",
    "llama": "llama-gqa",
    "gemma2": "gemma2-one-kv-head",
    "mixtral": "mixtral",
}
HOOKS = HARVEST["hooks"].split(",")


@pytest.fixture(scope="module")
def launch(tmp_path_factory) -> tuple[dict[int, list[dict]], Path, Path, Path]:
    """(every rank's check results, the one-kv-head Llama's folder, the token data, the
    tensor-parallel harvest's folder)."""
    root = tmp_path_factory.mktemp("tp_circuits")
    every = checkpoints()
    specs = [f"{name}={save(every[key][0], root / name)}" for name, key in MODELS.items()]
    one_kv = transformers.LlamaConfig(**LLAMA_LIKE, num_key_value_heads=1)
    folder = save(transformers.LlamaForCausalLM(one_kv), root / "llama-one-kv")
    data = root / "tokens.npy"
    np.save(data, np.random.default_rng(0).integers(0, 128, size=(11, 16), dtype=np.int32))
    harvested = root / "tp_harvest"
    specs.append(f"harvest={folder},{data},{harvested}")
    out = root / "out"
    out.mkdir()
    done = torchrun(Path(__file__).parent / "circuit_checks.py", str(out), *specs)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    results = {rank: json.loads((out / f"rank{rank}.json").read_text()) for rank in (0, 1)}
    return results, folder, data, harvested


@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_graphs_equal_one_process_on_every_rank(launch, model, rank):
    mine = [result for result in launch[0][rank] if result["model"] == model]
    checks = {result["check"] for result in mine}
    for variant in ("skip", "noskip", "skip partial", "noskip partial"):
        assert f"{variant} adjacency" in checks, checks
    assert "head loadings are refused" in checks
    failed = [f"{r['check']}: {r['detail']}" for r in mine if not r["ok"]]
    assert not failed, "\n".join(failed)


def test_a_sharded_harvest_reads_back_as_one_process_harvest(launch, tmp_path):
    results, folder, data, harvested = launch
    assert [r["ok"] for r in results[0] if r["model"] == "harvest"] == [True]
    whole = HookedTransformer.from_pretrained_no_processing(folder)
    reference = harvest(whole, data, out=tmp_path / "one", **HARVEST)
    manifest = json.loads((harvested / "manifest.json").read_text())
    assert manifest["n_tokens"] == reference["n_tokens"] == 11 * 15
    assert manifest["n_shards"] == reference["n_shards"] > 1
    assert manifest["config"]["hooks"] == reference["config"]["hooks"]  # whole shapes
    for hook in HOOKS:
        vectors, ids = read(harvested, hook)
        expected_vectors, expected_ids = read(tmp_path / "one", hook)
        assert torch.equal(ids, expected_ids)
        bound = model_error_bound(whole.cfg, magnitude=expected_vectors)
        torch.testing.assert_close(vectors, expected_vectors, atol=bound, rtol=bound)
        mine, theirs = manifest["statistics"][hook], reference["statistics"][hook]
        for key in ("mean", "variance", "mean_norm"):
            expected = torch.tensor(theirs[key])
            bound = model_error_bound(whole.cfg, magnitude=expected.abs().max())
            torch.testing.assert_close(torch.tensor(mine[key]), expected, atol=bound, rtol=bound)


def read(folder: Path, hook: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Every vector a harvest stored at ``hook`` [tokens, d], and its token ids, in order."""
    store = ActivationStore(folder, hook, shuffle_buffer=0, batch_size=1000, with_tokens=True)
    (vectors, ids), *rest = list(store)
    assert not rest and store.d == vectors.shape[1]
    return vectors, ids


def test_each_rank_stores_its_columns_and_the_residual_once(launch):
    harvested = launch[3]
    split = json.loads((harvested / "manifest.json").read_text())["config"]["tensor_parallel"]
    assert sorted(split["hooks"]) == sorted(h for h in HOOKS if "resid" not in h)
    assert split["hooks"]["blocks.0.attn.hook_k"]["owners"] == [0]  # one key/value head, shared
    with safe_open(str(harvested / "shard-00000.safetensors"), framework="pt") as rank_0:
        assert set(rank_0.keys()) == {*HOOKS, "token_ids"}
        assert rank_0.get_tensor("blocks.1.mlp.hook_post").shape[1] == 96 // 2
    with safe_open(str(harvested / "tp1" / "shard-00000.safetensors"), framework="pt") as rank_1:
        stored = set(rank_1.keys()) - {"token_ids"}
        assert stored == {"blocks.1.attn.hook_z", "blocks.0.attn.hook_q", "blocks.1.mlp.hook_post"}
        assert rank_1.get_tensor("blocks.1.attn.hook_z").shape[1] == 64 // 2
