"""A bidirectional ``nn.LSTM`` over right-padded sequences without packing, for the CPU.

Why. PyTorch's packed-sequence LSTM on a CPU computes the input projections of all packed tokens
at once and reads one time step at a time as a slice of them; the backward of every slice
allocates and zero-fills a gradient the size of the whole projection, (tokens in the batch) × 4H.
The cost of the backward therefore grows with the square of the source length: on 16 CNN/DM
articles of up to 400 words (H = 256) the encoder's forward and backward took about 10 s packed
against about 1 s for the same LSTM on the padded batch (``benchmarks/bench_encoder_lstm.py``).

What. :func:`bilstm_by_segments` gives the same outputs and final states as the packed call,
with the same parameters (those of the given ``nn.LSTM``), layer by layer and direction by
direction through ``torch.lstm``:

* forward direction: a right-padded sequence's outputs at its valid positions do not depend on
  the padding after them, so the padded batch is run as it is; the time axis is cut at each
  distinct length L (ascending), the state carried from one segment to the next, and a sequence
  of length L takes its final (h, c) at the end of the segment that ends at L;
* backward direction: each sequence is reversed within its own length (padding stays at the end),
  run as above, and its outputs reversed back;
* layers: the next layer reads [forward; backward] of this one (with ``nn.LSTM``'s dropout
  between layers in training), as the packed call does;
* outputs at padding are 0, as ``pad_packed_sequence`` leaves them.

Shapes: x (B, N, E) right-padded, batch first; lengths (B,) long, 1 ≤ length ≤ N ->
(out (B, N, 2H), h_n (2L, B, H), c_n (2L, B, H)), h_n / c_n ordered as ``nn.LSTM``'s
([layer 0 forward, layer 0 backward, layer 1 forward, …]).
"""
from typing import List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def reverse_index(lengths: Tensor, N: int) -> Tensor:
    """(B, N) long: position i of the reversed sequence reads position len − 1 − i (i < len); the
    padding positions map to themselves. The map is its own inverse."""
    pos = torch.arange(N, device=lengths.device).unsqueeze(0)                # (1, N)
    lens = lengths.to(pos.device).unsqueeze(1)                               # (B, 1)
    return torch.where(pos < lens, lens - 1 - pos, pos)


def reverse_within(x: Tensor, index: Tensor) -> Tensor:
    """x (B, N, D) -> x with each sequence reversed within its length (``reverse_index``)."""
    return x.gather(1, index.unsqueeze(-1).expand(-1, -1, x.size(-1)))


def bilstm_packed(lstm: nn.LSTM, x: Tensor, lengths: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """The packed call itself (GPUs, short batches, the reference of the tests and benchmark):
    same arguments and outputs as :func:`bilstm_by_segments`."""
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True,
                                               enforce_sorted=False)
    out, (h_n, c_n) = lstm(packed)
    out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.size(1))
    return out, h_n, c_n


def one_direction(x: Tensor, weights: List[Tensor], lengths: Tensor, bounds: List[int],
                  has_biases: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """A one-layer unidirectional LSTM over right-padded x (B, N, E), the time axis cut at the
    distinct lengths ``bounds`` (ascending, the last ≤ N) -> (out (B, bounds[-1], H), h (B, H),
    c (B, H)), h and c taken at each sequence's own last position."""
    B, H = x.size(0), weights[1].size(1)
    zero = x.new_zeros(1, B, H)
    state, h_fin, c_fin = (zero, zero), zero[0], zero[0]
    # one split, not a slice per segment (each slice's backward zero-fills a gradient of all of x)
    sizes = [end - start for start, end in zip([0] + bounds[:-1], bounds)]
    segments = x[:, :bounds[-1]].split(sizes, dim=1)
    pieces = []
    for end, seg in zip(bounds, segments):
        out, h, c = torch.lstm(seg, state, weights, has_biases, 1, 0.0, False, False, True)
        pieces.append(out)
        done = (lengths == end).view(B, 1)          # the last bound is every remaining length
        h_fin, c_fin = torch.where(done, h[0], h_fin), torch.where(done, c[0], c_fin)
        state = (h, c)
    out = pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim=1)
    return out, h_fin, c_fin


def bilstm_by_segments(lstm: nn.LSTM, x: Tensor, lengths: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """The packed bidirectional ``lstm`` (batch_first) on right-padded x (B, N, E) with
    ``lengths`` (B,), computed without packing (module docstring). -> (out, h_n, c_n)."""
    if not (lstm.bidirectional and lstm.batch_first) or lstm.proj_size:
        raise ValueError("bilstm_by_segments: a bidirectional, batch-first LSTM without projections")
    B, N, _ = x.shape
    lengths = lengths.to(device=x.device, dtype=torch.long)
    bounds = sorted(set(lengths.tolist()))
    if bounds[0] < 1 or bounds[-1] > N:
        raise ValueError(f"bilstm_by_segments: lengths must lie in [1, {N}], got {bounds[0]}..{bounds[-1]}")
    index = reverse_index(lengths, N)
    valid = (torch.arange(N, device=x.device).unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(-1)
    inp, hs, cs = x, [], []
    for layer in range(lstm.num_layers):
        outs = []
        for suffix in ("", "_reverse"):
            names = [f"weight_ih_l{layer}{suffix}", f"weight_hh_l{layer}{suffix}"]
            if lstm.bias:
                names += [f"bias_ih_l{layer}{suffix}", f"bias_hh_l{layer}{suffix}"]
            weights = [getattr(lstm, n) for n in names]
            seq = inp if not suffix else reverse_within(inp, index)
            out, h, c = one_direction(seq, weights, lengths, bounds, lstm.bias)
            if bounds[-1] < N:                                  # the batch's padding-only tail
                out = torch.cat([out, out.new_zeros(B, N - bounds[-1], out.size(-1))], dim=1)
            outs.append(out if not suffix else reverse_within(out, index))
            hs.append(h)
            cs.append(c)
        inp = torch.cat(outs, dim=-1)
        if layer < lstm.num_layers - 1 and lstm.dropout > 0:
            inp = F.dropout(inp, p=lstm.dropout, training=lstm.training)
    out = inp * valid.to(inp.dtype)
    return out, torch.stack(hs), torch.stack(cs)
