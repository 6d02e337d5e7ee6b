"""Speed of the bAbI memory networks (METHOD §4.2 cost claims; D §6.4.4), as ratios measured side by side.

    python benchmarks/bench_babi.py [--data PATH/en] [--task 1] [--repeats 7] [--updates 40]

Prints medians over ``--repeats`` interleaved repetitions of:

1. time per training update of t_memn2n / memn2n (same loop: plugin model + criterion, Adam,
   clipping; target <= 1.05x, the seed reports 1.02x);
2. evaluation of the test file with S = 10 posterior draws / S = 1 (target <= 1.5x);
3. the plugin's update through fairseq's own ``Trainer.train_step`` (what ``fairseq-train``
   runs per update, collation included) / a minimal plain-PyTorch MemN2N written below with the
   same maths and sizes (target <= 1.5x); the plugin model in a bare loop is shown as well.

Run on an otherwise idle machine for absolute numbers; the ratios are what this script is for.
"""
import argparse
import math
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
DEFAULT_DATA = os.path.join(os.path.dirname(REPO), "shared", "data", "babi", "tasks_1-20_v1-2", "en")


class PlainMemN2N(nn.Module):
    """Minimal MemN2N (PE, TE, layer-wise tying, 3 hops, masked softmax) in plain PyTorch."""

    def __init__(self, vocab, dim=20, hops=3, mem=55, pad=1):
        super().__init__()
        self.A, self.B, self.C = (nn.Embedding(vocab, dim, padding_idx=pad) for _ in range(3))
        self.TA, self.TC = nn.Embedding(mem, dim), nn.Embedding(mem, dim)
        self.W = nn.Linear(dim, vocab, bias=False)
        self.hops, self.dim, self.pad = hops, dim, pad
        for p in self.parameters():
            nn.init.normal_(p, std=0.1)

    def pe(self, tok):
        J = tok.ne(self.pad).sum(-1, keepdim=True).clamp(min=1).float()
        j = torch.arange(1, tok.size(-1) + 1).float()
        k = torch.arange(1, self.dim + 1).float()
        l = (1 - j / J).unsqueeze(-1) - (k / self.dim) * (1 - 2 * j / J).unsqueeze(-1)
        return l * tok.ne(self.pad).unsqueeze(-1)

    def forward(self, story, query):
        B, M, _ = story.shape
        pe_s = self.pe(story)
        mask = story.ne(self.pad).any(-1)
        t = torch.arange(M).expand(B, M)
        m = (self.A(story) * pe_s).sum(-2) + self.TA(t)
        c = (self.C(story) * pe_s).sum(-2) + self.TC(t)
        u = (self.B(query) * self.pe(query)).sum(-2)
        for _ in range(self.hops):
            p = torch.softmax((m @ u.unsqueeze(-1)).squeeze(-1).masked_fill(~mask, -1e9), -1)
            u = u + (p.unsqueeze(1) @ c).squeeze(1)
        return torch.log_softmax(self.W(u), -1)


