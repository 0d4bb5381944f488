"""Bad input to the loaders is a clear error (or, for non-finite weights, a warning) naming the
value and the fix, raised before any model is built: rope scaling fields, tied embeddings
with a checkpoint's own unembedding (loaded as Hugging Face loads it), NaN and infinite
weights, a corrupt tokenizer, a nanoGPT checkpoint of the wrong shape, a dtype a model cannot
compute in, mistyped config.json fields, and a prompt longer than the model's context."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import safetensors.torch
import torch
import transformers

import interp
from interp import HookedTransformer
from interp.loading.checkpoint import MODEL_DTYPES, CheckpointError, non_finite_values
from interp.loading.native import load_native
from interp.loading.transformer_lens import load_transformer_lens_state_dict
from interp.loading_from_pretrained import get_pretrained_state_dict
from interp.viz.report_data import analyse_prompt, prompt_tokens
from tests.conftest import make_hf_gpt2
from tests.loading.test_families_parity import saved, tokens
from tests.loading.test_loading_families import write_tokenizer
from tests.loading.test_loading_nanogpt import nanogpt_hf, train_py_checkpoint
from tests.support.tolerances import model_tolerance


def edit_config(folder: Path, edit) -> Path:
    """Apply ``edit`` (a function of the config dict) to ``folder``'s config.json."""
    path = folder / "config.json"
    config = json.loads(path.read_text())
    edit(config)
    path.write_text(json.dumps(config))
    return path


def load_error(folder: Path) -> str:
    with pytest.raises(CheckpointError) as error:
        HookedTransformer.from_pretrained_no_processing(folder)
    return str(error.value)


def rewrite_weights(folder: Path, edit) -> dict[str, torch.Tensor]:
    """Apply ``edit`` to the state dict in ``folder``'s model.safetensors; returns it."""
    path = folder / "model.safetensors"
    state_dict = safetensors.torch.load_file(path)
    edit(state_dict)
    safetensors.torch.save_file(state_dict, path, metadata={"format": "pt"})
    return state_dict


# ------------------------------------------------------------------------ rope scaling
def _drop(name):
    return lambda rope: rope.pop(name)


def _set(name, value):
    return lambda rope: rope.__setitem__(name, value)


@pytest.mark.parametrize(
    ("case", "change", "field", "state"),
    [
        ("llama-gqa2-llama3-rope", _drop("factor"), "rope_parameters.factor", "is missing"),
        (
            "llama-gqa2-llama3-rope",
            _drop("low_freq_factor"),
            "rope_parameters.low_freq_factor",
            "is missing",
        ),
        (
            "llama-gqa2-llama3-rope",
            _set("high_freq_factor", "4"),
            "rope_parameters.high_freq_factor",
            "is '4'",
        ),
        ("llama-gqa2-llama3-rope", _set("factor", -8.0), "rope_parameters.factor", "is -8.0"),
        (
            "llama-gqa4-linear-rope-biases-sharded",
            _drop("factor"),
            "rope_parameters.factor",
            "is missing",
        ),
        (
            "llama-gqa4-linear-rope-biases-sharded",
            _set("rope_theta", None),
            "rope_parameters.rope_theta",
            "is None",
        ),
    ],
)
def test_a_missing_or_mistyped_rope_field_is_named_with_its_file_and_fix(
    tmp_path, case, change, field, state
):
    saved(tmp_path, case)
    config_path = edit_config(tmp_path, lambda config: change(config["rope_parameters"]))
    message = load_error(tmp_path)
    assert message.startswith(f"{config_path} is not a valid Llama config: field {field!r} {state}")
    assert "Add it to config.json, or change the rope type." in message


def test_legacy_rope_scaling_fields_are_named_as_rope_scaling(tmp_path):
    """A config.json of transformers 4 (Llama 3.2's on the hub): ``rope_theta`` at the top
    level and the scaling in ``rope_scaling``."""
    saved(tmp_path, "llama-gqa2-llama3-rope")

    def legacy(config):
        rope = config.pop("rope_parameters")
        config["rope_theta"] = rope.pop("rope_theta")
        config["rope_scaling"] = rope
        del rope["factor"]

    edit_config(tmp_path, legacy)
    assert "field 'rope_scaling.factor' is missing; rope type 'llama3' needs it" in load_error(
        tmp_path
    )
    edit_config(tmp_path, lambda config: config["rope_scaling"].update(factor=8.0))
    HookedTransformer.from_pretrained_no_processing(tmp_path)  # the fix: it loads
    edit_config(tmp_path, lambda config: config.update(rope_theta="big"))
    assert "field 'rope_theta' is 'big'" in load_error(tmp_path)
    edit_config(tmp_path, lambda config: config.update(rope_scaling="llama3"))
    assert "field 'rope_scaling' is 'llama3'; it must be a JSON object" in load_error(tmp_path)


