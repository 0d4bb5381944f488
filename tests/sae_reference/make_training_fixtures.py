"""Write the SAELens fixtures that tests/sae/test_sae_saelens_training.py compares against.

Run in an environment with SAELens 6.45.3 (see make_fixtures.py for how to make one):

    /work/sl-venv/bin/python tests/sae_reference/make_training_fixtures.py

For each case (a training architecture and a config) it builds SAELens's training SAE
(d_in 16, d_sae 32), draws every parameter at random, and runs ``training_forward_pass`` on a
random batch with a dead-feature mask and loss coefficients. ``training/<case>.safetensors``
holds the parameters, the batch, the mask, the outputs (``sae_out``, ``feature_acts``,
``hidden_pre``), every loss, the gradient of the total loss for each parameter (not with
sparse activations, whose backward fails in SAELens on CPU), the state after the pass
(BatchTopK's threshold) and ``process_state_dict_for_saving_inference``'s weights; its
metadata the config, the coefficients and ``get_inference_sae_cfg_dict()``.
"""

import json
from pathlib import Path

import sae_lens
import torch
from sae_lens.saes.batchtopk_sae import BatchTopKTrainingSAE, BatchTopKTrainingSAEConfig
from sae_lens.saes.gated_sae import GatedTrainingSAE, GatedTrainingSAEConfig
from sae_lens.saes.jumprelu_sae import JumpReLUTrainingSAE, JumpReLUTrainingSAEConfig
from sae_lens.saes.matryoshka_batchtopk_sae import (
    MatryoshkaBatchTopKTrainingSAE,
    MatryoshkaBatchTopKTrainingSAEConfig,
)
from sae_lens.saes.sae import SAEMetadata, TrainStepInput
from sae_lens.saes.standard_sae import StandardTrainingSAE, StandardTrainingSAEConfig
from sae_lens.saes.topk_sae import TopKTrainingSAE, TopKTrainingSAEConfig
from safetensors.torch import save_file

HERE = Path(__file__).parent / "training"
D_IN, D_SAE, BATCH = 16, 32, 8
META = {"hook_name": "blocks.0.hook_resid_post", "model_name": "tiny"}

CLASSES = {
    "standard": (StandardTrainingSAE, StandardTrainingSAEConfig),
    "jumprelu": (JumpReLUTrainingSAE, JumpReLUTrainingSAEConfig),
    "topk": (TopKTrainingSAE, TopKTrainingSAEConfig),
    "batchtopk": (BatchTopKTrainingSAE, BatchTopKTrainingSAEConfig),
    "gated": (GatedTrainingSAE, GatedTrainingSAEConfig),
    "matryoshka_batchtopk": (MatryoshkaBatchTopKTrainingSAE, MatryoshkaBatchTopKTrainingSAEConfig),
}

# case -> (architecture, config fields, coefficients)
CASES = {
    "standard_l1": ("standard", {}, {"l1": 0.7}),
    "standard_l2_no_b_dec": (
        "standard",
        {"lp_norm": 2.0, "apply_b_dec_to_input": False},
        {"l1": 1.3},
    ),
    "standard_layer_norm": ("standard", {"normalize_activations": "layer_norm"}, {"l1": 0.5}),
    "jumprelu_step": (
        "jumprelu",
        {"jumprelu_bandwidth": 1.0, "pre_act_loss_coefficient": 0.1},
        {"l0": 0.3},
    ),
    "jumprelu_tanh": (
        "jumprelu",
        {"jumprelu_sparsity_loss_mode": "tanh", "jumprelu_tanh_scale": 2.0},
        {"l0": 0.3},
    ),
    "topk_rescaled": ("topk", {"k": 4, "aux_loss_coefficient": 0.5}, {}),
    "topk_plain": ("topk", {"k": 4, "rescale_acts_by_decoder_norm": False}, {}),
    "topk_sparse": ("topk", {"k": 4, "use_sparse_activations": True}, {}),
    "batchtopk": ("batchtopk", {"k": 3.5, "topk_threshold_lr": 0.1}, {}),
    "gated": ("gated", {}, {"l1": 0.4}),
    "matryoshka": ("matryoshka_batchtopk", {"k": 4, "matryoshka_widths": [8, 20, 32]}, {}),
    "matryoshka_level_aux": (
        "matryoshka_batchtopk",
        {"k": 4, "matryoshka_widths": [8, 20, 32], "use_matryoshka_aux_loss": True},
        {},
    ),
}


def randomise(sae: torch.nn.Module) -> None:
    """Every parameter random; thresholds positive and of the pre-activations' size."""
    with torch.no_grad():
        for name, param in sae.named_parameters():
            if name == "log_threshold":
                param.copy_(torch.log(torch.rand_like(param) + 0.2))
            elif name.startswith("b_"):
                param.copy_(torch.randn_like(param) * 0.1)
            else:
                param.copy_(torch.randn_like(param) * 0.5)
        if hasattr(sae, "topk_threshold"):
            sae.topk_threshold.fill_(0.25)


def make_case(name: str, architecture: str, fields: dict, coefficients: dict) -> None:
    sae_class, cfg_class = CLASSES[architecture]
    cfg = cfg_class(d_in=D_IN, d_sae=D_SAE, metadata=SAEMetadata(**META), **fields)
    sae = sae_class(cfg)
    randomise(sae)
    tensors = {f"param.{k}": v.detach().clone() for k, v in sae.state_dict().items()}
    x = torch.randn(BATCH, D_IN)
    dead = torch.rand(D_SAE) < 0.4
    step = TrainStepInput(
        sae_in=x,
        coefficients=coefficients,
        dead_neuron_mask=dead,
        n_training_steps=3,
        is_logging_step=False,
    )
    out = sae.training_forward_pass(step)
    backward = not fields.get("use_sparse_activations")  # SAELens's sparse path: no backward
    if backward:
        out.loss.backward()
    tensors.update(x=x, dead=dead, loss=out.loss.detach(), sae_out=out.sae_out.detach())
    tensors["feature_acts"] = out.feature_acts.detach().to_dense()
    tensors["hidden_pre"] = out.hidden_pre.detach()
    tensors.update({f"loss.{k}": v.detach() for k, v in out.losses.items()})
    if backward:
        tensors.update({f"grad.{k}": p.grad for k, p in sae.named_parameters()})
    tensors.update({f"after.{k}": v.detach().clone() for k, v in sae.state_dict().items()})
    inference = {k: v.detach().clone() for k, v in sae.state_dict().items()}
    sae.process_state_dict_for_saving_inference(inference)
    tensors.update({f"inference.{k}": v for k, v in inference.items()})
    metadata = {
        "sae_lens_version": sae_lens.__version__,
        "architecture": architecture,
        "fields": json.dumps(fields),
        "coefficients": json.dumps(coefficients),
        "inference_cfg": json.dumps(cfg.get_inference_sae_cfg_dict()),
    }
    tensors = {k: v.contiguous() for k, v in tensors.items()}
    save_file(tensors, str(HERE / f"{name}.safetensors"), metadata=metadata)


def main() -> None:
    assert sae_lens.__version__ == "6.45.3", sae_lens.__version__
    HERE.mkdir(exist_ok=True)
    for index, (name, (architecture, fields, coefficients)) in enumerate(CASES.items()):
        torch.manual_seed(index)
        make_case(name, architecture, fields, coefficients)
        print("wrote", name)


if __name__ == "__main__":
    main()
