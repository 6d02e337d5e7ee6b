"""Where a training step's time goes at the Multi30K preset's shape (README beside this file):
the whole ELBO step, the encoder alone, the output layer alone; the rest is the decoder's LSTM,
attention, loss and update. Run from the repository root: python docs/results/parallel_decoder_2026-11-29/time_parts.py"""
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from bench_common import elbo_train_step  # noqa: E402
from bench_seq2seq import batch, make_dict, ours  # noqa: E402

torch.set_num_threads(1)
d = make_dict(7860)
b = batch(d, 256, 14, 0, 15)
src, lengths, prev, tgt = b
for feeding in (1, 0):
    m = ours(d, "soft", 256, 1, input_feeding=feeding)
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=0.0)      # the same weights at every step (bench_common)

    def encoder():
        m.encoder(src, lengths)["encoder_out"][0].sum().backward()

    def output_layer():
        h = torch.randn(256, 14, 1, 256, requires_grad=True)
        torch.log_softmax(m.decoder.head.fc_out(h).float(), -1).sum().backward()

    res = {}
    for name, fn in (("step", lambda: elbo_train_step(m, opt, *b)), ("encoder", encoder),
                     ("output layer", output_layer)):
        fn()
        times = []
        for _ in range(5):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        res[name] = statistics.median(times)
    rest = res["step"] - res["encoder"] - res["output layer"]
    print(f"input feeding {feeding}: " + ", ".join(f"{k} {v:.3f} s" for k, v in res.items())
          + f", the rest {rest:.3f} s")
