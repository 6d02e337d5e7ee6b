"""Speed of the bAbI memory networks (METHOD §4.2 cost claims; D §6.4.4), as ratios measured side by side.

    python benchmarks/bench_babi.py [--data PATH/en] [--task 1] [--repeats 7] [--updates 40] [--joint]

Prints medians over ``--repeats`` interleaved repetitions of:

1. time per training update of t_memn2n / memn2n (same loop: plugin model + criterion, Adam,
   clipping; target <= 1.05x, the seed reports 1.02x);
2. evaluation of the test file with S = 10 posterior draws / S = 1 (target <= 1.5x);
3. the plugin's update through fairseq's own ``Trainer.train_step`` (what ``fairseq-train``
   runs per update, collation included) / a minimal plain-PyTorch MemN2N written below with the
   same maths and sizes (target <= 1.5x); the plugin model in a bare loop is shown as well.

``--joint`` adds the same measurements at a realistic training setting (all 20 tasks jointly,
δ = 50, random batches of 32, the plain loop on the same collated batches; evaluation on 1000
strided test questions); ``--joint-only`` runs just that one.

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


def measure(args, babi_tasks, embed_dim=20, batch_size=None, random_batches=False,
            eval_questions=None):
    """Medians (ms) of the seven timings for one setting; prints them with the ratios.

    Default (task 1): ⌈N/32⌉-question batches in file order, the plain loop indexing the padded
    dataset tensors, the whole test file evaluated, as in the first version of this script.
    ``random_batches``: 32 seeded random batches of ``batch_size`` (what fairseq-train's shuffled
    epochs give); every loop, the plain one included, runs on the same collated batches.
    ``eval_questions``: evaluate an evenly strided subset of the test set of that size.
    """
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.trainer import Trainer
    from fairseq import tasks as ftasks

    from fairseq_acvi.criterions.qa_cross_entropy import QACrossEntropyCriterion
    from fairseq_acvi.criterions.t_divergence import TDivergenceCriterion
    from fairseq_acvi.models.memn2n import MemN2NConfig, MemN2NModel, TMemN2NConfig, TMemN2NModel
    from fairseq_acvi.tasks.babi_qa import BabiQAConfig, BabiQATask

    task = BabiQATask.setup_task(BabiQAConfig(data=args.data, babi_tasks=babi_tasks))
    for split in ("train", "test"):
        task.load_dataset(split)
    tr, te = task.datasets["train"], task.datasets["test"]
    if random_batches:
        bs = batch_size
        g = torch.Generator().manual_seed(0)
        index_sets = [torch.randperm(len(tr), generator=g)[:bs].tolist() for _ in range(32)]
    else:
        bs = batch_size or math.ceil(len(tr) / 32)
        index_sets = [list(range(i, min(i + bs, len(tr)))) for i in range(0, len(tr), bs)]
    batches = [tr.collater(ix) for ix in index_sets]
    test_ids = list(range(len(te)))
    if eval_questions and eval_questions < len(te):
        test_ids = test_ids[::len(te) // eval_questions][:eval_questions]

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
    mem = MemN2NModel.build_model(MemN2NConfig(embed_dim=embed_dim), task).train()
    tm = TMemN2NModel.build_model(TMemN2NConfig(embed_dim=embed_dim), task).train()
    step_m = loop(mem, QACrossEntropyCriterion(task), torch.optim.Adam(mem.parameters(), lr=0.01, foreach=True))
    step_t = loop(tm, TDivergenceCriterion(task, "seed"), torch.optim.Adam(tm.parameters(), lr=0.01, foreach=True))
    step_t_exact = loop(tm, TDivergenceCriterion(task, "exact"),
                        torch.optim.Adam(tm.parameters(), lr=0.01, foreach=True))

    plain = PlainMemN2N(len(task.dictionary), dim=embed_dim, mem=55, pad=task.dictionary.pad())
    popt = torch.optim.Adam(plain.parameters(), lr=0.01, foreach=True)
    story, query, answer = tr.tensors["story"], tr.tensors["query"], tr.tensors["answer"]
    pstate = {"i": 0}

    def step_plain():
        i = pstate["i"] % len(batches)
        pstate["i"] += 1
        if random_batches:
            b = batches[i]
            lp, target = plain(b["net_input"]["story"], b["net_input"]["query"]), b["target"]
        else:
            idx = torch.tensor(index_sets[i])
            lp, target = plain(story[idx], query[idx]), answer[idx]
        loss = F.nll_loss(lp, target)
        popt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(plain.parameters(), 40.0)
        popt.step()

    # fairseq's own update path (Trainer.train_step), as fairseq-train runs it
    parser = options.get_training_parser()
    fargs = options.parse_args_and_arch(parser, [
        args.data, "--user-dir", os.path.join(REPO, "fairseq_acvi"), "--task", "babi_qa",
        "--babi-tasks", babi_tasks, "--arch", "memn2n", "--embed-dim", str(embed_dim),
        "--criterion", "qa_cross_entropy",
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
        i = fstate["i"] % len(index_sets)
        fstate["i"] += 1
        trainer.train_step([fds.collater(index_sets[i])])

    def evaluate(samples):
        tm.eval()
        tm.set_mc_samples(samples)

        def run():
            with torch.no_grad():
                for i in range(0, len(test_ids), 32):
                    tm(**te.collater(test_ids[i:i + 32])["net_input"])
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
    print(f"bAbI task(s) {babi_tasks}: {len(tr)} train, batch {bs}"
          f"{' (random)' if random_batches else ''}, V={len(task.dictionary)}, d={embed_dim}; "
          f"medians of {args.repeats} interleaved repeats ({args.updates} updates each); "
          f"torch threads {args.threads}")
    for k, v in med.items():
        unit = (f"ms per test pass ({len(test_ids)} q, batches of 32)" if k.startswith("eval")
                else "ms per update")
        print(f"  {k:16s} {v:8.2f} {unit}")
    print("ratios (target):")
    print(f"  t_memn2n / memn2n per update (seed divergence)   {med['t_memn2n'] / med['memn2n']:.2f}x  (<= 1.05)")
    print(f"  t_memn2n / memn2n per update (exact divergence)  {med['t_memn2n_exact'] / med['memn2n']:.2f}x")
    print(f"  evaluation S=10 / S=1                            {med['eval_S10'] / med['eval_S1']:.2f}x  (<= 1.5)")
    print(f"  fairseq Trainer.train_step / plain PyTorch loop  {med['fairseq'] / med['plain']:.2f}x  (<= 1.5)")
    print(f"  plugin model in a bare loop / plain PyTorch loop {med['memn2n'] / med['plain']:.2f}x")
    print(f"  fairseq Trainer.train_step - plugin bare loop    {med['fairseq'] - med['memn2n']:.2f} ms per update")
    return med


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.environ.get("BABI_DATA", DEFAULT_DATA))
    ap.add_argument("--task", default="1")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--updates", type=int, default=40)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--joint", action="store_true",
                    help="also measure the realistic joint setting: all 20 tasks, d = 50, "
                         "random batches of 32, 1000 strided test questions")
    ap.add_argument("--joint-only", action="store_true", help="measure only the joint setting")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    import fairseq_acvi  # noqa: F401

    if not args.joint_only:
        measure(args, args.task)
    if args.joint or args.joint_only:
        measure(args, "all", embed_dim=50, batch_size=32, random_batches=True, eval_questions=1000)


if __name__ == "__main__":
    main()
