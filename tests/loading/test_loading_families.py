"""Loading the model families beyond GPT-2 (their parity with Hugging Face is in
test_families_parity.py): TransformerLens's names and aliases, default_prepend_bos, the
folder's tokenizer, bf16 checkpoints and dtypes, in-memory models, peak memory, and clear
errors for unsupported or inconsistent checkpoints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import safetensors.torch
import torch
import transformers

from interp import HookedTransformer
from interp.loading import pretrained
from interp.loading.checkpoint import CheckpointError
from interp.loading.families import LLAMA
from interp.loading.pretrained import MODEL_ALIASES, get_official_model_name
from interp.tokenizers import HuggingFaceTokenizer
from tests.loading.test_families_parity import gemma3_multimodal, llama, randomize, saved, tokens
from tests.support.tolerances import logits_bound


@pytest.mark.parametrize(
    ("alias", "hub_id"),
    [
        ("pythia-70m", "EleutherAI/pythia-70m"),
        ("pythia", "EleutherAI/pythia-70m"),
        ("EleutherAI/pythia-125m-deduped", "EleutherAI/pythia-160m-deduped"),
        ("meta-llama/llama-3.2-1b", "meta-llama/Llama-3.2-1B"),
        ("mistral-7b", "mistralai/Mistral-7B-v0.1"),
        ("qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B"),
        ("Qwen3-0.6B", "Qwen/Qwen3-0.6B"),
        ("gemma-2-2b", "google/gemma-2-2b"),
        ("gemma-3-1b-it", "google/gemma-3-1b-it"),
    ],
)
def test_transformer_lens_names_resolve_to_hub_ids(alias, hub_id, tmp_path, monkeypatch):
    saved(tmp_path, "llama-mha-tied")
    asked = []
    monkeypatch.setattr(
        pretrained, "download_from_hub", lambda repo: asked.append(repo) or tmp_path
    )
    HookedTransformer.from_pretrained_no_processing(alias)
    assert get_official_model_name(alias) == hub_id and asked == [hub_id]


def test_alias_table_equals_transformer_lens_for_the_supported_families():
    tl = pytest.importorskip("transformer_lens.supported_models")
    families = ("EleutherAI/pythia", "meta-llama/Llama-3", "meta-llama/Meta-Llama-3", "Qwen/Qwen2")
    families += ("Qwen/Qwen3", "google/gemma-2-", "google/gemma-3-", "mistralai/Mistral-7B-v0.1")
    families += ("mistralai/Mistral-7B-Instruct-v0.1", "mistralai/Mistral-Nemo", "gpt2", "distil")
    families += ("NeelNanda/", "ArthurConmy/", "meta-llama/Llama-2", "codellama/", "Qwen/Qwen1.5")
    families += ("EleutherAI/gpt-neox", "mistralai/Mistral-Small", "Qwen/QwQ")
    families += ("facebook/opt-", "EleutherAI/gpt-neo-", "EleutherAI/gpt-j-", "roneneldan/")
    families += ("microsoft/phi-1", "microsoft/phi-2", "microsoft/Phi-3", "microsoft/phi-4")
    families += ("google/gemma-2b", "google/gemma-7b", "bigscience/bloom-", "mistralai/Mixtral-")
    families += ("openai/gpt-oss-",)
    theirs = {
        name: tl.MODEL_ALIASES.get(name, [])
        for name in tl.OFFICIAL_MODEL_NAMES
        if name.startswith(families)
    }
    # TL 4 dropped the aliases of TL 2.18 (whose table interp's is) that repeat the name.
    ours = {name: [a for a in aliases if a != name] for name, aliases in MODEL_ALIASES.items()}
    assert theirs == ours


@pytest.mark.parametrize(
    ("case", "prepend_bos"),
    [
        ("neox-parallel-partial-rotary", False),
        ("llama-mha-tied", True),
        ("mistral-window-5", True),
        ("qwen2-gqa2-biases-tied", False),
        ("qwen3-gqa4-tied", False),
        ("gemma2-untied-mha", True),
        ("gemma3-dual-rope-linear-window-4", True),
    ],
)
def test_default_prepend_bos_is_transformer_lens_s(tmp_path, case, prepend_bos):
    saved(tmp_path, case)
    model = HookedTransformer.from_pretrained_no_processing(tmp_path)
    assert model.cfg.default_prepend_bos is prepend_bos
    assert model.tokenizer is None  # no tokenizer files, and GPT-2's would be wrong


def write_tokenizer(folder) -> transformers.PreTrainedTokenizerFast:
    """A small byte-level BPE in tokenizer.json, with Llama's special tokens."""
    import tokenizers

    bpe = tokenizers.Tokenizer(tokenizers.models.BPE())
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=120, special_tokens=["<s>", "</s>"], show_progress=False
    )
    bpe.train_from_iterator(["the cat sat on the mat", "hello world"] * 20, trainer)
    hf_tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe, bos_token="<s>", eos_token="</s>"
    )
    hf_tokenizer.save_pretrained(folder)
    return hf_tokenizer


