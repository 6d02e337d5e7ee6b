"""Speed of the bAbI memory networks (docs/method.md §4.2 cost claims; D §6.4.4), as ratios measured side by side.

    python benchmarks/bench_babi.py [--data PATH/en] [--task 1] [--repeats 7] [--updates 40] [--joint]
    python benchmarks/bench_babi.py --posterior-only
    python benchmarks/bench_babi.py --device cuda --joint     # on a GPU machine

Prints medians over ``--repeats`` interleaved repetitions of:

The models are configured as ``recipes/babi.sh`` trains them (δ = 50, adjacent tying, empty
memory slots in the softmax, ``tied`` divergence; options to change each), except random noise:
the recipe inserts 10 % empty memories while training (``--random-noise 0.1``, since 2026-11-24);
the plain-PyTorch loop has no such option, so it is off here unless asked for.

1. time per training update of t_memn2n / memn2n (same loop: plugin model + criterion, Adam,
   clipping; target <= 1.05x, the seed reports 1.02x), with the default escort sampler (on the
   CPU: the compiled kernel of fairseq_acvi/csrc), the same with the kernel switched off (the
   Python node), with the other sampler (``--escort-sampler gamma | polar``), and both models
   through fairseq's ``Trainer.train_step`` (what ``fairseq-train`` runs per update);
2. evaluation of the test file with S = 10 posterior draws / S = 1 (target <= 1.5x);
3. the plugin's update through fairseq's own ``Trainer.train_step`` (what ``fairseq-train
   --optimizer torch_adam`` runs per update, collation included) / a minimal plain-PyTorch
   MemN2N written below with the same maths and sizes (target <= 1.5x; the test
   ``tests/test_bench_babi_plain.py`` checks that it computes what the plugin's model computes);
   the plugin model in a bare loop is shown as well. Every loop steps torch's fused Adam.

``--joint`` adds the same measurements at a realistic training setting (all 20 tasks jointly,
δ = 50, random batches of 32, the plain loop on the same collated batches; evaluation on 1000
strided test questions); ``--joint-only`` runs just that one.

Run on an otherwise idle machine for absolute numbers; the ratios are what this script is for.
"""
import argparse
import math
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from bench_common import device_label, sync
BABI_EN = os.path.join("babi", "tasks_1-20_v1-2", "en")  # the en folder under $ACVI_DATA


class PlainMemN2N(nn.Module):
    """Minimal MemN2N (PE, TE, K hops) in plain PyTorch: the same maths and sizes as the plugin's.

    tying "layerwise": A, C shared by the hops, separate B and W, attention over the non-empty
    slots; "adjacent": K + 1 tables E_0..E_K (B = E_0, A^k = E_{k-1}, C^k = E_k, W = E_Kᵀ) with
    temporal tables tied the same way. attend_empty: the memory_size − n empty slots take part
    in the softmax with score 0 and no content (the protocol's ``--empty-memories attend``).
    """

    def __init__(self, vocab, dim=20, hops=3, mem=50, pad=1, tying="layerwise", attend_empty=False):
        super().__init__()
        n = 3 if tying == "layerwise" else hops + 1
        self.E = nn.ModuleList(nn.Embedding(vocab, dim, padding_idx=pad) for _ in range(n))
        self.T = nn.ModuleList(nn.Embedding(mem, dim) for _ in range(2 if tying == "layerwise" else n))
        self.W = nn.Linear(dim, vocab, bias=False) if tying == "layerwise" else None
        self.hops, self.dim, self.pad, self.mem = hops, dim, pad, mem
        self.tying, self.attend_empty = tying, attend_empty
        for p in self.parameters():
            nn.init.normal_(p, std=0.1)
        with torch.no_grad():
            for e in self.E:
                e.weight[pad].zero_()                        # the nil word embeds to 0

    def pe(self, tok):
        J = tok.ne(self.pad).sum(-1, keepdim=True).clamp(min=1).float()
        j = torch.arange(1, tok.size(-1) + 1, device=tok.device).float()
        k = torch.arange(1, self.dim + 1, device=tok.device).float()
        l = (1 - j / J).unsqueeze(-1) - (k / self.dim) * (1 - 2 * j / J).unsqueeze(-1)
        return l * tok.ne(self.pad).unsqueeze(-1)

    def forward(self, story, query):
        B, M, _ = story.shape
        pe_s = self.pe(story)
        mask = story.ne(self.pad).any(-1)
        t = torch.arange(M, device=story.device).expand(B, M)

        def mem(E, T):
            return (E(story) * pe_s).sum(-2) + T(t)

        if self.tying == "layerwise":
            u = (self.E[1](query) * self.pe(query)).sum(-2)
            m, c = mem(self.E[0], self.T[0]), mem(self.E[2], self.T[1])
            ms, cs = [m] * self.hops, [c] * self.hops
        else:
            u = (self.E[0](query) * self.pe(query)).sum(-2)
            e = [mem(self.E[k], self.T[k]) for k in range(self.hops + 1)]
            ms, cs = e[:-1], e[1:]
        null = torch.log((self.mem - mask.sum(-1)).float()).unsqueeze(-1)
        for k in range(self.hops):
            s = (ms[k] @ u.unsqueeze(-1)).squeeze(-1).masked_fill(~mask, -1e9)
            if self.attend_empty:
                p = torch.softmax(torch.cat([s, null], -1), -1)[:, :-1]
            else:
                p = torch.softmax(s, -1)
            u = u + (p.unsqueeze(1) @ cs[k]).squeeze(1)
        logits = self.W(u) if self.W is not None else u @ self.E[-1].weight.t()
        return torch.log_softmax(logits, -1)


