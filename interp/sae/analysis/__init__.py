"""SAELens's ``sae_lens.analysis`` module path: ``hooked_sae_transformer``."""
