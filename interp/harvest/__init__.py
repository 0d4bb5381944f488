"""Dataset-scale activation harvesting: ``harvest`` writes resumable safetensors shards and a
manifest (on one process or under ``torchrun``); ``ActivationStore`` reads them back for
training; ``export_saelens`` writes SAELens's cached-activations layout.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from interp.harvest import harvest, ActivationStore
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "input.txt").write_text("To be, or not to be. " * 20)
    >>> manifest = harvest("shakespeare-char", folder / "input.txt", "blocks.1.hook_resid_post",
    ...                    folder / "acts", seq_len=64, progress=False)
    >>> manifest["n_tokens"]   # 440 characters: 6 sequences of 64
    384
    >>> store = ActivationStore(folder / "acts", batch_size=256)
    >>> [batch.shape for batch in torch.utils.data.DataLoader(store, batch_size=None)]
    [torch.Size([256, 128]), torch.Size([128, 128])]
"""

from interp.harvest.harvester import harvest
from interp.harvest.saelens import export_saelens
from interp.harvest.stats import RunningStats
from interp.harvest.store import ActivationStore

__all__ = ["harvest", "ActivationStore", "export_saelens", "RunningStats"]
