"""Write the SAELens fixtures that tests/sae/test_sae_hooked_saelens_api.py compares against:
what SAELens 6.45.3's ``HookedSAETransformer`` does with a transcoder, an SAE on its
``mlp.hook_in``, ``exclude_special_tokens`` and the error term, on the tiny GPT-2 of
make_fixtures.py (``gpt2/``, written there first).

Run in an environment with SAELens 6.45.3 (TransformerLens < 4, so not interp's):

    python3 -m venv /tmp/saelens-venv
    /tmp/saelens-venv/bin/pip install torch==2.13.0 sae-lens==6.45.3 "transformer-lens<4"
    /tmp/saelens-venv/bin/python tests/sae_reference/make_hooked_fixtures.py

It saves two random SAEs with SAELens's ``save_model`` (``saes/hooked_transcoder``:
``blocks.0.hook_resid_mid`` -> ``blocks.0.hook_mlp_out``; ``saes/hooked_mlp_hook_in``:
``blocks.0.mlp.hook_in``) and, in ``hooked_saelens_api.safetensors``, the tokens and SAELens's
logits and cached activations for each case.
"""

import sys
from pathlib import Path

import sae_lens
import torch
import transformers
from sae_lens.saes.standard_sae import StandardSAE, StandardSAEConfig
from sae_lens.saes.transcoder import Transcoder, TranscoderConfig
from safetensors.torch import save_file

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from make_fixtures import D_IN, D_SAE, _tl_model, randomise  # noqa: E402

RESID = "blocks.1.hook_resid_post"
MLP_IN = "blocks.0.mlp.hook_in"
TC_IN, TC_OUT = "blocks.0.hook_resid_mid", "blocks.0.hook_mlp_out"


def saes() -> dict[str, torch.nn.Module]:
    torch.manual_seed(1)
    transcoder = Transcoder(
        TranscoderConfig(d_in=D_IN, d_sae=D_SAE, d_out=D_IN, apply_b_dec_to_input=False)
    )
    transcoder.cfg.metadata["hook_name"] = TC_IN
    transcoder.cfg.metadata["hook_name_out"] = TC_OUT
    mlp_in = StandardSAE(StandardSAEConfig(d_in=D_IN, d_sae=D_SAE))
    mlp_in.cfg.metadata["hook_name"] = MLP_IN
    resid = StandardSAE(StandardSAEConfig(d_in=D_IN, d_sae=D_SAE))
    resid.cfg.metadata["hook_name"] = RESID
    made = {"hooked_transcoder": transcoder, "hooked_mlp_hook_in": mlp_in, "hooked_resid": resid}
    for name, sae in made.items():
        randomise(sae).eval().save_model(HERE / "saes" / name)
    return made


def main() -> None:
    print("sae-lens", sae_lens.__version__)
    model = _tl_model(transformers.GPT2LMHeadModel.from_pretrained(HERE / "gpt2").eval())
    made = saes()
    torch.manual_seed(2)
    tokens = torch.randint(0, 50, (2, 8))
    exclude = sorted({int(tokens[0, 0]), int(tokens[1, 3])})
    out = {"tokens": tokens, "exclude": torch.tensor(exclude)}
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
        out["mlp_hook_in"] = cache[MLP_IN]
        for error in (False, True):
            suffix = "_error_term" if error else ""
            logits, cache = model.run_with_cache_with_saes(
                tokens, saes=[made["hooked_transcoder"]], use_error_term=error
            )
            out["transcoder_logits" + suffix] = logits
            out["transcoder_acts" + suffix] = cache[f"{TC_OUT}.hook_sae_acts_post"]
            logits, cache = model.run_with_cache_with_saes(
                tokens, saes=[made["hooked_mlp_hook_in"]], use_error_term=error
            )
            out["mlp_in_logits" + suffix] = logits
            out["mlp_in_acts" + suffix] = cache[f"{MLP_IN}.hook_sae_acts_post"]
            logits, cache = model.run_with_cache_with_saes(
                tokens,
                saes=[made["hooked_resid"]],
                use_error_term=error,
                exclude_special_tokens=exclude,
            )
            out["excluded_logits" + suffix] = logits
            out["excluded_output" + suffix] = cache[f"{RESID}.hook_sae_output"]
            if error:
                out["excluded_error"] = cache[f"{RESID}.hook_sae_error"]
    save_file({k: v.contiguous() for k, v in out.items()}, HERE / "hooked_saelens_api.safetensors")


if __name__ == "__main__":
    main()
