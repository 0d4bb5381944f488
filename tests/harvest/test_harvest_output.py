"""interp.harvest: the shards hold run_with_cache's activations for the packed sequences, the
statistics equal a single pass over all vectors, the manifest names what made them, every
input format reads the same sequences, and bad input fails before anything is written."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

import interp
from interp.harvest import harvest
from interp.harvest.shards import sha256_file
from interp.utils import tokenize_and_concatenate
from tests.support.harvest_data import shakespeare_model, shakespeare_text
from tests.support.tolerances import error_bound, model_tolerance, tolerance

HOOKS = ["blocks.0.hook_resid_post", "blocks.1.attn.hook_z"]
SEQ_LEN = 32


@pytest.fixture(scope="module")
def model():
    return shakespeare_model()


@pytest.fixture(scope="module")
def text_file(tmp_path_factory) -> Path:
    return shakespeare_text(tmp_path_factory.mktemp("data") / "small.txt", n_chars=3000)


def shard_tensors(out: Path) -> list[dict[str, torch.Tensor]]:
    manifest = json.loads((out / "manifest.json").read_text())
    return [load_file(out / record["file"]) for record in manifest["shards"]]


def test_shards_hold_run_with_cache_activations_of_the_packed_sequences(model, text_file, tmp_path):
    manifest = harvest(
        model,
        text_file,
        HOOKS,
        tmp_path,
        seq_len=SEQ_LEN,
        shard_tokens=300,
        batch_size=3,
        positions="1:",
        progress=False,
    )
    rows = torch.tensor(model.tokenizer.encode(text_file.read_text()))
    rows = rows[: len(rows) // SEQ_LEN * SEQ_LEN].reshape(-1, SEQ_LEN)  # no EOS/BOS: one stream
    shards = shard_tensors(tmp_path)
    assert manifest["n_sequences"] == len(rows) == 93
    assert manifest["n_shards"] == len(shards) == 11  # 9 sequences (279 vectors) a shard
    assert manifest["n_tokens"] == len(rows) * (SEQ_LEN - 1)
    with torch.no_grad():
        _, cache = model.run_with_cache(rows, names_filter=HOOKS)
    for hook in HOOKS:
        expected = cache[hook][:, 1:].reshape(-1, 128)
        got = torch.cat([shard[hook] for shard in shards])
        # Batches of another shape: at most a whole forward's error.
        torch.testing.assert_close(got, expected, **model_tolerance(model.cfg, expected))
    token_ids = torch.cat([shard["token_ids"] for shard in shards])
    assert token_ids.dtype == torch.int32
    assert torch.equal(token_ids.long(), rows[:, 1:].reshape(-1))


def test_statistics_equal_one_pass_over_every_vector(model, text_file, tmp_path):
    manifest = harvest(
        model,
        text_file,
        HOOKS,
        tmp_path,
        seq_len=SEQ_LEN,
        shard_tokens=200,
        batch_size=2,
        dtype="bf16",
        progress=False,
    )
    shards = shard_tensors(tmp_path)
    for hook in HOOKS:
        vectors = torch.cat([shard[hook] for shard in shards]).double()
        assert shards[0][hook].dtype == torch.bfloat16
        stats = manifest["statistics"][hook]
        assert stats["count"] == len(vectors)
        # float64 sums over every vector, merged shard by shard (Chan et al.) or in one pass.
        n = len(vectors)
        within = tolerance(torch.float64, reduction=n, magnitude=vectors)
        torch.testing.assert_close(
            torch.tensor(stats["mean"], dtype=torch.float64), vectors.mean(0), **within
        )
        variance = vectors.var(0, unbiased=False)
        within = tolerance(torch.float64, reduction=n, depth=2, magnitude=vectors.pow(2))
        torch.testing.assert_close(
            torch.tensor(stats["variance"], dtype=torch.float64), variance, **within
        )
        mean_norm = vectors.norm(dim=1).mean().item()
        relative = error_bound(torch.float64, reduction=n * vectors.shape[1], depth=2)
        assert stats["mean_norm"] == pytest.approx(mean_norm, rel=relative)


def test_manifest_names_model_tokenizer_settings_and_checksums(model, text_file, tmp_path):
    manifest = harvest(
        model,
        text_file,
        HOOKS[:1],
        tmp_path,
        seq_len=SEQ_LEN,
        shard_tokens=640,
        max_tokens=20 * SEQ_LEN + 5,
        progress=False,
    )
    assert manifest == json.loads((tmp_path / "manifest.json").read_text())
    config = manifest["config"]
    assert config["model"]["name"] == "shakespeare-char"
    assert len(config["model"]["weights_sha256"]) == len(config["model"]["config_sha256"]) == 64
    assert config["tokenizer"]["name"] == "char" and config["tokenizer"]["vocab_size"] == 65
    assert config["hooks"] == {"blocks.0.hook_resid_post": {"d": 128, "shape": [128]}}
    assert (config["dtype"], config["seq_len"], config["tokens_per_shard"]) == ("float32", 32, 640)
    assert manifest["n_sequences"] == 20 and manifest["status"] == "complete"
    for record in manifest["shards"]:
        assert record["sha256"] == sha256_file(tmp_path / record["file"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "manifest.json",
        "shard-00000.safetensors",
        "shard-00000.stats.safetensors",
    ]


def test_forward_stops_at_the_deepest_requested_hook(model, text_file, tmp_path):
    ran = []
    hooks = [
        model.blocks[i].register_forward_hook(lambda m, a, o, i=i: ran.append(i)) for i in range(4)
    ]
    try:
        harvest(
            model,
            text_file,
            ["blocks.1.hook_mlp_out", "blocks.0.hook_resid_pre"],
            tmp_path,
            seq_len=SEQ_LEN,
            max_tokens=4 * SEQ_LEN,
            progress=False,
        )
        assert set(ran) == {0, 1}
    finally:
        for handle in hooks:
            handle.remove()


# ------------------------------------------------------------------------------- inputs
@pytest.fixture(scope="module")
def gpt2_model():
    cfg = interp.HookedTransformerConfig(
        n_layers=2,
        d_model=16,
        n_heads=2,
        d_head=8,
        d_mlp=32,
        d_vocab=50257,
        n_ctx=64,
        act_fn="gelu_new",
    )
    torch.manual_seed(0)
    return interp.HookedTransformer(cfg, tokenizer=interp.get_tokenizer("gpt2"))


DOCS = [
    f"Document {i}: " + "the quick brown fox jumps over the lazy dog " * (i % 4 + 1)
    for i in range(30)
]


def harvested_tokens(out: Path, seq_len: int = 16) -> torch.Tensor:
    return torch.cat([shard["token_ids"] for shard in shard_tensors(out)]).reshape(-1, seq_len)


def test_documents_pack_as_tokenize_and_concatenate_in_every_text_format(gpt2_model, tmp_path):
    expected = tokenize_and_concatenate(DOCS, gpt2_model.tokenizer, max_length=16)["tokens"]
    records = [{"text": doc, "id": i} for i, doc in enumerate(DOCS)]
    jsonl = tmp_path / "docs.jsonl.gz"
    with gzip.open(jsonl, "wt") as file:
        file.writelines(json.dumps(r) + "\n" for r in records)
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": DOCS}), tmp_path / "docs.parquet")
    datasets.Dataset.from_dict({"text": DOCS}).save_to_disk(str(tmp_path / "docs_ds"))
    for source in [jsonl, tmp_path / "docs.parquet", tmp_path / "docs_ds"]:
        out = tmp_path / f"out_{source.name}"
        harvest(gpt2_model, source, HOOKS[:1], out, seq_len=16, shard_tokens=50, progress=False)
        assert torch.equal(harvested_tokens(out), expected), source.name
        assert harvested_tokens(out)[:, 0].eq(gpt2_model.tokenizer.bos_token_id).all()


def test_pre_tokenised_arrays_are_harvested_as_given(gpt2_model, tmp_path):
    rows = torch.randint(0, 50257, (12, 16))
    np.save(tmp_path / "ids.npy", rows.numpy())
    torch.save({"tokens": rows.reshape(-1)}, tmp_path / "ids.pt")
    save_file({"input_ids": rows.int()}, tmp_path / "ids.safetensors")
    for name in ["ids.npy", "ids.pt", "ids.safetensors"]:
        out = tmp_path / f"out_{name}"
        manifest = harvest(gpt2_model, tmp_path / name, HOOKS[:1], out, seq_len=16, progress=False)
        assert torch.equal(harvested_tokens(out), rows), name
        assert manifest["config"]["seq_len"] == 16


def test_a_folder_reads_its_files_in_sorted_order(gpt2_model, tmp_path):
    (tmp_path / "data").mkdir()
    rows = torch.randint(0, 50257, (8, 16))
    np.save(tmp_path / "data" / "b.npy", rows[4:].numpy())
    np.save(tmp_path / "data" / "a.npy", rows[:4].numpy())
    harvest(gpt2_model, tmp_path / "data", HOOKS[:1], tmp_path / "out", progress=False)
    assert torch.equal(harvested_tokens(tmp_path / "out"), rows)


# ---------------------------------------------------------------------------- bad input
def bad(model, data, tmp_path, match, error=ValueError, hooks=HOOKS, **options):
    out = tmp_path / "out"
    with pytest.raises(error, match=match):
        harvest(model, data, hooks, out, progress=False, **options)
    assert not out.exists(), "nothing may be written before the input is checked"


def test_unknown_hook_names_the_closest_valid_ones(model, text_file, tmp_path):
    bad(
        model,
        text_file,
        tmp_path,
        r"blocks\.0\.hook_resid_post",
        KeyError,
        hooks=["blocks.0.hook_resid_psot"],
    )
    bad(model, text_file, tmp_path, "not one vector a token", hooks=["blocks.0.attn.hook_pattern"])


def test_missing_text_field_names_the_fields_there(model, tmp_path):
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text(json.dumps({"content": "hello there"}) + "\n")
    bad(
        model,
        jsonl,
        tmp_path,
        r"docs.jsonl:1 has no text field 'text' \(its fields: "
        r"\['content'\]\); pass --text-field NAME",
        KeyError,
    )


def test_empty_data_and_too_long_sequences_are_refused(model, text_file, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    bad(model, empty, tmp_path, "holds no complete sequence of 32 tokens", seq_len=SEQ_LEN)
    bad(
        model,
        text_file,
        tmp_path,
        r"seq_len=129 is not between 1 and the model's n_ctx \(128\)",
        seq_len=129,
    )
    bad(model, tmp_path / "missing.txt", tmp_path, "does not exist", FileNotFoundError)
    bad(model, text_file, tmp_path, "keeps no position", seq_len=SEQ_LEN, positions="40:")
