"""Does this dictionary belong to this model? The one rule for SAEs and transcoders.

A dictionary (an SAE, a transcoder, a transcoder set) read on a model it was not trained on
gives features that mean nothing there, even when the widths happen to match. So wherever a
dictionary meets a model (``add_sae``, ``ReplacementModel``, ``interp report``, ``interp
graph``, ``interp serve``), the model its config names (``model_name``) is compared with the
model's own name, and a mismatch is a ``ModelMismatchError`` unless the caller passes
``allow_model_mismatch=True`` (on the command line, ``--allow-model-mismatch``).

Names are compared as ``canonical_model_name`` spells them, so a model's aliases and hub ids
match (``"gpt2-small"``, ``"gpt2"``, ``"openai-community/gpt2"``). Where either side names no
model (a dictionary without ``model_name``; a model built in code, or loaded from a folder
whose config names none, see ``stated_model_name``), nothing is refused.

Example:
    >>> from interp.sae import HookedSAETransformer
    >>> other = HookedSAETransformer.from_model(interp.load_model("attn-only-2l"))
    >>> sae = interp.load_sae("shakespeare-char-resid-l1")   # trained on shakespeare-char
    >>> check_model_match(sae, other)   # raises ModelMismatchError naming both models
    Traceback (most recent call last):
    interp.sae.model_match.ModelMismatchError: ... 'shakespeare-char', but this model is ...
    >>> sae.cfg.d_in == other.cfg.d_model   # the same width: a splice would run, meaning nothing
    True
    >>> other.add_sae(sae, allow_model_mismatch=True)   # splice it anyway, knowingly
    >>> other.reset_saes()
"""

from __future__ import annotations

from typing import Any

from interp.loading.transformer_lens.model_names import canonical_model_name, stated_model_name

ALLOW_ARGUMENT = "allow_model_mismatch"  # the keyword argument that overrides the check
ALLOW_FLAG = "--allow-model-mismatch"  # the command-line flag that does


class ModelMismatchError(ValueError):
    """A dictionary whose config names another model than the one it is given to."""


def dictionary_model_name(dictionary: Any) -> str | None:
    """The model a dictionary says it was trained on: an SAE's ``cfg.model_name``, a
    transcoder set's or cross-layer transcoder's ``model_name``; None when it names none."""
    cfg = getattr(dictionary, "cfg", None)
    name = getattr(cfg, "model_name", None) if cfg is not None else None
    if name is None:
        name = getattr(dictionary, "model_name", None)
    return name if isinstance(name, str) and name.strip() else None


def same_model(first: str, second: str) -> bool:
    """Whether two model names name the same model (aliases and hub owners aside).

    Example:
        >>> same_model("gpt2-small", "openai-community/gpt2"), same_model("gpt2", "gpt2-xl")
        (True, False)
    """
    return canonical_model_name(first) == canonical_model_name(second)


def belongs_to(dictionary: Any, model: Any) -> bool | None:
    """True when the dictionary names ``model``, False when it names another model, None
    when either names none (``model`` is a HookedTransformer, or anything with a ``cfg``)."""
    wanted = dictionary_model_name(dictionary)
    have = stated_model_name(getattr(model, "cfg", None))
    if wanted is None or have is None:
        return None
    return same_model(wanted, have)


def check_model_match(
    dictionary: Any,
    model: Any,
    allow_model_mismatch: bool = False,
    what: str | None = None,
) -> None:
    """A ``ModelMismatchError`` when ``dictionary`` names another model than ``model``,
    naming both models and the override; nothing when ``allow_model_mismatch`` or when
    either names no model. ``what`` names the dictionary in the message (default its repr).

    Example:
        >>> sae = interp.load_sae("shakespeare-char-resid-l1")
        >>> model = interp.load_model("attn-only-2l")
        >>> check_model_match(sae, model)
        Traceback (most recent call last):
        interp.sae.model_match.ModelMismatchError: ... was trained on model 'shakespeare-char',
        but this model is 'attn-only-2l': ...
        >>> check_model_match(sae, model, allow_model_mismatch=True)   # allowed: nothing raised
    """
    if not isinstance(allow_model_mismatch, bool):
        raise TypeError(
            f"{ALLOW_ARGUMENT} takes True or False, got {type(allow_model_mismatch).__name__} "
            f"{allow_model_mismatch!r}."
        )
    if allow_model_mismatch or belongs_to(dictionary, model) is not False:
        return
    if what is None:  # an SAE's repr is one line; a module's would be its whole tree
        what = repr(dictionary) if hasattr(dictionary, "cfg") else type(dictionary).__name__
    have = stated_model_name(model.cfg)
    raise ModelMismatchError(
        f"{what} was trained on model {dictionary_model_name(dictionary)!r}, but this model is "
        f"{have!r}: its features mean nothing on another model, even one of the same width. "
        f"Load one trained on {have!r}, or pass {ALLOW_ARGUMENT}=True (command line: "
        f"{ALLOW_FLAG}) to use it anyway."
    )
