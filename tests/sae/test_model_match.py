"""A dictionary (SAE, transcoder set) whose config names another model is never spliced
silently: ``add_sae``, ``HookedSAETransformer``, ``ReplacementModel`` and the command line
refuse it with an error naming both models and the override, and leave the model as it was;
equivalent names (aliases, hub ids) and unnamed models or dictionaries are not refused."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
import torch
import yaml

import interp
from interp import HookedTransformer, HookedTransformerConfig
from interp.circuits import ReplacementModel, TranscoderSet, load_transcoders
from interp.cli import main
from interp.loading.model_names import canonical_model_name, stated_model_name
from interp.sae import SAE, HookedSAETransformer, SAEConfig
from interp.sae.model_match import ModelMismatchError, belongs_to, same_model
from tests.circuits.test_circuits import (
    assert_unchanged,
    model_state,
    tiny_clt,
    tiny_model,
    tiny_transcoders,
)
from tests.conftest import make_hf_gpt2, make_hf_gpt2_tokenizer
from tests.support.hub_cache import hub_cache  # noqa: F401 (a fixture)

SHIPPED_SAE = "shakespeare-char-resid-l1"  # trained on shakespeare-char
SHIPPED_TRANSCODERS = "shakespeare-char-transcoders"  # trained on shakespeare-char
RESID = "blocks.1.hook_resid_post"
OVERRIDES = ("allow_model_mismatch=True", "--allow-model-mismatch")


def named_sae(model_name: str | None, d_in: int = 64, hook: str = RESID) -> SAE:
    torch.manual_seed(0)
    sae = SAE(SAEConfig(d_in=d_in, d_sae=2 * d_in, hook_name=hook, model_name=model_name))
    with torch.no_grad():
        for param in sae.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    return sae


def splice_state(model) -> dict:
    """What splicing may change: the module at each hook point, the hooks attached there."""
    return {
        name: (type(point), len(point.fwd_hooks), len(point.bwd_hooks))
        for name, point in model.hook_dict.items()
    }


def other_char_model(name: str = "other-char-4x128") -> HookedTransformer:
    """A model of shakespeare-char's shape and tokenizer (4 layers, d_model 128), other weights."""
    shipped = interp.load_model("shakespeare-char")
    fields = {
        key: getattr(shipped.cfg, key)
        for key in ("n_layers", "d_model", "n_ctx", "n_heads", "d_head", "d_mlp", "d_vocab")
    }
    fields.update(act_fn="gelu", normalization_type="LN", model_name=name, seed=1)
    return HookedTransformer(HookedTransformerConfig(**fields), tokenizer=shipped.tokenizer)


def assert_names_both_models_and_the_override(message: str, dictionary: str, model: str) -> None:
    assert f"trained on model {dictionary!r}" in message and f"this model is {model!r}" in message
    assert all(override in message for override in OVERRIDES)


# ------------------------------------------------------------------------ names
@pytest.mark.parametrize(
    "first, second",
    [
        ("gpt2-small", "gpt2"),  # TransformerLens alias
        ("openai-community/gpt2", "gpt2"),  # the hub's id, as the hub now names GPT-2
        ("GPT2-Small", "openai-community/gpt2"),
        ("meta-llama/Llama-3.2-1B", "Llama-3.2-1B"),  # TL names the loaded model without owner
        ("EleutherAI/pythia-19m", "pythia-70m"),  # Pythia's names before the size fix
        ("attn-only-2l", "Attn_Only_2L512W_C4_Code"),
        ("google/gemma-2-2b", "gemma-2-2b"),
    ],
)
def test_equivalent_names_name_the_same_model(first, second):
    assert same_model(first, second) and same_model(second, first)
    assert canonical_model_name(first) == canonical_model_name(second)