@pytest.mark.parametrize("files", ["saved", "tokenizer.json only"])
def test_tokenizer_is_the_folders_hugging_face_tokenizer(tmp_path, files):
    saved(tmp_path, "llama-mha-tied")
    hf_tokenizer = write_tokenizer(tmp_path)
    if files == "tokenizer.json only":
        for path in tmp_path.glob("*.json"):
            if path.name not in ("tokenizer.json", "config.json"):
                path.unlink()
    model = HookedTransformer.from_pretrained_no_processing(tmp_path)
    assert isinstance(model.tokenizer, HuggingFaceTokenizer)
    ids = hf_tokenizer.encode("the cat sat", add_special_tokens=False)
    assert model.tokenizer.encode("the cat sat", add_special_tokens=False) == ids
    assert model.to_string(torch.tensor(ids)) == "the cat sat"
    if files == "saved":  # only tokenizer_config.json says which token is BOS
        assert model.to_tokens("the cat sat").tolist() == [[hf_tokenizer.bos_token_id, *ids]]


# Gemma's norms scale by 1 + w in float32 and round once, as Hugging Face's (folding 1 + w
# into a bf16 w put Gemma 2 and 3 at about 1.6x Hugging Face's own bf16 error).
BF16_CASES = [
    "neox-parallel-partial-rotary",
    "llama-gqa2-llama3-rope",
    "qwen3-qk-norm-head-dim-32",
    "gemma2-untied-mha",
    "gemma3-dual-rope-linear-window-4",
]


@pytest.mark.parametrize("case", BF16_CASES)
def test_bf16_checkpoint_loads_in_float32_or_bfloat16(tmp_path, case):
    """A bf16 checkpoint loads exactly (fp32 by default); in bf16, the logits are as close to
    Hugging Face's bf16 ones as those are to its fp32 ones."""
    hf_model = saved(tmp_path, case)
    hf_model.to(torch.bfloat16).save_pretrained(tmp_path)
    hf_class = type(hf_model)
    model = HookedTransformer.from_pretrained_no_processing(tmp_path)
    assert model.W_E.dtype == torch.float32
    hf32 = hf_class.from_pretrained(tmp_path, dtype=torch.float32).eval()
    hf16 = hf_class.from_pretrained(tmp_path, dtype=torch.bfloat16).eval()
    bf16 = HookedTransformer.from_pretrained_no_processing(tmp_path, dtype="bfloat16")
    assert bf16.W_E.dtype == torch.bfloat16 and bf16.cfg.dtype == torch.bfloat16
    with torch.no_grad():
        reference = hf32(tokens()).logits
        assert (model(tokens()) - reference).abs().max() <= logits_bound(model.cfg, reference)
        hf_error = (hf16(tokens()).logits.float() - reference).abs().max()
        assert (bf16(tokens()).float() - hf16(tokens()).logits.float()).abs().max() <= hf_error


@pytest.mark.parametrize("make", [llama, gemma3_multimodal], ids=["llama", "gemma3-multimodal"])
def test_in_memory_hugging_face_models(make):
    torch.manual_seed(0)
    hf_model = make(num_key_value_heads=2, head_dim=16).eval()
    randomize(hf_model, 0.1)
    model = HookedTransformer.from_pretrained_no_processing("any", hf_model=hf_model)
    with torch.no_grad():
        expected = hf_model(tokens()).logits
        assert (model(tokens()) - expected).abs().max() <= logits_bound(model.cfg, expected)


def test_shapes_that_contradict_the_config_name_the_tensor(tmp_path):
    saved(tmp_path, "llama-gqa2-llama3-rope")
    config = json.loads((tmp_path / "config.json").read_text())
    config["intermediate_size"] = 128
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError) as error:
        HookedTransformer.from_pretrained_no_processing(tmp_path)
    message = str(error.value)
    assert message.startswith(f"The checkpoint in {tmp_path} does not fit the model: shape ")
    assert "model.layers.0.mlp.gate_proj.weight: checkpoint (96, 64), model (128, 64)" in message
    assert "model.layers.1.mlp.down_proj.weight: checkpoint (64, 96), model (64, 128)" in message