def test_gemma3_names_the_rope_field_of_each_layer_type(tmp_path):
    saved(tmp_path, "gemma3-dual-rope-linear-window-4")
    edit_config(tmp_path, lambda config: config["rope_parameters"]["full_attention"].pop("factor"))
    assert "field 'rope_parameters.full_attention.factor' is missing" in load_error(tmp_path)
    edit_config(
        tmp_path,
        lambda config: config["rope_parameters"].update(
            full_attention=dict(rope_type="default", rope_theta=1e6),
            sliding_attention=dict(rope_type="default", rope_theta="ten thousand"),
        ),
    )
    assert "field 'rope_parameters.sliding_attention.rope_theta' is 'ten thousand'" in (
        load_error(tmp_path)
    )


# ---------------------------------------------------------------- tied embeddings
def _logits_tolerance(expected: torch.Tensor) -> float:
    """Float32 rounding of the largest logit, a few roundings for each of the model's
    sequential reductions (d_mlp = 96 terms, two layers)."""
    return float(64 * torch.finfo(torch.float32).eps * expected.abs().max())


@pytest.mark.parametrize(
    "case", ["llama-mha-tied", "qwen3-gqa4-tied", "gemma2-soft-caps-bite-window-4"]
)
def test_a_tied_config_with_its_own_lm_head_loads_it_as_hugging_face_does(tmp_path, case):
    """Hugging Face 5 ties the embeddings only when the checkpoint has no lm_head, or one
    equal to the embedding; a different one is kept (with a warning), so logits use it."""
    hf_model = saved(tmp_path, case)
    assert hf_model.config.tie_word_embeddings
    generator = torch.Generator().manual_seed(2)
    state_dict = rewrite_weights(
        tmp_path,
        lambda sd: sd.__setitem__(
            "lm_head.weight",
            torch.randn(sd["model.embed_tokens.weight"].shape, generator=generator),
        ),
    )
    hf_loaded = type(hf_model).from_pretrained(tmp_path, attn_implementation="eager").eval()
    assert torch.equal(hf_loaded.lm_head.weight, state_dict["lm_head.weight"])  # not tied
    with pytest.warns(UserWarning) as record:
        model = HookedTransformer.from_pretrained_no_processing(tmp_path)
    message = " ".join(str(warning.message) for warning in record)
    assert (
        "config.json says tie_word_embeddings: true, but its lm_head.weight differs from its "
        "model.embed_tokens.weight; the checkpoint's lm_head.weight is used"
    ) in message
    assert "Set tie_word_embeddings to false in config.json" in message
    with torch.no_grad():
        expected = hf_loaded(tokens()).logits
        assert (model(tokens()) - expected).abs().max() <= _logits_tolerance(expected)


