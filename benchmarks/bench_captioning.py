"""Speed of ``acvi_video_captioner`` (docs/method.md §3.2), measured side by side in one run.

Prints, on the same synthetic frame features and captions:
  * training target words/s (Adam steps, dropout 0.5) of ``--context-inference acvi`` relative to
    ``soft`` (target ≥ 0.95×: "only negligible computational overheads", P §5);
  * decoding videos/s (the task's beam search, beam 5) of the ACVI model averaging K = 10
    Monte-Carlo context samples relative to K = 1 (target ≥ 0.85×), with a fixed caption length so
    that both do the same number of steps.
Timings are interleaved (the order alternates every round) and reported as medians; the figures
are meant as ratios: absolute speeds depend on the machine and its load.

Paper sizes by default (App. B: 24 frames × 1024-d features, 1000-d LSTM states (encoder
2 × 500), 100-d attention, 256-d embeddings; vocabulary of the shared MSVD training captions).
Shrink with the options::

    python benchmarks/bench_captioning.py [--rounds 7] [--batch 64] [--hidden 1000]
        [--encoder-hidden 500] [--vocab 9472] [--only train|decode]
        [--device cpu|cuda] [--threads 1]
"""
import argparse
import datetime
import statistics
import sys
import time

import torch

import fairseq_acvi  # noqa: F401
from fairseq.data import Dictionary

from fairseq_acvi.models.video_captioner import ACVIVideoCaptioner
from fairseq_acvi.tasks.video_captioning import FeatureSequenceGenerator


class _Task:
    def __init__(self, d, feature_dim, max_frames):
        self.cfg = argparse.Namespace(feature_dim=feature_dim, max_frames=max_frames)
        self.target_dictionary = d
        self.source_dictionary = None


def make_dict(V):
    d = Dictionary()
    for i in range(V - d.nspecial):
        d.add_symbol(f"w{i}")
    return d


def build(d, variant, a, mc=10):
    args = argparse.Namespace(arch="acvi_video_captioner", context_inference=variant,
                              encoder_hidden_size=a.encoder_hidden, decoder_hidden_size=a.hidden,
                              decoder_embed_dim=a.embed, attention_dim=a.attention_dim,
                              dropout=0.5, mc_samples=mc)
    return ACVIVideoCaptioner.build_model(args, _Task(d, a.feature_dim, a.frames)).to(a.device)


def batch(d, a, B, seed):
    g = torch.Generator().manual_seed(seed)
    feats = torch.rand(B, a.frames, a.feature_dim, generator=g).abs() * 0.5
    lengths = torch.full((B,), a.frames)
    prev = torch.randint(d.nspecial, len(d), (B, a.len), generator=g)
    prev[:, 0] = d.eos()
    tgt = torch.roll(prev, -1, 1)
    tgt[:, -1] = d.eos()
    return [t.to(a.device) for t in (feats, lengths, prev, tgt)]


def train_step(model, opt, b):
    feats, lengths, prev, tgt = b
    lprobs, extra = model(feats, lengths, prev)
    loss = -lprobs.gather(-1, tgt.unsqueeze(-1)).sum()
    for value, weight in extra["losses"].values():
        loss = loss + (1.0 if weight is None else weight) * value
    opt.zero_grad()
    loss.backward()
    opt.step()


def timed(fn, device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--batch", type=int, default=64, help="videos per training batch")
    p.add_argument("--frames", type=int, default=24)
    p.add_argument("--feature-dim", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=1000, help="decoder LSTM state size")
    p.add_argument("--encoder-hidden", type=int, default=500,
                   help="encoder LSTM state size per direction (annotations are twice this)")
    p.add_argument("--embed", type=int, default=256)
    p.add_argument("--attention-dim", type=int, default=100)
    p.add_argument("--vocab", type=int, default=9472,
                   help="default: size of the shared MSVD train dictionary")
    p.add_argument("--len", type=int, default=12, help="caption length (tokens incl. eos)")
    p.add_argument("--decode-videos", type=int, default=32)
    p.add_argument("--decode-rounds", type=int, default=5)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--only", choices=("train", "decode"), help="run one of the two measurements")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    d = make_dict(a.vocab)
    now = datetime.datetime.now(datetime.timezone.utc)
    print(f"# {now:%Y-%m-%d %H:%M} UTC, torch {torch.__version__}, "
          f"device {a.device}, {a.threads} thread(s); command: python {' '.join(sys.argv)}")

    models = {v: build(d, v, a) for v in ("soft", "acvi")}
    if a.only != "decode":
        measure_training(models, d, a)
    if a.only != "train":
        measure_decoding(models["acvi"], d, a)


def measure_training(models, d, a):
    """soft vs acvi, same batch, interleaved."""
    opts = {k: torch.optim.Adam(m.parameters(), lr=0.0) for k, m in models.items()}   # same weights every step
    b = batch(d, a, a.batch, 0)
    for k, m in models.items():
        m.train()
        train_step(m, opts[k], b)  # warm-up
    times = {k: [] for k in models}
    for r in range(a.rounds):
        for k in (("soft", "acvi") if r % 2 == 0 else ("acvi", "soft")):
            times[k].append(timed(lambda: train_step(models[k], opts[k], b), a.device))
    words = a.batch * a.len
    wps = {k: words / statistics.median(v) for k, v in times.items()}
    print(f"# training: {a.batch} videos × {a.frames} frames × {a.feature_dim}-d, captions of "
          f"{a.len} tokens, vocab {a.vocab}, LSTM enc 2×{a.encoder_hidden} / dec {a.hidden}, "
          f"embed {a.embed}, "
          f"attention {a.attention_dim}, Adam, dropout 0.5; {a.rounds} rounds, medians")
    for k in models:
        step = statistics.median(times[k])
        print(f"{k:<6} {wps[k]:9.1f} target words/s   (median step {step:.3f} s)")
    print(f"acvi / soft training = {wps['acvi'] / wps['soft']:.3f}  (target ≥ 0.95)")


def measure_decoding(model, d, a):
    """The same ACVI model and videos with K = 1 and K = 10, interleaved."""
    model.eval()
    feats, lengths, _, _ = batch(d, a, a.decode_videos, 1)
    gen = FeatureSequenceGenerator([model], d, beam_size=a.beam, max_len_a=0, max_len_b=a.len,
                                   min_len=a.len)  # fixed caption length: same steps for both K
    sample = {"net_input": {"src_feats": feats, "src_lengths": lengths}}
    dec = {1: [], 10: []}
    with torch.no_grad():
        model.decoder.context.mc_samples = 1
        gen.forward(sample)  # warm-up
        for r in range(a.decode_rounds):
            for K in ((1, 10) if r % 2 == 0 else (10, 1)):
                model.decoder.context.mc_samples = K
                dec[K].append(timed(lambda: gen.forward(sample), a.device))
    vps = {K: a.decode_videos / statistics.median(v) for K, v in dec.items()}
    print(f"# decoding: {a.decode_videos} videos, beam {a.beam}, {a.len} steps; "
          f"{a.decode_rounds} rounds, medians")
    print(f"K=1: {vps[1]:.2f} videos/s   K=10: {vps[10]:.2f} videos/s   "
          f"K=10 / K=1 = {vps[10] / vps[1]:.3f}  (target ≥ 0.85)")


if __name__ == "__main__":
    main()