def median_ms(fn, n):
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return 1000 * (time.perf_counter() - t) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.environ.get("BABI_DATA", DEFAULT_DATA))
    ap.add_argument("--task", default="1")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--updates", type=int, default=40)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    import fairseq_acvi  # noqa: F401
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.trainer import Trainer
    from fairseq import tasks as ftasks

    from fairseq_acvi.criterions.qa_cross_entropy import QACrossEntropyCriterion
    from fairseq_acvi.criterions.t_divergence import TDivergenceCriterion
    from fairseq_acvi.models.memn2n import MemN2NConfig, MemN2NModel, TMemN2NConfig, TMemN2NModel
    from fairseq_acvi.tasks.babi_qa import BabiQAConfig, BabiQATask

    task = BabiQATask.setup_task(BabiQAConfig(data=args.data, babi_tasks=args.task))
    for split in ("train", "test"):
        task.load_dataset(split)
    tr, te = task.datasets["train"], task.datasets["test"]
    bs = math.ceil(len(tr) / 32)
    batches = [tr.collater(list(range(i, min(i + bs, len(tr))))) for i in range(0, len(tr), bs)]

    def loop(model, crit, opt):
        state = {"i": 0}

        def step():
            s = batches[state["i"] % len(batches)]
            state["i"] += 1
            loss, n, _ = crit(model, s)
            opt.zero_grad(set_to_none=True)
            (loss / n).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 40.0)
            opt.step()
        return step

    torch.manual_seed(0)
    mem = MemN2NModel.build_model(MemN2NConfig(), task).train()
    tm = TMemN2NModel.build_model(TMemN2NConfig(), task).train()
    step_m = loop(mem, QACrossEntropyCriterion(task), torch.optim.Adam(mem.parameters(), lr=0.01, foreach=True))
    step_t = loop(tm, TDivergenceCriterion(task, "seed"), torch.optim.Adam(tm.parameters(), lr=0.01, foreach=True))
    step_t_exact = loop(tm, TDivergenceCriterion(task, "exact"),
                        torch.optim.Adam(tm.parameters(), lr=0.01, foreach=True))

    plain = PlainMemN2N(len(task.dictionary), mem=55, pad=task.dictionary.pad())
    popt = torch.optim.Adam(plain.parameters(), lr=0.01, foreach=True)
    story, query, answer = tr.tensors["story"], tr.tensors["query"], tr.tensors["answer"]
    pstate = {"i": 0}

    def step_plain():
        i = pstate["i"] % 32
        pstate["i"] += 1
        idx = torch.arange(i * bs, min((i + 1) * bs, len(tr)))
        lp = plain(story[idx], query[idx])
        loss = F.nll_loss(lp, answer[idx])
        popt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(plain.parameters(), 40.0)
        popt.step()

    # fairseq's own update path (Trainer.train_step), as fairseq-train runs it
    parser = options.get_training_parser()
    fargs = options.parse_args_and_arch(parser, [
        args.data, "--user-dir", os.path.join(REPO, "fairseq_acvi"), "--task", "babi_qa",
        "--babi-tasks", args.task, "--arch", "memn2n", "--criterion", "qa_cross_entropy",
        "--optimizer", "adam", "--lr", "0.01", "--clip-norm", "40", "--batch-size", str(bs),
        "--cpu", "--required-batch-size-multiple", "1", "--no-progress-bar"])
    cfg = convert_namespace_to_omegaconf(fargs)
    ftask = ftasks.setup_task(cfg.task)
    ftask.load_dataset("train")
    fmodel = ftask.build_model(cfg.model)
    trainer = Trainer(cfg, ftask, fmodel, ftask.build_criterion(cfg.criterion))
    fds = ftask.datasets["train"]
    fstate = {"i": 0}

    def step_fairseq():
        i = fstate["i"] % 32
        fstate["i"] += 1
        trainer.train_step([fds.collater(list(range(i * bs, min((i + 1) * bs, len(fds)))))])

    def evaluate(samples):
        tm.eval()
        tm.set_mc_samples(samples)

        def run():
            with torch.no_grad():
                for i in range(0, len(te), 32):
                    tm(**te.collater(list(range(i, min(i + 32, len(te)))))["net_input"])
        return run

    eval1, eval10 = evaluate(1), evaluate(10)
    timings = {k: [] for k in ("memn2n", "t_memn2n", "t_memn2n_exact", "plain", "fairseq", "eval_S1", "eval_S10")}
    for fn in (step_m, step_t, step_t_exact, step_plain, step_fairseq):   # warm-up
        for _ in range(5):
            fn()
    for r in range(args.repeats):
        tm.train()
        timings["memn2n"].append(median_ms(step_m, args.updates))
        timings["t_memn2n"].append(median_ms(step_t, args.updates))
        timings["t_memn2n_exact"].append(median_ms(step_t_exact, args.updates))
        timings["plain"].append(median_ms(step_plain, args.updates))
        timings["fairseq"].append(median_ms(step_fairseq, args.updates))
        timings["eval_S1"].append(median_ms(eval1, 1))
        timings["eval_S10"].append(median_ms(eval10, 1))
        tm.train()
    med = {k: statistics.median(v) for k, v in timings.items()}
    print(f"bAbI task {args.task}: {len(tr)} train, batch {bs}, V={len(task.dictionary)}; "
          f"medians of {args.repeats} interleaved repeats ({args.updates} updates each); "
          f"torch threads {args.threads}")
    for k, v in med.items():
        unit = "ms per test pass (1000 q, batches of 32)" if k.startswith("eval") else "ms per update"
        print(f"  {k:16s} {v:8.2f} {unit}")
    print("ratios (target):")
    print(f"  t_memn2n / memn2n per update (seed divergence)   {med['t_memn2n'] / med['memn2n']:.2f}x  (<= 1.05)")
    print(f"  t_memn2n / memn2n per update (exact divergence)  {med['t_memn2n_exact'] / med['memn2n']:.2f}x")
    print(f"  evaluation S=10 / S=1                            {med['eval_S10'] / med['eval_S1']:.2f}x  (<= 1.5)")
    print(f"  fairseq Trainer.train_step / plain PyTorch loop  {med['fairseq'] / med['plain']:.2f}x  (<= 1.5)")
    print(f"  plugin model in a bare loop / plain PyTorch loop {med['memn2n'] / med['plain']:.2f}x")


if __name__ == "__main__":
    main()
