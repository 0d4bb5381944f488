"""Dataset-scale activation harvesting: ``harvest`` writes resumable safetensors shards and a
manifest (on one process or under ``torchrun``); ``ActivationStore`` reads them back for
training; ``export_saelens`` writes SAELens's cached-activations layout.

Example:
    >>> from interp.harvest import harvest, ActivationStore
    >>> harvest("shakespeare-char", "input.txt", "blocks.1.hook_resid_post", "acts/", seq_len=64)
    >>> for batch in torch.utils.data.DataLoader(ActivationStore("acts/", batch_size=512),
    ...                                          batch_size=None, num_workers=2): ...
"""

from interp.harvest.harvester import harvest
from interp.harvest.saelens import export_saelens
from interp.harvest.stats import RunningStats
from interp.harvest.store import ActivationStore

__all__ = ["harvest", "ActivationStore", "export_saelens", "RunningStats"]
