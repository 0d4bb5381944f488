"""Reading weights from other formats into a HookedTransformer."""
