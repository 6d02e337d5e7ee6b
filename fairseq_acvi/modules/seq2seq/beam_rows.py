"""Which original sentence each row of a beam search holds, so that per-sentence tensors are not
copied again at every step (docs/method.md §3.9).

fairseq's beam search reorders the encoder output and the decoder's incremental state at every
step (``reorder_encoder_out``, ``reorder_incremental_state``) with ``new_order`` (rows,): the
row each new row continues. Beam rows move only within their sentence (and finished sentences
drop out), so a tensor that is the same for every row of a sentence — the encoder's annotations
and final states, the scorer's keys and values, the padding mask, a context inference's prepared
tensors — comes out of that ``index_select`` with exactly the values it had: a full copy each
step for nothing (13 % of a ``soft`` decode's CPU time at beam 10, 28 % under MC dropout's ten
chains).

``row_source`` (rows,) long names, for each row, the row of the encoder's own output that it is
a copy of; the encoder starts it at ``arange(B)`` and every reorder maps it by ``new_order``.
When the mapped sources equal the current ones row for row, every new row would copy a row that
holds the same values as the one it replaces, and the copy is skipped. That is exact, not
approximate, provided that rows with the same source hold the same values bit for bit:
- the encoder's outputs are copies (``index_select``) of one row, so they do;
- the decoder computes its per-sentence tensors once, at the first step, from the rows of the
  expanded batch; it then gives every row the values of the first row with its source
  (:func:`first_of_source`), so that they do by construction too.
"""
from typing import Callable, Dict, Iterable, Optional, Tuple

import torch
from torch import Tensor

#: the key of the row sources in the encoder output (a list of one tensor, fairseq's convention)
#: and in the decoder's incremental state
ROW_SOURCE = "row_source"


def initial(batch: int, device) -> Tensor:
    """The sources of an encoder's own output: row i is sentence i. -> (batch,) long."""
    return torch.arange(batch, device=device)


def reordered(source: Tensor, new_order: Tensor) -> Tuple[Tensor, bool]:
    """source (rows,), new_order (rows',) -> (the sources after the reorder (rows',), whether
    they equal ``source`` row for row, i.e. the per-sentence tensors need no copy)."""
    new = source.index_select(0, new_order)
    return new, new.shape == source.shape and torch.equal(new, source)


def first_of_source(source: Tensor) -> Optional[Tensor]:
    """source (rows,) -> for each row, the first row with the same source (rows,) long; None
    when that is every row itself (nothing to copy)."""
    rows = torch.arange(source.numel(), device=source.device)
    first = torch.full((int(source.max()) + 1,), source.numel(), device=source.device,
                       dtype=rows.dtype)
    first.scatter_reduce_(0, source, rows, reduce="amin")
    canon = first.index_select(0, source)
    return None if torch.equal(canon, rows) else canon


def share_within_sentences(cache: Dict[str, Tensor], encoder_out: Dict,
                           per_sentence: Callable[[str], bool]) -> bool:
    """At the first step of a beam search: record the rows' sources from ``encoder_out`` in
    ``cache`` and give every row of the entries ``per_sentence`` names the values of the first
    row with its source (batch-first entries, in place). -> whether any entry was replaced
    (False also when the encoder output names no sources: the cache is then reordered whole)."""
    source = encoder_out.get(ROW_SOURCE)
    if not source:
        return False
    cache[ROW_SOURCE] = source[0]
    canon = first_of_source(source[0])
    if canon is None:
        return False
    cache.update({k: v.index_select(0, canon) for k, v in cache.items() if per_sentence(k)})
    return True


def reorder(cache: Dict[str, Tensor], new_order: Tensor, per_sentence: Callable[[str], bool],
            layer_first: Iterable[str] = ()) -> Dict[str, Tensor]:
    """A decoder's incremental state after a beam reorder: every entry's rows by ``new_order``
    (dimension 1 for the ``layer_first`` entries, (layers, rows, ...); 0 for the others), but
    the ``per_sentence`` entries kept as they are when the sources did not change (module
    docstring)."""
    unchanged, out = False, {}
    if ROW_SOURCE in cache:
        new, unchanged = reordered(cache[ROW_SOURCE], new_order)
        out[ROW_SOURCE] = cache[ROW_SOURCE] if unchanged else new
    layer_first = set(layer_first)
    for k, v in cache.items():
        if k != ROW_SOURCE:
            out[k] = (v if unchanged and per_sentence(k)
                      else v.index_select(1 if k in layer_first else 0, new_order))
    return out
