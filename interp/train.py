"""Train the models shipped in ``interp/models`` (or the same recipes on your own text).

One recipe per shipped model; the same seed gives bit-identical weights on a CPU with the
recipe's thread count. Run it as a module:

    python -m interp.train shakespeare-char --out my-shakespeare      # the shipped checkpoint
    python -m interp.train shakespeare-char --text my_corpus.txt --steps 500 --out my-model
    python -m interp.train attn-only-2l --seed 1 --out my-attn-only

Text models are character-level: the alphabet is the text's set of characters, the first
90% trains and the last 10% is held out (nanoGPT's split). The validation loss is the mean
next-character loss over the whole held-out text, read in windows of ``n_ctx`` characters.

The pieces live in ``interp.training`` (recipes, text data, copied-segment data, induction
probes, the loop); every one of them is importable from here too.
"""

from interp.training.cli import main
from interp.training.copied_segments import copied_segment_batch
from interp.training.induction_probes import (
    POSITION_PROBES,
    induction_figures,
    position_minima,
    position_scores,
    repeated_sequence,
)
from interp.training.loop import fit, lr_at, make_optimizer
from interp.training.recipes import RECIPES, Recipe
from interp.training.run import train
from interp.training.text import (
    VAL_FRACTION,
    default_text,
    sample_text,
    split_text,
    text_batch,
    text_loss,
)

__all__ = [
    "POSITION_PROBES",
    "RECIPES",
    "VAL_FRACTION",
    "Recipe",
    "copied_segment_batch",
    "default_text",
    "fit",
    "induction_figures",
    "lr_at",
    "main",
    "make_optimizer",
    "position_minima",
    "position_scores",
    "repeated_sequence",
    "sample_text",
    "split_text",
    "text_batch",
    "text_loss",
    "train",
]


if __name__ == "__main__":
    main()