def plain_from_plugin(model) -> PlainMemN2N:
    """A PlainMemN2N holding a plugin ``memn2n`` model's weights (to check they compute the same)."""
    assert model.position_encoding and model.temporal_encoding
    plain = PlainMemN2N(model.vocab, dim=model.dim, hops=model.hops, mem=model.memory_size,
                        pad=model.pad, tying=model.tying, attend_empty=model.attend_empty)
    with torch.no_grad():
        for e, n in zip(plain.E, model.embedding_names()):     # A, B, C or E_0..E_K
            e.weight.copy_(model.emb[n] * model.keep)
        for t, w in zip(plain.T, model.temporal):
            t.weight.copy_(w[:model.memory_size])
        if plain.W is not None:
            plain.W.weight.copy_(model.out_proj.weight)
    return plain


def without_kernel(fn):
    """``fn`` run with the compiled t-MEM-NN CPU kernel switched off (the Python node)."""
    from fairseq_acvi.modules.student_t import cpu_kernel

    def run():
        old, cpu_kernel.ENABLED = cpu_kernel.ENABLED, False
        try:
            return fn()
        finally:
            cpu_kernel.ENABLED = old
    return run


def median_ms(fn, n):
    """Mean ms per call of ``fn`` over ``n`` calls (GPU work finished before and after)."""
    sync()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    sync()
    return 1000 * (time.perf_counter() - t) / n


