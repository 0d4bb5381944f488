"""Write the SAELens fixtures that tests/sae/test_sae_saelens_parity.py compares against.

Run in an environment with SAELens (it pins TransformerLens < 4, so not interp's):

    python3 -m venv /tmp/saelens-venv
    /tmp/saelens-venv/bin/pip install torch==2.13.0 sae-lens==6.45.3
    /tmp/saelens-venv/bin/python tests/sae_reference/make_fixtures.py

For each architecture it saves a random SAE (d_in 16, d_sae 32) with SAELens's
``save_model`` into ``saes/<architecture>/`` and, in ``expected.safetensors``, an input and
SAELens's ``encode``, ``decode`` and ``forward`` outputs (its metadata: the SAE's class and
``get_name()``); for the architectures SAELens can fold, ``folded.safetensors`` holds the
parameters after ``fold_W_dec_norm`` and ``encode`` of the same input after it. It also
writes a tiny random GPT-2 (``gpt2/``, a Hugging Face folder) and the logits of SAELens's
``HookedSAETransformer`` with a standard SAE spliced at ``blocks.1.hook_resid_post``, with
and without the error term, and with a hook_z SAE on ``blocks.0.attn.hook_z``.
"""

import copy
from pathlib import Path

import sae_lens
import torch
import transformers
from sae_lens import SAE, HookedSAETransformer
from sae_lens.saes.gated_sae import GatedSAE, GatedSAEConfig
from sae_lens.saes.jumprelu_sae import JumpReLUSAE, JumpReLUSAEConfig
from sae_lens.saes.standard_sae import StandardSAE, StandardSAEConfig
from sae_lens.saes.topk_sae import TopKSAE, TopKSAEConfig
from sae_lens.saes.transcoder import (
    JumpReLUSkipTranscoder,
    JumpReLUSkipTranscoderConfig,
    JumpReLUTranscoder,
    JumpReLUTranscoderConfig,
    SkipTranscoder,
    SkipTranscoderConfig,
    Transcoder,
    TranscoderConfig,
)
from safetensors.torch import save_file

HERE = Path(__file__).parent
D_IN, D_SAE = 16, 32
META = {"hook_name": "blocks.0.hook_resid_post", "model_name": "tiny"}
TRANSCODER_META = {"hook_name": "blocks.0.hook_resid_mid", "hook_name_out": "blocks.0.hook_mlp_out"}
HOOK_Z_META = {"hook_name": "blocks.0.attn.hook_z", "model_name": "tiny"}
# What SAELens 6.45.3's fold_W_dec_norm accepts (TopK only when ranking by decoder norm).
FOLDABLE = {"standard", "jumprelu", "gated", "topk_rescaled", "transcoder", "jumprelu_transcoder"}


def randomise(sae: SAE) -> SAE:
    """Every parameter random (thresholds small and positive), so each path is exercised."""
    with torch.no_grad():
        for name, param in sae.named_parameters():
            if name == "threshold":
                param.copy_(torch.rand_like(param) * 0.5)
            else:
                param.copy_(torch.randn_like(param) * (0.1 if name.startswith("b_") else 0.5))
    return sae


def specs():
    yield "standard", StandardSAE(StandardSAEConfig(d_in=D_IN, d_sae=D_SAE))
    yield (
        "standard_no_b_dec_in",
        StandardSAE(StandardSAEConfig(d_in=D_IN, d_sae=D_SAE, apply_b_dec_to_input=False)),
    )
    yield (
        "constant_norm_rescale",
        StandardSAE(
            StandardSAEConfig(d_in=D_IN, d_sae=D_SAE, normalize_activations="constant_norm_rescale")
        ),
    )
    yield (
        "layer_norm",
        StandardSAE(StandardSAEConfig(d_in=D_IN, d_sae=D_SAE, normalize_activations="layer_norm")),
    )
    yield "jumprelu", JumpReLUSAE(JumpReLUSAEConfig(d_in=D_IN, d_sae=D_SAE))
    yield "topk", TopKSAE(TopKSAEConfig(d_in=D_IN, d_sae=D_SAE, k=5))
    yield (
        "topk_rescaled",
        TopKSAE(TopKSAEConfig(d_in=D_IN, d_sae=D_SAE, k=5, rescale_acts_by_decoder_norm=True)),
    )
    yield "gated", GatedSAE(GatedSAEConfig(d_in=D_IN, d_sae=D_SAE))
    kw = {"d_in": D_IN, "d_sae": D_SAE, "d_out": 12, "apply_b_dec_to_input": False}
    yield "transcoder", Transcoder(TranscoderConfig(**kw))
    yield "skip_transcoder", SkipTranscoder(SkipTranscoderConfig(**kw))
    yield "jumprelu_transcoder", JumpReLUTranscoder(JumpReLUTranscoderConfig(**kw))
    yield "jumprelu_skip_transcoder", JumpReLUSkipTranscoder(JumpReLUSkipTranscoderConfig(**kw))
    yield (
        "hook_z",
        StandardSAE(StandardSAEConfig(d_in=D_IN, d_sae=D_SAE, reshape_activations="hook_z")),
    )