def test_a_tied_config_with_an_equal_lm_head_loads_without_a_warning(tmp_path):
    """A torch .bin checkpoint saves both names of a tied tensor; they are the same values."""
    hf_model = saved(tmp_path, "llama-mha-tied")
    rewrite_weights(
        tmp_path,
        lambda sd: sd.__setitem__("lm_head.weight", sd["model.embed_tokens.weight"].clone()),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = HookedTransformer.from_pretrained_no_processing(tmp_path)
        in_memory = interp.loading.hf.from_hf_model(
            hf_model, tokenizer=None, model_class=HookedTransformer
        )
    with torch.no_grad():
        expected = hf_model(tokens()).logits
        for loaded in (model, in_memory):
            assert (loaded(tokens()) - expected).abs().max() <= _logits_tolerance(expected)


def test_gpt2_with_its_own_lm_head_under_a_tied_config_loads_as_hugging_face_does(tmp_path):
    make_hf_gpt2().save_pretrained(tmp_path)
    generator = torch.Generator().manual_seed(3)
    rewrite_weights(
        tmp_path,
        lambda sd: sd.__setitem__(
            "lm_head.weight", torch.randn(sd["transformer.wte.weight"].shape, generator=generator)
        ),
    )
    hf_loaded = transformers.GPT2LMHeadModel.from_pretrained(tmp_path).eval()
    with pytest.warns(UserWarning, match="its lm_head.weight differs from its wte.weight"):
        model = HookedTransformer.from_pretrained_no_processing(tmp_path)
    with torch.no_grad():
        expected = hf_loaded(tokens()).logits
        assert (model(tokens()) - expected).abs().max() <= _logits_tolerance(expected)


@pytest.mark.parametrize(
    ("case", "embedding"),
    [("gemma2-soft-caps-bite-window-4", "model.embed_tokens.weight"), ("gpt2", None)],
)
def test_tied_embeddings_saved_as_the_lm_head_alone_load_as_hugging_face_does(
    tmp_path, case, embedding
):
    """Hugging Face ties either way round: a checkpoint holding only the lm_head gives it to
    the embedding too."""
    hf_model = make_hf_gpt2() if case == "gpt2" else saved(tmp_path, case)
    if case == "gpt2":
        hf_model.save_pretrained(tmp_path)
        embedding = "transformer.wte.weight"
    rewrite_weights(tmp_path, lambda sd: sd.__setitem__("lm_head.weight", sd.pop(embedding)))
    hf_loaded = type(hf_model).from_pretrained(tmp_path).eval()
    embedded = hf_loaded.get_input_embeddings().weight
    assert torch.equal(embedded, hf_model.get_input_embeddings().weight)  # HF tied them
    model = HookedTransformer.from_pretrained_no_processing(tmp_path)
    with torch.no_grad():
        expected = hf_loaded(tokens()).logits
        assert (model(tokens()) - expected).abs().max() <= _logits_tolerance(expected)


def test_an_untied_config_without_lm_head_is_refused_naming_the_field(tmp_path):
    """Hugging Face would give the model a random unembedding; interp refuses, saying why."""
    saved(tmp_path, "llama-mha-tied")
    edit_config(tmp_path, lambda config: config.update(tie_word_embeddings=False))
    message = load_error(tmp_path)
    assert "missing keys ['lm_head.weight']" in message
    assert "config.json says tie_word_embeddings: false, so the unembedding is its own" in message

    gpt2 = tmp_path / "gpt2"
    make_hf_gpt2().save_pretrained(gpt2)
    edit_config(gpt2, lambda config: config.update(tie_word_embeddings=False))
    message = load_error(gpt2)
    assert "missing keys ['lm_head.weight']" in message
    assert "config.json says tie_word_embeddings: false" in message


# ------------------------------------------------------------------ non-finite weights
def test_non_finite_values_counts_nan_and_infinities_in_every_float_dtype():
    for dtype in MODEL_DTYPES:
        clean = torch.randn(4, 5).to(dtype)
        assert non_finite_values(clean) == ""
        bad = clean.clone()
        bad.view(-1)[[0, 3, 7]] = float("nan")
        bad.view(-1)[9] = -float("inf")
        assert non_finite_values(bad) == "3 NaN values and 1 infinite value"
    assert non_finite_values(torch.tensor([], dtype=torch.float32)) == ""
    assert non_finite_values(torch.tensor([1, 2], dtype=torch.int64)) == ""


def test_nan_and_infinite_weights_are_named_in_one_warning(tmp_path):
    saved(tmp_path, "llama-mha-tied")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a clean checkpoint: no warning
        HookedTransformer.from_pretrained_no_processing(tmp_path)

    def spoil(state_dict):
        state_dict["model.layers.0.mlp.down_proj.weight"].view(-1)[:3] = float("nan")
        state_dict["model.norm.weight"][5] = float("inf")

    rewrite_weights(tmp_path, spoil)
    with pytest.warns(UserWarning) as record:
        model = HookedTransformer.from_pretrained_no_processing(tmp_path)
    (message,) = [str(w.message) for w in record if "not finite" in str(w.message)]
    assert message.startswith(f"The checkpoint in {tmp_path} holds weights that are not finite: ")
    assert "model.layers.0.mlp.down_proj.weight has 3 NaN values" in message
    assert "model.norm.weight has 1 infinite value" in message
    assert "load an earlier checkpoint or download it again" in message
    assert model.blocks[0].mlp.W_out.isnan().sum() == 3  # loaded as the file says

    with pytest.warns(UserWarning, match="blocks.0.mlp.W_out has 3 NaN values"):
        load_native(model.save(tmp_path / "native"), model_class=HookedTransformer)


def test_nan_weights_of_a_nanogpt_checkpoint_are_named():
    checkpoint = train_py_checkpoint(nanogpt_hf())
    checkpoint["model"]["transformer.h.1.attn.c_proj.weight"][0, :2] = float("nan")
    with pytest.warns(UserWarning, match="transformer.h.1.attn.c_proj.weight has 2 NaN values"):
        HookedTransformer.from_nanogpt(checkpoint)


def test_nan_weights_of_a_transformer_lens_state_dict_are_named():
    model = interp.load_model("attn-only-2l")
    state_dict = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    state_dict["blocks.1.attn.W_V"][0, 0, :2] = float("inf")
    with pytest.warns(UserWarning, match="blocks.1.attn.W_V has 2 infinite values"):
        load_transformer_lens_state_dict(state_dict, model.cfg, model_class=HookedTransformer)


# ---------------------------------------------------------------------- tokenizers
@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        ("tokenizer.json", '{"version": "1.0", "model": {', "it is not valid JSON (Expecting"),
        ("tokenizer.json", b"\x80\x81 not text", "it is not UTF-8 text"),
        ("tokenizer.json", '{"version": "1.0"}', "the tokenizers library cannot read it"),
        ("tokenizer_config.json", "[1, 2]", "it holds a JSON list, not an object"),
    ],
)
def test_a_corrupt_tokenizer_file_is_named_with_what_is_wrong(tmp_path, name, content, problem):
    saved(tmp_path, "llama-mha-tied")
    write_tokenizer(tmp_path)
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ValueError) as error:
        HookedTransformer.from_pretrained_no_processing(tmp_path)
    message = str(error.value)
    assert message.startswith(f"{path} is not a valid tokenizer file: {problem}")
    assert "or pass tokenizer= to load the model with another tokenizer" in message
    HookedTransformer.from_pretrained_no_processing(tmp_path, tokenizer="gpt2")  # the way out