@pytest.mark.parametrize(
    "first, second",
    [
        ("gpt2", "gpt2-medium"),
        ("shakespeare-char", "attn-only-2l"),
        ("pythia-70m", "pythia-70m-deduped"),
        ("gemma-2-2b", "gemma-2-2b-it"),
        ("Llama-3.2-1B", "Llama-3.2-1B-Instruct"),
    ],
)
def test_different_models_are_different(first, second):
    assert not same_model(first, second)


def test_what_name_a_model_states(tmp_path):
    assert stated_model_name(interp.load_model("shakespeare-char").cfg) == "shakespeare-char"
    assert stated_model_name(tiny_model("gpt2").cfg) is None  # built in code: "custom"
    other_char_model().save(tmp_path / "native")  # a folder's config.json names it
    native = HookedTransformer.from_pretrained_no_processing(str(tmp_path / "native"))
    assert stated_model_name(native.cfg) == "other-char-4x128"


def test_a_hugging_face_folder_is_named_by_its_config_else_names_nothing(tmp_path):
    tokenizer = make_hf_gpt2_tokenizer()
    make_hf_gpt2().save_pretrained(tmp_path / "my-gpt2")  # transformers 5 writes no name
    unnamed = HookedTransformer.from_pretrained_no_processing(
        str(tmp_path / "my-gpt2"), tokenizer=tokenizer
    )
    assert unnamed.cfg.model_name == "my-gpt2"  # shown as the folder, as before
    assert stated_model_name(unnamed.cfg) is None  # but the folder's name states nothing
    config = json.loads((tmp_path / "my-gpt2" / "config.json").read_text())
    config["_name_or_path"] = "openai-community/gpt2"  # what transformers 4 wrote
    (tmp_path / "my-gpt2" / "config.json").write_text(json.dumps(config))
    named = HookedTransformer.from_pretrained_no_processing(
        str(tmp_path / "my-gpt2"), tokenizer=tokenizer
    )
    assert stated_model_name(named.cfg) == "openai-community/gpt2"
    assert belongs_to(named_sae("gpt2-small"), named) is True
    assert belongs_to(named_sae("gpt2-medium"), named) is False
    assert belongs_to(named_sae("gpt2-medium"), unnamed) is None


def test_a_model_from_the_hub_is_named_after_its_repository(tmp_path, hub_cache):  # noqa: F811
    make_hf_gpt2().save_pretrained(tmp_path / "snapshot")
    files = {name: tmp_path / "snapshot" / name for name in ("config.json", "model.safetensors")}
    hub_cache.add("openai-community/gpt2", files)
    model = HookedTransformer.from_pretrained_no_processing(
        "openai-community/gpt2", tokenizer=make_hf_gpt2_tokenizer()
    )
    assert model.cfg.model_name == "gpt2"  # as TransformerLens names it, not the snapshot's hash
    assert stated_model_name(model.cfg) == "gpt2"