def measure(args, babi_tasks, embed_dim=50, batch_size=None, random_batches=False,
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

    from fairseq.utils import apply_to_sample

    dev = torch.device(args.device)

    def to_dev(sample):
        return apply_to_sample(lambda t: t.to(dev, non_blocking=True), sample)

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
    batches = [to_dev(tr.collater(ix)) for ix in index_sets]
    test_ids = list(range(len(te)))
    if eval_questions and eval_questions < len(te):
        test_ids = test_ids[::len(te) // eval_questions][:eval_questions]

    def make_opt(params):
        """Every loop steps the same optimizer: torch's fused Adam, what --optimizer torch_adam runs."""
        return torch.optim.AdamW(params, lr=0.01, weight_decay=0.0, fused=True)

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
    model_opts = dict(embed_dim=embed_dim, tying=args.tying, empty_memories=args.empty_memories,
                      random_noise=args.random_noise)
    mem = MemN2NModel.build_model(MemN2NConfig(**model_opts), task).to(dev).train()
    tm = TMemN2NModel.build_model(TMemN2NConfig(**model_opts), task).to(dev).train()
    other = "polar" if tm.posterior.sampler == "gamma" else "gamma"
    tm_other = TMemN2NModel.build_model(TMemN2NConfig(escort_sampler=other, **model_opts),
                                        task).to(dev).train()
    step_m = loop(mem, QACrossEntropyCriterion(task), make_opt(mem.parameters()))
    step_t = loop(tm, TDivergenceCriterion(task, args.t_divergence, 0.001),
                  make_opt(tm.parameters()))
    step_t_other = loop(tm_other, TDivergenceCriterion(task, args.t_divergence, 0.001),
                        make_opt(tm_other.parameters()))
    step_t_exact = loop(tm, TDivergenceCriterion(task, "exact"),
                        make_opt(tm.parameters()))
    # the same t-MEM-NN step with the compiled CPU kernel switched off (the Python node)
    step_t_python = without_kernel(loop(tm, TDivergenceCriterion(task, args.t_divergence, 0.001),
                                        make_opt(tm.parameters())))

    plain = PlainMemN2N(len(task.dictionary), dim=embed_dim, mem=task.cfg.memory_size,
                        pad=task.dictionary.pad(), tying=args.tying,
                        attend_empty=args.empty_memories == "attend").to(dev)
    popt = make_opt(plain.parameters())
    story, query, answer = (tr.tensors[k].to(dev) for k in ("story", "query", "answer"))
    pstate = {"i": 0}

    def step_plain():
        i = pstate["i"] % len(batches)
        pstate["i"] += 1
        if random_batches:
            b = batches[i]
            lp, target = plain(b["net_input"]["story"], b["net_input"]["query"]), b["target"]
        else:
            idx = torch.tensor(index_sets[i], device=dev)
            lp, target = plain(story[idx], query[idx]), answer[idx]
        loss = F.nll_loss(lp, target)
        popt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(plain.parameters(), 40.0)
        popt.step()

    # fairseq's own update path (Trainer.train_step), as fairseq-train runs it
    def fairseq_step(arch, criterion_args):
        parser = options.get_training_parser()
        fargs = options.parse_args_and_arch(parser, [
            args.data, "--user-dir", os.path.join(REPO, "fairseq_acvi"), "--task", "babi_qa",
            "--babi-tasks", babi_tasks, "--arch", arch, "--embed-dim", str(embed_dim),
            "--tying", args.tying, "--empty-memories", args.empty_memories,
            "--random-noise", str(args.random_noise)] + criterion_args + [
            "--optimizer", args.fairseq_optimizer, "--lr", "0.01", "--clip-norm", "40",
            "--batch-size", str(bs), "--required-batch-size-multiple", "1", "--no-progress-bar"]
            + (["--cpu"] if dev.type == "cpu" else []))
        cfg = convert_namespace_to_omegaconf(fargs)
        ftask = ftasks.setup_task(cfg.task)
        ftask.load_dataset("train")
        fmodel = ftask.build_model(cfg.model)
        trainer = Trainer(cfg, ftask, fmodel, ftask.build_criterion(cfg.criterion))
        fds = ftask.datasets["train"]
        fstate = {"i": 0}

        def step():
            i = fstate["i"] % len(index_sets)
            fstate["i"] += 1
            trainer.train_step([fds.collater(index_sets[i])])
        return step

    step_fairseq = fairseq_step("memn2n", ["--criterion", "qa_cross_entropy"])
    step_fairseq_t = fairseq_step("t_memn2n", ["--criterion", "t_divergence", "--t-divergence",
                                               args.t_divergence, "--divergence-weight", "0.001"])

    def evaluate(samples):
        tm.eval()
        tm.set_mc_samples(samples)

        def run():
            with torch.no_grad():
                for i in range(0, len(test_ids), 32):
                    tm(**to_dev(te.collater(test_ids[i:i + 32]))["net_input"])
        return run

    eval1, eval10 = evaluate(1), evaluate(10)

    # the optimizer step alone, on copies of the memn2n parameters with gradients:
    # fairseq's own Adam (a per-tensor Python loop without apex) against torch_adam's fused kernel
    from fairseq.optim.adam import Adam as FairseqAdamLoop

    def opt_step(kind):
        ps = [nn.Parameter(p.detach().clone()) for p in mem.parameters()]     # on args.device
        for p in ps:
            p.grad = torch.randn_like(p)
        opt = FairseqAdamLoop(ps, lr=0.01) if kind == "fairseq" else make_opt(ps)
        return opt.step

    adam_fairseq, adam_fused = opt_step("fairseq"), opt_step("fused")
    t_other = f"t_memn2n_{other}"
    timings = {k: [] for k in ("memn2n", "t_memn2n", "t_memn2n_python", t_other, "t_memn2n_exact",
                               "plain", "fairseq", "fairseq_t", "eval_S1", "eval_S10",
                               "adam_fairseq", "adam_fused")}
    for fn in (step_m, step_t, step_t_python, step_t_other, step_t_exact, step_plain,
               step_fairseq, step_fairseq_t):   # warm-up
        for _ in range(5):
            fn()
    for r in range(args.repeats):
        tm.train()
        timings["memn2n"].append(median_ms(step_m, args.updates))
        timings["t_memn2n"].append(median_ms(step_t, args.updates))
        timings["t_memn2n_python"].append(median_ms(step_t_python, args.updates))
        timings[t_other].append(median_ms(step_t_other, args.updates))
        timings["t_memn2n_exact"].append(median_ms(step_t_exact, args.updates))
        timings["plain"].append(median_ms(step_plain, args.updates))
        timings["fairseq"].append(median_ms(step_fairseq, args.updates))
        timings["fairseq_t"].append(median_ms(step_fairseq_t, args.updates))
        timings["eval_S1"].append(median_ms(eval1, 1))
        timings["eval_S10"].append(median_ms(eval10, 1))
        timings["adam_fairseq"].append(median_ms(adam_fairseq, args.updates))
        timings["adam_fused"].append(median_ms(adam_fused, args.updates))
        tm.train()
    med = {k: statistics.median(v) for k, v in timings.items()}
    print(f"bAbI task(s) {babi_tasks}: {len(tr)} train, batch {bs}"
          f"{' (random)' if random_batches else ''}, V={len(task.dictionary)}, d={embed_dim}, "
          f"{args.tying} tying, empty memories {args.empty_memories}, random noise "
          f"{args.random_noise}, t-divergence {args.t_divergence}, escort sampler "
          f"{tm.posterior.sampler} (t_memn2n_{other}: the other one), fairseq --optimizer "
          f"{args.fairseq_optimizer}; "
          f"medians of {args.repeats} interleaved repeats ({args.updates} updates each); "
          f"torch threads {args.threads}, device {device_label(dev)}")
    for k, v in med.items():
        unit = (f"ms per test pass ({len(test_ids)} q, batches of 32)" if k.startswith("eval")
                else "ms per optimizer step (memn2n parameters)" if k.startswith("adam")
                else "ms per update")
        print(f"  {k:16s} {v:8.2f} {unit}")
    print("ratios (target):")
    print(f"  t_memn2n / memn2n per update ({args.t_divergence + ' divergence):':18s} {med['t_memn2n'] / med['memn2n']:.2f}x  (<= 1.05)")
    print(f"  the same, CPU kernel off (Python node)           {med['t_memn2n_python'] / med['memn2n']:.2f}x")
    print(f"  the same through fairseq's Trainer.train_step    {med['fairseq_t'] / med['fairseq']:.2f}x")
    print(f"  {t_other} / memn2n per update               {med[t_other] / med['memn2n']:.2f}x")
    print(f"  t_memn2n / memn2n per update (exact divergence)  {med['t_memn2n_exact'] / med['memn2n']:.2f}x")
    print(f"  evaluation S=10 / S=1                            {med['eval_S10'] / med['eval_S1']:.2f}x  (<= 1.5)")
    print(f"  fairseq Trainer.train_step / plain PyTorch loop  {med['fairseq'] / med['plain']:.2f}x  (<= 1.5)")
    print(f"  plugin model in a bare loop / plain PyTorch loop {med['memn2n'] / med['plain']:.2f}x")
    print(f"  fairseq Trainer.train_step - plugin bare loop    {med['fairseq'] - med['memn2n']:.2f} ms per update")
    print(f"  Adam step: fairseq adam / torch_adam (fused)     {med['adam_fairseq'] / med['adam_fused']:.2f}x")
    return med


def measure_posterior_step(vocab: int, dim: int = 50, repeats: int = 7, steps: int = 100,
                           device: str = "cpu"):
    """The t-MEM-NN training step's own work at one size: escort draw + `tied` divergence,
    forward and backward, as two autograd nodes (``sample`` then ``divergence``), as the one
    Python node a training forward runs (``sample_with_divergence``) and, for ``polar`` on the CPU, as the
    compiled kernel (``fairseq_acvi/csrc``); medians of interleaved repeats, in ms."""
    from fairseq_acvi.modules.student_t import cpu_kernel
    from fairseq_acvi.modules.student_t import StudentTMatrices
    res = {}
    for sampler in ("polar", "gamma"):
        post = StudentTMatrices(4, vocab, dim, zero_rows=(1,), sampler=sampler).to(device)
        w = torch.randn(4, vocab, dim, device=device)

        def separate():
            (post.sample() * w).sum().add(post.divergence(10.0, "tied") * 1e-6).backward()

        def fused():
            draw, div = post.sample_with_divergence(10.0, "tied")
            (draw * w).sum().add(div.weighted * 1e-6).backward()
        fns = {"separate": without_kernel(separate), "fused": without_kernel(fused)}
        if sampler == "polar" and cpu_kernel.usable(post.mu) and cpu_kernel.load() is not None:
            fns["kernel"] = fused
        times = {k: [] for k in fns}
        for fn in fns.values():
            for _ in range(10):
                fn()
        for _ in range(repeats):
            for name, fn in fns.items():
                times[name].append(median_ms(fn, steps))
        res[sampler] = {k: statistics.median(v) for k, v in times.items()}
    print(f"t-MEM-NN draw + divergence, forward and backward, 4 x {vocab} x {dim} on {device} "
          f"(medians of {repeats} interleaved repeats of {steps}):")
    for sampler, r in res.items():
        line = (f"  {sampler:6s} two nodes {r['separate']:.3f} ms, one node {r['fused']:.3f} ms "
                f"({r['fused'] / r['separate']:.2f}x)")
        if "kernel" in r:
            line += (f", compiled kernel {r['kernel']:.3f} ms ({r['kernel'] / r['separate']:.2f}x "
                     f"two nodes, {r['kernel'] / r['fused']:.2f}x one node)")
        print(line)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.environ.get("BABI_DATA"),
                    help="bAbI en folder (default: $BABI_DATA, else $ACVI_DATA/babi/tasks_1-20_v1-2/en)")
    ap.add_argument("--task", default="1")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--updates", type=int, default=40)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="cpu or cuda (every loop and the data on it)")
    ap.add_argument("--fairseq-optimizer", default="torch_adam", choices=["torch_adam", "adam"],
                    help="the fairseq path's --optimizer (adam: fairseq's own per-tensor loop)")
    ap.add_argument("--embed-dim", type=int, default=50, help="δ of the single-task measurement")
    ap.add_argument("--tying", default="adjacent", choices=["layerwise", "adjacent"])
    ap.add_argument("--empty-memories", default="attend", choices=["mask", "attend"])
    ap.add_argument("--random-noise", type=float, default=0.0)
    ap.add_argument("--t-divergence", default="tied", choices=["seed", "tied"],
                    help="the t_memn2n column's divergence (exact is always measured too)")
    ap.add_argument("--joint", action="store_true",
                    help="also measure the realistic joint setting: all 20 tasks, d = 50, "
                         "random batches of 32, 1000 strided test questions")
    ap.add_argument("--joint-only", action="store_true", help="measure only the joint setting")
    ap.add_argument("--posterior-only", action="store_true",
                    help="measure only the t-MEM-NN draw + divergence step, two autograd nodes "
                         "against the fused one, at task 1's and the joint dictionary's sizes")
    args = ap.parse_args()
    if args.data is None and not args.posterior_only:
        if not os.environ.get("ACVI_DATA"):
            ap.error("no bAbI folder: pass --data <bAbI en folder> or set BABI_DATA=<bAbI en folder> or "
                     "ACVI_DATA=<data root holding babi/tasks_1-20_v1-2/en> (e.g. ACVI_DATA=../shared/data)")
        args.data = os.path.join(os.environ["ACVI_DATA"], BABI_EN)
    torch.set_num_threads(args.threads)
    import fairseq_acvi  # noqa: F401

    if args.posterior_only:
        for v in (23, 178):                      # task 1's and the joint dictionary's sizes
            measure_posterior_step(v, device=args.device)
        return
    if not args.joint_only:
        measure(args, args.task, embed_dim=args.embed_dim)
    if args.joint or args.joint_only:
        measure(args, "all", embed_dim=50, batch_size=32, random_batches=True, eval_questions=1000)


if __name__ == "__main__":
    main()
