"""A small attentional model learns sequence reversal (≥ 95% exact match, greedy decoding)."""
import random

import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator

from test_seq2seq_model import _dictionary, build_model


def reversal_batch(d, rng, n, min_len=3, max_len=7):
    words = list(range(d.nspecial, len(d)))
    srcs = [[rng.choice(words) for _ in range(rng.randint(min_len, max_len))] for _ in range(n)]
    N = max(map(len, srcs)) + 1
    src = torch.full((n, N), d.pad())
    prev = torch.full((n, N), d.pad())
    tgt = torch.full((n, N), d.pad())
    for i, s in enumerate(srcs):
        r = s[::-1]
        src[i, : len(s) + 1] = torch.tensor(s + [d.eos()])
        tgt[i, : len(r) + 1] = torch.tensor(r + [d.eos()])
        prev[i, : len(r) + 1] = torch.tensor([d.eos()] + r)
    lengths = src.ne(d.pad()).sum(1)
    return src, lengths, prev, tgt, srcs


# ACVI's KL is summed over the context dimensions (here 64): with β = 1 on this tiny
# low-entropy task the posterior collapses to the prior and the context carries nothing (see the
# docs/guide.md, "Posterior collapse"); a small β keeps the latent context informative.
def train_reversal(model, d, rng, updates, batch_size, *batch_args, lr=0.01, clip=5.0):
    """Adam on reversal batches: per-token NLL plus every weighted extra loss term the model
    returns (the elbo criterion's objective), the model's update count set as fairseq does."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for step in range(updates):
        model.set_num_updates(step)
        src, lengths, prev, tgt, _ = reversal_batch(d, rng, batch_size, *batch_args)
        lprobs, extra = model(src, lengths, prev)
        mask = tgt.ne(d.pad())
        loss = -(lprobs.gather(-1, tgt.unsqueeze(-1)).squeeze(-1) * mask).sum()
        for value, weight in extra["losses"].values():
            loss = loss + weight * value
        opt.zero_grad()
        (loss / mask.sum()).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()



def evaluate_reversal(model, d, *batch_args):
    """Teacher-forced on 200 fresh reversal pairs (seed 123), in evaluation mode: (per-token NLL,
    the unigram entropy of the gold targets (what a model blind to its source reaches), the
    model's extra, src (B, N), the target mask (B, T))."""
    model.eval()
    src, lengths, prev, tgt, _ = reversal_batch(d, random.Random(123), 200, *batch_args)
    with torch.no_grad():
        lprobs, extra = model(src, lengths, prev)
    mask = tgt.ne(d.pad())
    nll = float(-(lprobs.gather(-1, tgt.unsqueeze(-1)).squeeze(-1) * mask).sum() / mask.sum())
    freq = torch.bincount(tgt[mask], minlength=len(d)).float()
    p = freq[freq > 0] / freq.sum()
    return nll, float(-(p * p.log()).sum()), extra, src, mask

# ACVI also gets the KL delay of the real-data recipes (docs/acvi_kl_notes.md §5): without it Adam
# lifts σ² toward 1 before the decoder relies on the context, and whether the model still learns
# depends on the random stream (measured 2026-11-26, seeds 0-8: 4 of 9 below 95 % without the delay,
# 13/200 at worst; with 150 updates of delay 9 of 9 at ≥ 192/200).
# ("soft", input feeding 0): trained through the parallel path (docs/method.md §3.7), decoded step
# by step.
@pytest.mark.parametrize("variant,options", [("soft", {}),
                                             ("acvi", {"acvi_beta": 1e-3,
                                                       "acvi_kl_delay_updates": 150}),
                                             ("soft", {"input_feeding": 0})])
def test_attention_model_learns_reversal(variant, options):
    torch.manual_seed(0)
    rng = random.Random(0)
    d = _dictionary(10)
    model, _ = build_model(variant, d, encoder_hidden_size=32, decoder_hidden_size=64,
                           encoder_embed_dim=32, decoder_embed_dim=32, attention_dim=32,
                           encoder_layers=1, decoder_layers=1, mc_samples=0, **options)
    train_reversal(model, d, rng, updates=700, batch_size=64)

    model.eval()
    gen = SequenceGenerator([model], d, beam_size=1, max_len_b=10)
    src, lengths, _, _, srcs = reversal_batch(d, random.Random(123), 200)
    with torch.no_grad():
        hyps = gen.forward({"net_input": {"src_tokens": src, "src_lengths": lengths}})
    exact = sum(h[0]["tokens"][:-1].tolist() == s[::-1] for h, s in zip(hyps, srcs))
    assert exact / len(srcs) >= 0.95, f"{variant}: exact match {exact}/{len(srcs)}"
