"""Token embeddings for dictionaries with OOV position markers (docs/method.md §3.1)."""
import torch.nn as nn
from torch import Tensor


class MarkerEmbedding(nn.Embedding):
    """Token embedding that reads every marker id (≥ ``first_marker``) as ``<unk>``
    (the pointer-generator's shared table; the markers ``<unk-j>`` of
    :mod:`fairseq_acvi.data.oov_markers`).

    ids (...) long -> (..., E). The marker rows of the table exist (so that the table matches the
    dictionary) but are never read. Initialised N(0, E^-1/2), padding row 0.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int,
                 first_marker: int, unk_idx: int):
        super().__init__(num_embeddings, embedding_dim, padding_idx=padding_idx)
        nn.init.normal_(self.weight, mean=0, std=embedding_dim ** -0.5)
        nn.init.constant_(self.weight[padding_idx], 0)
        self.first_marker, self.unk_idx = first_marker, unk_idx

    def forward(self, ids: Tensor) -> Tensor:
        return super().forward(ids.masked_fill(ids >= self.first_marker, self.unk_idx))
