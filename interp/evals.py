"""TransformerLens's ``transformer_lens.evals`` (rough evals), for scripts ported by import; the
code lives in ``interp.analysis.evals``.

Example:
    >>> from interp.evals import sanity_check
"""

from interp.analysis.evals import (
    IOIDataset,
    evaluate,
    evaluate_on_dataset,
    induction_loss,
    ioi_eval,
    make_code_data_loader,
    make_owt_data_loader,
    make_pile_data_loader,
    make_wiki_data_loader,
    sanity_check,
)

__all__ = [
    "IOIDataset",
    "evaluate",
    "evaluate_on_dataset",
    "induction_loss",
    "ioi_eval",
    "make_code_data_loader",
    "make_owt_data_loader",
    "make_pile_data_loader",
    "make_wiki_data_loader",
    "sanity_check",
]
