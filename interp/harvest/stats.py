"""Per-hook running statistics (mean, variance, mean norm) in float64, merged exactly with
Chan et al.'s parallel algorithm: batches into shards, shards into the whole harvest, in shard
order, so the result does not depend on how many processes did the work."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor


@dataclass
class RunningStats:
    """``count`` vectors' mean [d], sum of squared deviations ``m2`` [d] and sum of L2 norms
    (a 0-d tensor): all float64 tensors on the vectors' device, so that a GPU harvest never
    waits for them (``cpu()`` at the end of a shard).

    Example:
        >>> x, y = torch.randn(10, 4), torch.randn(6, 4)
        >>> merged = RunningStats.of(x).merge(RunningStats.of(y))
        >>> merged.count, merged.variance.shape   # the population variance of all 16 rows
        (16, torch.Size([4]))
        >>> torch.allclose(merged.variance, torch.cat([x, y]).double().var(0, unbiased=False))
        True
    """

    count: int
    mean: Float[Tensor, " d"]
    m2: Float[Tensor, " d"]
    norm_sum: Float[Tensor, ""]

    @classmethod
    def of(cls, vectors: Float[Tensor, "n d"]) -> RunningStats:
        """The statistics of ``vectors`` (two passes in float64, on their device)."""
        x = vectors.to(torch.float64)
        mean = x.mean(0)
        return cls(
            count=x.shape[0],
            mean=mean,
            m2=(x - mean).square().sum(0),
            norm_sum=torch.linalg.vector_norm(x, dim=1).sum(),
        )

    def merge(self, other: RunningStats) -> RunningStats:
        """Both sets' statistics (Chan et al.): exact up to float64 rounding."""
        if self.count == 0:
            return other
        if other.count == 0:
            return self
        count = self.count + other.count
        delta = other.mean - self.mean
        return RunningStats(
            count=count,
            mean=self.mean + delta * (other.count / count),
            m2=self.m2 + other.m2 + delta.square() * (self.count * other.count / count),
            norm_sum=self.norm_sum + other.norm_sum,
        )

    def cpu(self) -> RunningStats:
        return RunningStats(self.count, self.mean.cpu(), self.m2.cpu(), self.norm_sum.cpu())

    @property
    def variance(self) -> Float[Tensor, " d"]:
        """The population variance of each dimension (``m2 / count``)."""
        return self.m2 / self.count

    @property
    def mean_norm(self) -> float:
        return float(self.norm_sum) / self.count

    def to_tensors(self, prefix: str) -> dict[str, Tensor]:
        """The statistics as float64 tensors named ``{prefix}.count`` etc. (for safetensors)."""
        return {
            f"{prefix}.count": torch.tensor([self.count], dtype=torch.float64),
            f"{prefix}.mean": self.mean.cpu(),
            f"{prefix}.m2": self.m2.cpu(),
            f"{prefix}.norm_sum": self.norm_sum.reshape(1).cpu(),
        }

    @classmethod
    def from_tensors(cls, tensors: dict[str, Tensor], prefix: str) -> RunningStats:
        return cls(
            count=int(tensors[f"{prefix}.count"].item()),
            mean=tensors[f"{prefix}.mean"],
            m2=tensors[f"{prefix}.m2"],
            norm_sum=tensors[f"{prefix}.norm_sum"].reshape(()),
        )

    def summary(self) -> dict:
        """JSON-ready: count, mean and variance (lists), mean norm."""
        return {
            "count": self.count,
            "mean_norm": self.mean_norm,
            "mean": self.mean.tolist(),
            "variance": self.variance.tolist(),
        }
