"""An example prompt (and a corrupted one of the same length in tokens, for patching) for
each served model: the page prefills them when the model is chosen, so a first look at a
model shows something it does, in text it can read.

The first pair the model's tokenizer reads, within its prompt limit, with both prompts the
same length in tokens: a character model gets Shakespeare, a word-piece model the
indirect-object sentence, a model of abstract number symbols (attn-only-2l) a repeated
random sequence for its induction head.
"""

from __future__ import annotations

from interp.model import HookedTransformer

CHARACTER_VOCAB = 256  # a vocabulary this small is read one character a token
# The play's first lines, then their start again, cut inside "further": a character model
# completes "fu" with "r"; the corrupted prompt says "farther" in both places, so patching
# shows where the model reads the word it is spelling (its gap is over 2 logits).
_CITIZEN = "First Citizen:\nBefore we proceed any {}, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
SHAKESPEARE = (
    _CITIZEN.format("further") + "First Citizen:\nBefore we proceed any fu",
    _CITIZEN.format("farther") + "First Citizen:\nBefore we proceed any fa",
)
# The indirect-object sentence (Wang et al. 2022): " Mary" is the answer, " John" the wrong one.
IOI = (
    "When Mary and John went to the store, John gave a drink to",
    "When Mary and John went to the store, Mary gave a drink to",
)
# 11 random symbols, one more, then the 11 again: an induction head predicts the 12th ("501");
# the corrupted prompt's first copy has "77" there (as `interp demo`'s prompts).
_SEQUENCE = "23 187 402 9 311 76 450 128 264 35 199"
SYMBOLS = (f"{_SEQUENCE} 501 {_SEQUENCE}", f"{_SEQUENCE} 77 {_SEQUENCE}")


def example_prompts(model: HookedTransformer, max_tokens: int) -> tuple[str, str]:
    """``(prompt, corrupted)``: the first example pair ``model`` tokenizes, both within
    ``max_tokens`` and of one length; ``("", "")`` when none fits.

    Example:
        >>> example_prompts(interp.load_model("attn-only-2l"), 256)[0][:9]
        '23 187 40'
    """
    character = model.cfg.d_vocab <= CHARACTER_VOCAB
    candidates = [SHAKESPEARE, IOI, SYMBOLS] if character else [IOI, SHAKESPEARE, SYMBOLS]
    for prompt, corrupted in candidates:
        try:
            lengths = {
                model.to_tokens(text, truncate=False).shape[1] for text in (prompt, corrupted)
            }
        except ValueError:  # a character or word the tokenizer does not have
            continue
        if len(lengths) == 1 and lengths.pop() <= max_tokens:
            return prompt, corrupted
    return "", ""