# ------------------------------------------------------------------------ nanoGPT
@pytest.mark.parametrize("key", ["transformer.wte.weight", "transformer.wpe.weight"])
def test_a_nanogpt_embedding_that_is_not_2d_is_named(key):
    checkpoint = train_py_checkpoint(nanogpt_hf())
    checkpoint["model"][key] = checkpoint["model"][key][0]  # 1-D: [n_embd]
    with pytest.raises(CheckpointError) as error:
        HookedTransformer.from_nanogpt(checkpoint)
    assert str(error.value).startswith(
        f"The nanoGPT checkpoint: {key} is (64,), but an embedding is a 2-D [rows, n_embd] tensor"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (dict(n_embd="64"), "model_args 'n_embd' (d_model) is '64'; it must be a positive integer"),
        (dict(n_head=0), "model_args 'n_head' (the number of heads) is 0"),
        (dict(n_head=3), "model_args n_embd=64 is not divisible by n_head=3"),
        (dict(bias="yes"), "model_args 'bias' is 'yes'; it must be true or false"),
    ],
)
def test_bad_nanogpt_model_args_are_named(args, message):
    checkpoint = train_py_checkpoint(nanogpt_hf())
    checkpoint["model_args"] |= args
    with pytest.raises(CheckpointError, match=message.replace("(", r"\(").replace(")", r"\)")):
        HookedTransformer.from_nanogpt(checkpoint)


# -------------------------------------------------------------------------- dtypes
BAD_DTYPES = [torch.int8, "int64", torch.bool, torch.complex64, "float8_e4m3fn"]
ALLOWED = "use one of float32, float16, bfloat16, float64"


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("gpt2")
    make_hf_gpt2().save_pretrained(folder)
    return folder


def _loaders(folder: Path):
    return {
        "load_model": lambda dtype: interp.load_model("attn-only-2l", dtype=dtype),
        "from_pretrained": lambda dtype: HookedTransformer.from_pretrained(folder, dtype=dtype),
        "from_pretrained_no_processing": lambda dtype: (
            HookedTransformer.from_pretrained_no_processing(folder, dtype=dtype)
        ),
        "from_pretrained(hf_model=)": lambda dtype: HookedTransformer.from_pretrained(
            "gpt2", hf_model=make_hf_gpt2(), dtype=dtype
        ),
        "from_nanogpt": lambda dtype: HookedTransformer.from_nanogpt(
            train_py_checkpoint(nanogpt_hf()), dtype=dtype
        ),
    }