def write_saes() -> None:
    for seed, (name, sae) in enumerate(specs()):
        torch.manual_seed(seed)
        meta = (
            TRANSCODER_META if "transcoder" in name else HOOK_Z_META if name == "hook_z" else META
        )
        for key, value in meta.items():
            sae.cfg.metadata[key] = value
        sae = randomise(sae).eval()
        folder = HERE / "saes" / name
        sae.save_model(folder)
        x = torch.randn(3, 5, 4, D_IN // 4) if name == "hook_z" else torch.randn(3, 5, D_IN)
        with torch.no_grad():
            acts = sae.encode(x)
            expected = {"input": x, "feature_acts": acts, "decode": sae.decode(acts)}
            expected["forward"] = sae(x)
        about = {"class": type(sae).__name__, "name": sae.get_name()}
        save_file(
            {k: v.contiguous() for k, v in expected.items()},
            folder / "expected.safetensors",
            metadata=about,
        )
        if name in FOLDABLE:
            write_folded(sae, x, folder)


def write_folded(sae: SAE, x: torch.Tensor, folder: Path) -> None:
    """The parameters after SAELens's fold_W_dec_norm, and encode(x) after it."""
    sae = copy.deepcopy(sae)
    with torch.no_grad():
        sae.fold_W_dec_norm()
        folded = {name: param.detach().clone() for name, param in sae.named_parameters()}
        folded["feature_acts"] = sae.encode(x)
    save_file({k: v.contiguous() for k, v in folded.items()}, folder / "folded.safetensors")


def write_spliced_gpt2() -> None:
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=2,
        n_embd=D_IN,
        n_head=4,
        vocab_size=50,
        n_positions=16,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    hf = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for name, param in hf.named_parameters():
            if name.endswith("bias") or "ln" in name:
                param.add_(torch.randn_like(param) * 0.1)
    hf.save_pretrained(HERE / "gpt2", safe_serialization=True)
    model = _tl_model(hf)
    resid = randomise(StandardSAE(StandardSAEConfig(d_in=D_IN, d_sae=D_SAE))).eval()
    resid.cfg.metadata["hook_name"] = "blocks.1.hook_resid_post"
    resid.save_model(HERE / "saes" / "spliced_resid")
    attn = randomise(
        StandardSAE(StandardSAEConfig(d_in=D_IN, d_sae=D_SAE, reshape_activations="hook_z"))
    ).eval()
    attn.cfg.metadata["hook_name"] = "blocks.0.attn.hook_z"
    attn.save_model(HERE / "saes" / "spliced_hook_z")
    tokens = torch.randint(0, 50, (2, 8))
    out = {"tokens": tokens}
    with torch.no_grad():
        out["logits"] = model(tokens)
        for use_error_term in (False, True):
            suffix = "_error_term" if use_error_term else ""
            logits, cache = model.run_with_cache_with_saes(
                tokens, saes=[resid, attn], use_error_term=use_error_term
            )
            out["spliced_logits" + suffix] = logits
            out["resid_acts" + suffix] = cache["blocks.1.hook_resid_post.hook_sae_acts_post"]
            out["hook_z_acts" + suffix] = cache["blocks.0.attn.hook_z.hook_sae_acts_post"]
    save_file({k: v.contiguous() for k, v in out.items()}, HERE / "spliced_gpt2.safetensors")


def _tl_model(hf: transformers.GPT2LMHeadModel) -> HookedSAETransformer:
    from transformer_lens import HookedTransformerConfig
    from transformer_lens.pretrained.weight_conversions import convert_gpt2_weights

    cfg = HookedTransformerConfig(
        n_layers=2,
        d_model=D_IN,
        n_heads=4,
        d_head=D_IN // 4,
        d_mlp=4 * D_IN,
        d_vocab=50,
        n_ctx=16,
        act_fn="gelu_new",
        normalization_type="LN",
    )
    model = HookedSAETransformer(cfg)
    model.load_state_dict(convert_gpt2_weights(hf, cfg), strict=False)
    return model.eval()


if __name__ == "__main__":
    print("sae-lens", sae_lens.__version__)
    write_saes()
    write_spliced_gpt2()
