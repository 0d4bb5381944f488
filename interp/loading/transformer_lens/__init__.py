"""TransformerLens's own formats: its state dicts and toy-model folders (``state_dict``), its
config.json format (``toy_config``), its ``get_pretrained_model_config`` (``config``) and its
model names and aliases (``model_names``). Hugging Face checkpoints are read by
``interp.loading.hf`` instead; ``interp.loading_from_pretrained`` is TL's module of the same
name for ported scripts.

Example:
    >>> from interp.loading.transformer_lens import load_transformer_lens_state_dict
    >>> copy = load_transformer_lens_state_dict(   # a state dict or a file TL saved
    ...     model.state_dict(), model.cfg, model_class=HookedTransformer)
    >>> torch.equal(copy.W_Q, model.W_Q)
    True
"""

from interp.loading.transformer_lens.state_dict import (
    convert_neel_solu_old_weights,
    download_transformer_lens_repo,
    load_transformer_lens_folder,
    load_transformer_lens_state_dict,
)

__all__ = [
    "convert_neel_solu_old_weights",
    "download_transformer_lens_repo",
    "load_transformer_lens_folder",
    "load_transformer_lens_state_dict",
]