@pytest.mark.parametrize("loader", list(_loaders(Path())))
@pytest.mark.parametrize("dtype", BAD_DTYPES, ids=str)
def test_a_dtype_a_model_cannot_compute_in_is_named_with_the_allowed_ones(
    gpt2_folder, loader, dtype
):
    with pytest.raises(ValueError) as error:
        _loaders(gpt2_folder)[loader](dtype)
    shown = repr(dtype) if isinstance(dtype, str) else str(dtype)
    assert str(error.value).startswith(
        f"dtype={shown} is not a dtype a model can compute in; {ALLOWED}"
    )


def test_a_dtype_that_is_no_dtype_is_a_type_error(gpt2_folder):
    for loader in _loaders(gpt2_folder).values():
        with pytest.raises(TypeError, match=r"dtype=5 \(of type int\) is not a torch dtype"):
            loader(5)


def test_an_in_memory_model_with_integer_weights_is_refused_naming_their_dtype():
    hf_model = make_hf_gpt2()
    quantized = hf_model.transformer.wte.weight.detach().to(torch.int8)
    hf_model.transformer.wte.weight = torch.nn.Parameter(quantized, requires_grad=False)
    with pytest.raises(ValueError, match=r"The Hugging Face model's weights are torch\.int8"):
        HookedTransformer.from_pretrained("gpt2", hf_model=hf_model)


def test_an_interp_folder_saved_with_a_bad_dtype_names_its_config(tmp_path):
    folder = interp.load_model("attn-only-2l").save(tmp_path / "model")
    config_path = edit_config(folder, lambda config: config.update(dtype="int8"))
    with pytest.raises(CheckpointError) as error:
        load_native(folder, model_class=HookedTransformer)
    assert str(error.value).startswith(
        f"{config_path} is not a valid config: field 'dtype' (torch.int8) is not a dtype a "
        f"model can compute in; {ALLOWED}"
    )


# --------------------------------------------------------------- config.json fields
@pytest.mark.parametrize(
    ("case", "edit", "message"),
    [
        (
            "llama-mha-tied",
            dict(attention_bias="false"),
            "field 'attention_bias' is 'false'; it must be true or false.",
        ),
        (
            "llama-mha-tied",
            dict(tie_word_embeddings="no"),
            "field 'tie_word_embeddings' is 'no'",
        ),
        (
            "neox-parallel-partial-rotary",
            dict(use_parallel_residual="false"),
            "field 'use_parallel_residual' is 'false'",
        ),
        (
            "qwen2-window-on-layer-1",
            dict(max_window_layers="1"),
            "field 'max_window_layers' is '1'; it must be a layer index",
        ),
        (
            "gemma2-untied-mha",
            dict(final_logit_softcapping="4"),
            "field 'final_logit_softcapping' is '4'; it must be a positive number or null.",
        ),
        (
            "gemma3-multimodal-text-part",
            dict(text_config="gemma3_text"),
            "field 'text_config' is 'gemma3_text'; it must be a JSON object",
        ),
    ],
)
def test_a_mistyped_config_field_is_named(tmp_path, case, edit, message):
    saved(tmp_path, case)
    config_path = edit_config(tmp_path, lambda config: config.update(edit))
    text = load_error(tmp_path)
    assert text.startswith(f"{config_path} is not a valid ") and message in text


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (dict(tie_word_embeddings="false"), "field 'tie_word_embeddings' is 'false'"),
        (dict(scale_attn_weights="no"), "field 'scale_attn_weights' is 'no'"),
        (dict(n_inner="256"), "field 'n_inner' is '256'; it must be a positive integer."),
        (dict(layer_norm_epsilon="1e-5"), "field 'layer_norm_epsilon' is '1e-5'; it must be a"),
        (dict(activation_function="swiglu"), "field 'activation_function' is 'swiglu'; interp"),
    ],
)
def test_a_mistyped_gpt2_config_field_is_named(gpt2_folder, tmp_path, edit, message):
    for path in gpt2_folder.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    config_path = edit_config(tmp_path, lambda config: config.update(edit))
    text = load_error(tmp_path)
    assert text.startswith(f"{config_path} is not a valid GPT-2 config: {message}")


@pytest.mark.parametrize(
    ("case", "edit", "message"),
    [
        ("llama-mha-tied", dict(rms_norm_eps=None), "field 'rms_norm_eps' is None; it must be"),
        ("neox-parallel-partial-rotary", dict(layer_norm_eps="small"), "'layer_norm_eps' is"),
        ("llama-mha-tied", dict(hidden_act="swish"), "field 'hidden_act' is 'swish'; interp"),
        ("gemma2-untied-mha", dict(hidden_activation="gelu_tanh"), "field 'hidden_activation'"),
    ],
)
def test_a_family_field_read_under_another_name_is_named_as_config_json_has_it(
    tmp_path, case, edit, message
):
    saved(tmp_path, case)
    edit_config(tmp_path, lambda config: config.update(edit))
    assert message in load_error(tmp_path)