def test_a_transformer_lens_folder_is_named_by_its_repo_or_config(tmp_path, hub_cache):  # noqa: F811
    import shutil
    import warnings

    toy = Path(__file__).parents[1] / "tl218_reference" / "api" / "toy" / "attn-only-2l"
    shutil.copytree(toy, tmp_path / "my-toy")
    hub_cache.add("NeelNanda/Attn_Only_2L512W_C4_Code", {f.name: f for f in toy.iterdir()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no tokenizer cached: said elsewhere
        local = HookedTransformer.from_pretrained_no_processing(str(tmp_path / "my-toy"))
        hub = HookedTransformer.from_pretrained_no_processing("attn-only-2l")
        config = json.loads((tmp_path / "my-toy" / "config.json").read_text())
        config["model_name"] = "attn-only-2l"
        (tmp_path / "my-toy" / "config.json").write_text(json.dumps(config))
        named = HookedTransformer.from_pretrained_no_processing(str(tmp_path / "my-toy"))
    assert local.cfg.model_name == "my-toy" and stated_model_name(local.cfg) is None
    assert stated_model_name(hub.cfg) == "Attn_Only_2L512W_C4_Code"
    assert stated_model_name(named.cfg) == "attn-only-2l"
    assert same_model(stated_model_name(named.cfg), stated_model_name(hub.cfg))


def test_models_built_in_memory_or_from_nanogpt_state_no_name(tmp_path):
    from interp.loading.hf import from_hf_model
    from tests.loading.test_loading_nanogpt import nanogpt_hf, train_py_checkpoint

    assert stated_model_name(from_hf_model(make_hf_gpt2(), tokenizer=None).cfg) is None
    torch.save(train_py_checkpoint(nanogpt_hf()), tmp_path / "ckpt.pt")
    nanogpt = HookedTransformer.from_nanogpt(tmp_path / "ckpt.pt")
    assert nanogpt.cfg.model_name == "ckpt" and stated_model_name(nanogpt.cfg) is None


# ---------------------------------------------------------------------- add_sae
def test_add_sae_refuses_an_sae_for_another_model_and_leaves_the_model():
    model = HookedSAETransformer.from_model(interp.load_model("attn-only-2l")).eval()
    tokens = model.to_tokens("1 2 3 4 5 6 7 8 9 10 11 12")
    seen = []
    model.add_hook(RESID, lambda act, hook: seen.append(act.shape))
    before, logits = splice_state(model), model(tokens)
    sae = interp.load_sae(SHIPPED_SAE)  # same width (128), same hook, another model
    assert sae.cfg.d_in == model.cfg.d_model
    with pytest.raises(ModelMismatchError) as error:
        model.add_sae(sae)
    assert_names_both_models_and_the_override(str(error.value), "shakespeare-char", "attn-only-2l")
    assert splice_state(model) == before and model.acts_to_saes == {}
    torch.testing.assert_close(model(tokens), logits, rtol=0, atol=0)
    with pytest.raises(TypeError, match="allow_model_mismatch takes True or False"):
        model.add_sae(sae, allow_model_mismatch="yes")
    assert splice_state(model) == before
    model.add_sae(sae, allow_model_mismatch=True)  # the override splices it
    assert list(model.acts_to_saes) == [RESID]
    assert not torch.equal(model(tokens), logits)
    model.reset_saes()
    assert splice_state(model) == before
    model.reset_hooks()


def test_add_sae_takes_an_sae_for_the_model_under_any_of_its_names(tmp_path):
    shakespeare = HookedSAETransformer.from_model(interp.load_model("shakespeare-char"))
    shakespeare.add_sae(interp.load_sae(SHIPPED_SAE))  # the pair it was trained as
    assert list(shakespeare.acts_to_saes) == [RESID]
    make_hf_gpt2().save_pretrained(tmp_path / "gpt2")
    config = json.loads((tmp_path / "gpt2" / "config.json").read_text())
    config["_name_or_path"] = "openai-community/gpt2"
    (tmp_path / "gpt2" / "config.json").write_text(json.dumps(config))
    gpt2 = HookedSAETransformer.from_pretrained_no_processing(
        str(tmp_path / "gpt2"), tokenizer=make_hf_gpt2_tokenizer()
    )
    for name in ("gpt2-small", "gpt2", "openai-community/gpt2", None):
        gpt2.add_sae(named_sae(name))  # replaces the one before at the same hook
        assert gpt2.acts_to_saes[RESID].cfg.model_name == name
    with pytest.raises(ModelMismatchError, match="'gpt2-medium'"):
        gpt2.add_sae(named_sae("gpt2-medium"))
    assert gpt2.acts_to_saes[RESID].cfg.model_name is None  # the last one good stays
    cfg = HookedTransformerConfig(n_layers=2, d_model=64, n_heads=4, d_vocab=1000, n_ctx=64)
    unnamed = HookedSAETransformer.from_model(HookedTransformer(cfg))
    unnamed.add_sae(named_sae("gpt2-medium"))  # a model that names none: nothing refused
    assert list(unnamed.acts_to_saes) == [RESID]


# --------------------------------------------------------- HookedSAETransformer
def test_hooked_sae_transformer_runs_refuse_it_and_restore_the_model():
    model = HookedSAETransformer.from_model(interp.load_model("attn-only-2l")).eval()
    tokens = model.to_tokens("1 2 3 4 5 6 7 8 9 10 11 12")
    foreign = interp.load_sae(SHIPPED_SAE)
    own = named_sae("attn-only-2l", d_in=128, hook="blocks.0.hook_resid_post")
    before, logits = splice_state(model), model(tokens)
    with pytest.raises(ModelMismatchError) as error:
        with model.saes([own, foreign]):  # the first splices, the second is refused
            pass
    assert_names_both_models_and_the_override(str(error.value), "shakespeare-char", "attn-only-2l")
    assert splice_state(model) == before and model.acts_to_saes == {}
    runs = (model.run_with_saes, model.run_with_cache_with_saes, model.run_with_hooks_with_saes)
    for run in runs:
        with pytest.raises(ModelMismatchError):
            run(tokens, saes=[foreign])
        assert splice_state(model) == before
    torch.testing.assert_close(model(tokens), logits, rtol=0, atol=0)
    allowed = model.run_with_saes(tokens, saes=[foreign], allow_model_mismatch=True)
    _, cache = model.run_with_cache_with_saes(tokens, saes=[foreign], allow_model_mismatch=True)
    hooked = model.run_with_hooks_with_saes(tokens, saes=[foreign], allow_model_mismatch=True)
    model.add_sae(foreign, allow_model_mismatch=True)
    spliced = model(tokens)
    model.reset_saes()
    for got in (allowed, hooked):
        torch.testing.assert_close(got, spliced, rtol=0, atol=0)
    assert f"{RESID}.hook_sae_acts_post" in cache
    assert splice_state(model) == before


def test_a_context_restores_an_sae_it_replaced_even_if_that_one_was_allowed():
    model = HookedSAETransformer.from_model(interp.load_model("attn-only-2l"))
    foreign = interp.load_sae(SHIPPED_SAE)
    model.add_sae(foreign, allow_model_mismatch=True)
    with model.saes([named_sae(None, d_in=128)]):
        assert model.acts_to_saes[RESID] is not foreign
    assert model.acts_to_saes[RESID] is foreign  # put back without a second refusal
    model.reset_saes()


# ------------------------------------------------------------- ReplacementModel
def test_replacement_model_refuses_transcoders_for_another_model():
    model = other_char_model()
    tokens = model.to_tokens("ROMEO: O, she doth teach")
    hooks = sum(len(p.fwd_hooks) for p in model.hook_dict.values())
    logits = model(tokens)
    transcoders = load_transcoders(SHIPPED_TRANSCODERS)
    assert transcoders.model_name == "shakespeare-char"
    for make in (
        lambda **kw: ReplacementModel.from_model(model, SHIPPED_TRANSCODERS, **kw),
        lambda **kw: ReplacementModel.from_model(model, transcoders, **kw),
        lambda **kw: ReplacementModel(model, transcoders, **kw),
    ):
        with pytest.raises(ModelMismatchError) as error:
            make()
        message = str(error.value)
        assert_names_both_models_and_the_override(message, "shakespeare-char", "other-char-4x128")
        assert repr(SHIPPED_TRANSCODERS) in message  # which transcoders
        assert sum(len(p.fwd_hooks) for p in model.hook_dict.values()) == hooks
        torch.testing.assert_close(model(tokens), logits, rtol=0, atol=0)
        assert make(allow_model_mismatch=True).transcoders.model_name == "shakespeare-char"
    ReplacementModel.from_model(interp.load_model("shakespeare-char"), transcoders)  # its own


def test_replacement_model_from_pretrained_checks_both_ways(tmp_path):
    other_char_model().save(tmp_path / "other")
    with pytest.raises(ModelMismatchError) as error:
        ReplacementModel.from_pretrained(str(tmp_path / "other"), SHIPPED_TRANSCODERS)
    assert_names_both_models_and_the_override(
        str(error.value), "shakespeare-char", "other-char-4x128"
    )
    allowed = ReplacementModel.from_pretrained(
        str(tmp_path / "other"), SHIPPED_TRANSCODERS, allow_model_mismatch=True
    )
    assert allowed.model.cfg.model_name == "other-char-4x128"
    renamed = load_transcoders(SHIPPED_TRANSCODERS)
    renamed.model_name = "attn-only-2l"
    renamed.save(tmp_path / "renamed")  # written with the model it names
    assert yaml.safe_load((tmp_path / "renamed" / "config.yaml").read_text())["model_name"] == (
        "attn-only-2l"
    )
    with pytest.raises(ModelMismatchError, match="trained on model 'attn-only-2l'"):
        ReplacementModel.from_pretrained("shakespeare-char", str(tmp_path / "renamed"))
    with pytest.raises(ModelMismatchError, match="this model is 'shakespeare-char'"):
        ReplacementModel.from_pretrained_and_transcoders(
            "shakespeare-char", load_transcoders(tmp_path / "renamed")
        )
    ReplacementModel.from_pretrained("shakespeare-char", SHIPPED_TRANSCODERS)  # the right pair


@pytest.mark.parametrize("kind", ["set", "clt"])
def test_replacement_model_check_leaves_a_model_unchanged(kind):
    model = tiny_model("gpt2")
    model.cfg.model_name = "pythia-70m"
    before = model_state(model)
    transcoders = tiny_transcoders("gpt2", skip=True) if kind == "set" else tiny_clt("gpt2", True)
    transcoders.model_name = "gpt2"
    with pytest.raises(ModelMismatchError, match="trained on model 'gpt2'"):
        ReplacementModel.from_model(model, transcoders)
    assert_unchanged(model, before)
    model.cfg.model_name = "EleutherAI/pythia-19m"  # pythia-70m's old name: the same model
    transcoders.model_name = "pythia-70m"
    ReplacementModel.from_model(model, transcoders)
    transcoders.model_name = None  # names no model: nothing refused
    model.cfg.model_name = "gpt2"
    ReplacementModel.from_model(model, transcoders)


# ------------------------------------------------------------------ the writers
def test_transcoder_sets_record_the_model_they_were_trained_on(tmp_path):
    from dataclasses import replace

    folder = Path(str(resources.files("interp.models"))) / "transcoders" / SHIPPED_TRANSCODERS
    shipped = yaml.safe_load((folder / "config.yaml").read_text())
    assert shipped["model_name"] == "shakespeare-char"
    saes = list(tiny_transcoders("gpt2", skip=True))
    for sae in saes:
        sae.cfg = replace(sae.cfg, model_name="gpt2-small")
    tcs = TranscoderSet.from_saes(saes)  # from the transcoders' own configs
    assert tcs.model_name == "gpt2-small"
    tcs.save(tmp_path / "tc")
    assert yaml.safe_load((tmp_path / "tc" / "config.yaml").read_text())["model_name"] == (
        "gpt2-small"
    )
    loaded = load_transcoders(tmp_path / "tc")
    assert loaded.model_name == "gpt2-small"
    assert all(t.cfg.model_name == "gpt2-small" for t in loaded)  # each layer's too
    saes[1].cfg = replace(saes[1].cfg, model_name="pythia-70m")
    with pytest.raises(ValueError, match="trained on different models"):
        TranscoderSet.from_saes(saes)
    unnamed = tiny_transcoders("gpt2", skip=True)
    assert unnamed.model_name is None
    unnamed.save(tmp_path / "unnamed")
    assert "model_name" not in yaml.safe_load((tmp_path / "unnamed" / "config.yaml").read_text())
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.yaml").write_text(
        (tmp_path / "tc" / "config.yaml").read_text().replace("gpt2-small", "[1, 2]")
    )
    for layer in range(2):
        (tmp_path / "bad" / f"layer_{layer}.safetensors").write_bytes(
            (tmp_path / "tc" / f"layer_{layer}.safetensors").read_bytes()
        )
    with pytest.raises(ValueError, match="model_name \\[1, 2\\] is not a model's name"):
        load_transcoders(tmp_path / "bad")


def test_the_transcoder_trainer_records_its_model(tmp_path):
    from interp.circuits.train_transcoders import TranscoderRecipe, _jumprelu, _new_transcoder

    recipe = TranscoderRecipe()
    layers = [_jumprelu(_new_transcoder(layer, 128, recipe), 0.1) for layer in range(4)]
    written = TranscoderSet(layers, "mlp.hook_in", "mlp.hook_out").save(tmp_path / "tc")
    config = yaml.safe_load((written / "config.yaml").read_text())
    assert config["model_name"] == recipe.model == "shakespeare-char"


# ------------------------------------------------------------------ command line
def test_interp_report_refuses_an_sae_for_another_model(tmp_path, capsys):
    out = tmp_path / "report.html"
    argv = ["report", "--model", "attn-only-2l", "--prompt", "1 2 3 4 5 6 7 8 9 10 11 12",
            "--out", str(out), "--sae", SHIPPED_SAE]  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert_names_both_models_and_the_override(
        capsys.readouterr().err, "shakespeare-char", "attn-only-2l"
    )
    assert not out.exists()
    assert main([*argv, "--allow-model-mismatch"]) == 0
    assert "<section id='sae'>" in out.read_text()


def test_interp_features_refuses_an_sae_for_another_model(tmp_path, capsys):
    data = tmp_path / "data.txt"
    data.write_text("1 2 3 4 5 6 7 8 9 10 11 12 " * 40)
    out = tmp_path / "pages"
    argv = ["features", "--model", "attn-only-2l", "--sae", SHIPPED_SAE, "--data", str(data),
            "--out", str(out), "--n-features", "2", "--k", "2"]  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2 and "--allow-model-mismatch" in capsys.readouterr().err
    assert not out.exists()
    assert main([*argv, "--allow-model-mismatch"]) == 0


def test_interp_graph_refuses_transcoders_for_another_model(tmp_path, capsys):
    other_char_model().save(tmp_path / "other")
    out = tmp_path / "graph.html"
    argv = ["graph", "--model", str(tmp_path / "other"), "--transcoders", SHIPPED_TRANSCODERS,
            "--prompt", "ROMEO: O", "--out", str(out), "--max-feature-nodes", "16",
            "--batch-size", "64"]  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert_names_both_models_and_the_override(
        capsys.readouterr().err, "shakespeare-char", "other-char-4x128"
    )
    assert not out.exists()
    assert main([*argv, "--allow-model-mismatch"]) == 0
    assert "graph written to" in capsys.readouterr().out


def test_interp_serve_attaches_an_sae_by_the_same_rule():
    from interp.cli.support import UsageError
    from interp.serve.cli import attach_saes

    attn, char = interp.load_model("attn-only-2l"), interp.load_model("shakespeare-char")
    with pytest.raises(UsageError) as error:
        attach_saes({"attn-only-2l": attn}, [SHIPPED_SAE])
    assert_names_both_models_and_the_override(str(error.value), "shakespeare-char", "attn-only-2l")
    allowed = attach_saes({"attn-only-2l": attn}, [SHIPPED_SAE], allow_model_mismatch=True)
    assert list(allowed) == ["attn-only-2l"]
    both = attach_saes({"attn-only-2l": attn, "shakespeare-char": char}, [SHIPPED_SAE])
    assert list(both) == ["shakespeare-char"]  # the one it names, of the two