def test_missing_and_unexpected_tensors_are_listed(tmp_path):
    saved(tmp_path, "qwen3-qk-norm-head-dim-32")
    weights = tmp_path / "model.safetensors"
    state_dict = safetensors.torch.load_file(weights)
    state_dict["extra.weight"] = state_dict.pop("model.layers.1.self_attn.k_norm.weight")
    safetensors.torch.save_file(state_dict, weights)
    with pytest.raises(CheckpointError) as error:
        HookedTransformer.from_pretrained_no_processing(tmp_path)
    assert str(error.value) == (
        f"The checkpoint in {tmp_path} does not fit the model: missing keys "
        "['model.layers.1.self_attn.k_norm.weight'], unexpected keys ['extra.weight']"
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            dict(num_key_value_heads=3),
            "n_heads=4 is not divisible by n_key_value_heads=3",
        ),
        (
            dict(rope_parameters=dict(rope_type="yarn", rope_theta=1e4, factor=2.0)),
            "rope type 'yarn' (field 'rope_parameters') is not supported; "
            "interp supports 'default', 'linear' and 'llama3'.",
        ),
        (dict(mlp_bias=True), "field 'mlp_bias' is true: interp's gated MLP has no bias"),
        (dict(num_hidden_layers="2"), "field 'num_hidden_layers' is '2'; it must be a positive"),
    ],
)
def test_bad_config_names_the_file_and_field(tmp_path, edit, message):
    saved(tmp_path, "llama-mha-tied")
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps(json.loads(config_path.read_text()) | edit))
    with pytest.raises(CheckpointError) as error:
        HookedTransformer.from_pretrained_no_processing(tmp_path)
    text = str(error.value)
    assert text.startswith(f"{config_path} is not a valid Llama config: ")
    assert message in text


def test_config_json_missing_fields_take_hugging_face_defaults():
    """Hub configs (Gemma 3's multimodal ones especially) rely on the config class's defaults."""
    for family, config_class in [(LLAMA, transformers.LlamaConfig)]:
        ours = family.hooked_config({"architectures": ["LlamaForCausalLM"]})
        theirs = config_class()
        assert (ours.d_model, ours.n_layers, ours.d_mlp, ours.eps) == (
            theirs.hidden_size,
            theirs.num_hidden_layers,
            theirs.intermediate_size,
            theirs.rms_norm_eps,
        )
    from interp.loading.families import GEMMA3

    text_config = {"hidden_size": 2560, "num_hidden_layers": 34, "sliding_window": 1024}
    text_config["rope_scaling"] = {"factor": 8.0, "rope_type": "linear"}
    cfg = GEMMA3.hooked_config(
        {"architectures": ["Gemma3ForConditionalGeneration"], "text_config": text_config}
    )
    theirs = transformers.Gemma3TextConfig(**text_config)
    assert (cfg.n_heads, cfg.n_key_value_heads, cfg.d_head, cfg.d_vocab) == (
        theirs.num_attention_heads,
        theirs.num_key_value_heads,
        theirs.head_dim,
        theirs.vocab_size,
    )
    assert cfg.attn_types == [
        "global" if t == "full_attention" else "local" for t in theirs.layer_types
    ]
    assert cfg.rotary_scaling_factor == 8.0 and cfg.rotary_base == 1e6
    assert cfg.rotary_base_local == 1e4 and cfg.window_size == 1024


def test_peak_memory_of_loading_stays_near_the_model_size(tmp_path):
    """A Llama-shaped bf16 checkpoint (GQA, untied) loaded as float32, in a fresh process
    after a warm-up load (one-time costs such as lazy imports are not counted): the rise of
    peak resident memory is under 1.5x the loaded model's size."""
    warm_up = tmp_path / "warm-up"
    saved(warm_up, "llama-mha-tied")
    config = transformers.LlamaConfig(
        vocab_size=8000,
        hidden_size=512,
        intermediate_size=1408,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=2,
        dtype="bfloat16",
    )
    cfg = LLAMA.hooked_config(config.to_dict() | {"architectures": ["LlamaForCausalLM"]})
    generator = torch.Generator().manual_seed(0)
    tensors = {
        row.checkpoint: torch.randn(row.shape, generator=generator).to(torch.bfloat16)
        for row in LLAMA.table(cfg, LLAMA.text_values(config.to_dict()))
        if row.checkpoint and row.convert is not None
    }
    safetensors.torch.save_file(tensors, tmp_path / "model.safetensors", {"format": "pt"})
    config.save_pretrained(tmp_path)
    del tensors
    script = textwrap.dedent(
        """
        import json, sys, interp
        def rss(field):
            for line in open("/proc/self/status"):
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
        interp.HookedTransformer.from_pretrained_no_processing(sys.argv[2])
        before = rss("VmRSS")
        model = interp.HookedTransformer.from_pretrained_no_processing(sys.argv[1])
        size = sum(p.numel() * p.element_size() for p in model.parameters())
        print(json.dumps({"ratio": (rss("VmHWM") - before) / size}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path), str(warm_up)],
        capture_output=True,
        text=True,
        check=True,
        # One thread, one arena and a fixed mmap threshold: resident memory then follows the
        # live tensors, not glibc's heap fragmentation (see benchmarks/loading_memory.py).
        env=os.environ
        | {"OMP_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": "131072"},
    )
    assert json.loads(result.stdout.splitlines()[-1])["ratio"] < 1.5