def test_a_neox_rotary_fraction_out_of_range_is_named(tmp_path):
    saved(tmp_path, "neox-parallel-partial-rotary")
    edit_config(tmp_path, lambda config: config["rope_parameters"].update(partial_rotary_factor=2))
    assert "field 'rope_parameters.partial_rotary_factor' is 2; it must be a number in (0, 1]" in (
        load_error(tmp_path)
    )


def test_architectures_that_are_not_a_list_are_named(tmp_path):
    saved(tmp_path, "llama-mha-tied")
    edit_config(tmp_path, lambda config: config.update(architectures="LlamaForCausalLM"))
    with pytest.raises(ValueError, match="field 'architectures' of config.json is 'LlamaFor"):
        HookedTransformer.from_pretrained_no_processing(tmp_path)


# ------------------------------------------------------------------ prompt length
def test_a_prompt_longer_than_the_context_is_refused_not_cut(tmp_path):
    model = interp.load_model("attn-only-2l")
    n_ctx = model.cfg.n_ctx
    fits = " ".join(["7"] * (n_ctx - 1))  # BOS + n_ctx - 1 symbols
    assert prompt_tokens(model, fits).shape == (1, n_ctx)
    too_long = fits + " 8"
    with pytest.raises(ValueError) as error:
        analyse_prompt(model, too_long)
    assert str(error.value) == (
        f"The prompt is {n_ctx + 1} tokens, longer than the context of attn-only-2l "
        f"(n_ctx={n_ctx}); shorten it to at most {n_ctx} tokens (a BOS token included)."
    )
    with pytest.raises(ValueError, match=f"The corrupted prompt is {n_ctx + 1} tokens"):
        analyse_prompt(model, fits, corrupted_prompt=too_long)


def test_interp_report_with_a_prompt_longer_than_the_context_is_a_usage_error(tmp_path, capsys):
    from interp.cli import main

    model = interp.load_model("attn-only-2l")
    prompt = " ".join(["7"] * model.cfg.n_ctx)
    out = tmp_path / "r.html"
    with pytest.raises(SystemExit) as exit_info:
        main(["report", "--model", "attn-only-2l", "--prompt", prompt, "--out", str(out)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: interp report")
    assert f"is {model.cfg.n_ctx + 1} tokens, longer than the context of attn-only-2l" in err
    assert not out.exists()


def test_a_model_object_instead_of_a_name_is_a_type_error_naming_hf_model():
    hf_model = make_hf_gpt2()
    calls = [
        lambda: HookedTransformer.from_pretrained(hf_model),
        lambda: HookedTransformer.from_pretrained_no_processing(hf_model),
        lambda: get_pretrained_state_dict(hf_model, None),
    ]
    for call in calls:  # not "File name too long": the object's repr read as a path
        with pytest.raises(TypeError, match=r"a model name .* or a folder path.*hf_model="):
            call()
    with pytest.raises(TypeError, match=r"load_model takes a shipped model's name.*hf_model="):
        interp.load_model(hf_model)


def test_a_gpt2_folder_whose_vocabulary_is_not_gpt2s_gets_no_tokenizer(tmp_path):
    hf_model = make_hf_gpt2(vocab_size=97)
    hf_model.save_pretrained(tmp_path)  # no tokenizer files
    with pytest.warns(UserWarning, match=r"97-token vocabulary is not GPT-2's.*no tokenizer"):
        model = HookedTransformer.from_pretrained_no_processing(str(tmp_path))
    assert model.tokenizer is None and model.cfg.tokenizer_name is None
    in_memory = HookedTransformer.from_pretrained_no_processing("gpt2", hf_model=hf_model)
    assert in_memory.tokenizer is None
    tokens = torch.tensor([[0, 5, 96]])
    with torch.no_grad():
        expected = hf_model(tokens).logits
        torch.testing.assert_close(model(tokens), expected, **model_tolerance(model.cfg, expected))
    for text_call in (lambda: model("ROMEO:"), lambda: model.to_tokens("ROMEO:")):
        with pytest.raises(ValueError, match=r"no tokenizer.*token ids \(0\.\.96\).*tokenizer="):
            text_call()
