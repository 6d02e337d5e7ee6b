"""Rendering: babi_report.md and the bar charts from the results files.

Per setup (single: D Table 2; joint: D Table 10) the test accuracy of every column beside the
published one (fairseq_acvi/published.py, docs/method.md §5: D Table 2, Tables 11-15 for the
other release folders; en-1k's, headed "pub. en-1k", where the seed has none), the passed (≥ 95 %) and mean rows, what selection did, t-MEM-NN's uncertainty
over its right and wrong answers (docs/uncertainty.md), the fitted ν; then the per-hop attention
of the chosen single-task models for chosen test questions (rebuilt from their checkpoints,
fairseq_acvi/babi_eval/checkpoint.py).
"""
import os
from typing import Dict, List, Optional

import torch

from fairseq_acvi.babi_eval.build import make_task, setup_args, t_embed_dim
from fairseq_acvi.babi_eval.checkpoint import ckpt_name, load_model
from fairseq_acvi.babi_eval.evaluate import UNCERTAINTY_NAMES, UNCERTAINTY_SAMPLES
from fairseq_acvi.babi_eval.results import check_variant, data_variant, load_results
from fairseq_acvi.charts import save_chart
from fairseq_acvi.published import BABI_JOINT, BABI_TASK_NAMES, babi_single_published


def collect(results: dict) -> Dict[str, Dict[int, float]]:
    """column name -> task -> test accuracy, from one setup's results."""
    cols: Dict[str, Dict[int, float]] = {}
    for key, info in results.items():
        for col, accs in info.get("test", {}).items():
            for t, a in accs.items():
                cols.setdefault(col, {})[int(t)] = a
    return cols


def passed(accuracies: List[float]) -> int:
    """Tasks at ≥ 95 % test accuracy. Results recorded before accuracies came from integer
    counts hold float32 means (950 of 1,000 as 94.9999988): compared at 10⁻⁴ %, far below one
    question in a test set."""
    return sum(round(a, 4) >= 95 for a in accuracies)


def table(setup: str, results: dict, published: dict, pub_label: str = "pub.") -> List[str]:
    """Markdown table: per task, the published and our test accuracy of each column, then the
    passed (≥ 95 %) and mean rows. ``pub_label`` heads the published columns ("pub. en-1k" when the
    data is another variant)."""
    cols = collect(results)
    names = ["memn2n", "t_memn2n_S1", "t_memn2n_S10"]
    tasks = sorted({t for c in cols.values() for t in c})
    p = pub_label
    lines = [f"| task | MemN2N ({p}) | MemN2N (ours) | t-MEM-NN S=1 ({p}) | t-MEM-NN S=1 (ours) "
             f"| t-MEM-NN S=10 ({p}) | t-MEM-NN S=10 (ours) |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for t in tasks:
        row = [f"{t}: {BABI_TASK_NAMES.get(t, '')}"]
        for i, c in enumerate(names):
            pub = published.get(t, (None,) * 3)[i]
            ours = cols.get(c, {}).get(t)
            row += ["—" if pub is None else f"{pub}", "—" if ours is None else f"{ours:.1f}"]
        lines.append("| " + " | ".join(row) + " |")
    # summary rows
    for label, fn in [("passed (≥ 95%)", lambda v: f"{passed(v)}"),
                      ("mean", lambda v: f"{sum(v) / len(v):.1f}")]:
        row = [f"**{label}** (over the {len(tasks)} tasks run)"]
        for i, c in enumerate(names):
            pv = [published[t][i] for t in tasks if t in published]
            ov = [cols[c][t] for t in tasks if c in cols and t in cols[c]]
            row += [fn(pv) if pv else "—", fn(ov) if ov else "—"]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def selection_table(results: dict) -> List[str]:
    """What selection did, from the test accuracy every run records (never used to select):
    per column, passed (≥ 95 %) / mean over tasks of the chosen runs, of the runs validation
    accuracy alone would choose (ties to the lower seed), and the mean over all runs.
    Empty for results recorded before runs kept their test accuracy (single setup only)."""
    by_col: Dict[str, Dict[str, List[float]]] = {}
    for key, info in results.items():
        runs = info.get("runs", [])
        if not runs or not all("test" in r for r in runs) or "," in key.split("|")[1]:
            continue
        by_acc = max(runs, key=lambda r: (r["valid"], -r["seed"]))
        for col, accs in info["test"].items():
            t = next(iter(accs))
            row = by_col.setdefault(col, {"chosen": [], "acc_only": [], "mean": []})
            row["chosen"].append(accs[t])
            row["acc_only"].append(by_acc["test"][col][t])
            row["mean"].append(sum(r["test"][col][t] for r in runs) / len(runs))
    if not by_col:
        return []
    label = {"memn2n": "MemN2N", "t_memn2n_S1": "t-MEM-NN S=1", "t_memn2n_S10": "t-MEM-NN S=10"}

    def cell(v: List[float]) -> str:
        return f"{passed(v)} / {sum(v) / len(v):.1f}"
    lines = ["| test accuracy: passed / mean over tasks | chosen (accuracy, then NLL) "
             "| validation accuracy alone | mean over all runs |", "|---|---|---|---|"]
    for col in sorted(by_col):
        r = by_col[col]
        lines.append(f"| {label.get(col, col)} ({len(r['chosen'])} tasks) | {cell(r['chosen'])} "
                     f"| {cell(r['acc_only'])} | {cell(r['mean'])} |")
    return lines


def uncertainty_table(results: dict) -> List[str]:
    """Per task, t-MEM-NN's (S = 10) mean predictive entropy, expected entropy and mutual
    information over its right and its wrong test answers (the chosen runs; nats per question),
    and the pooled row. Empty for results recorded before runs kept it."""
    col = f"t_memn2n_S{UNCERTAINTY_SAMPLES}"
    per_task, pooled = {}, []
    for key, info in results.items():
        arch, spec = key.split("|")
        u = info.get("test_uncertainty", {}).get(col)
        if arch != "t_memn2n" or not u:
            continue
        for t, rows in u.items():
            if t == "all":
                pooled.append(rows)
            else:
                per_task.setdefault(int(t), rows)
    if not per_task:
        return []

    def cell(rows, name, part):
        v = rows[part][name]
        return "—" if v is None else f"{v:.3f}"
    lines = ["| task | right / wrong | H[p̄] right | H[p̄] wrong | E H right | E H wrong "
             "| I right | I wrong |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for t in sorted(per_task):
        r = per_task[t]
        lines.append(f"| {t}: {BABI_TASK_NAMES.get(t, '')} | {r['right']['n']} / {r['wrong']['n']} | "
                     + " | ".join(cell(r, name, part) for name in UNCERTAINTY_NAMES
                                  for part in ("right", "wrong")) + " |")
    # pooled over every question of every task: weighted by the counts
    tot = {}
    for part in ("right", "wrong"):
        n = sum(rows[part]["n"] for rows in pooled)
        tot[part] = {"n": n, **{name: (sum(rows[part]["n"] * rows[part][name] for rows in pooled
                                           if rows[part]["n"]) / n if n else None)
                                for name in UNCERTAINTY_NAMES}}
    lines.append(f"| **all questions** | {tot['right']['n']} / {tot['wrong']['n']} | "
                 + " | ".join(cell(tot, name, part) for name in UNCERTAINTY_NAMES
                              for part in ("right", "wrong")) + " |")
    return lines


def nu_table(results: dict) -> List[str]:
    """Per chosen run: t-MEM-NN's fitted ν per matrix, β, the kept epoch, its validation
    accuracy, seconds per run and ms per update."""
    lines = ["| run | ν per matrix | β | best epoch | valid acc | s per run | ms/update |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for key in sorted(results, key=lambda k: (k.split("|")[0], k.split("|")[1])):
        info = results[key]
        nu = ", ".join(f"ν_{k}={v:.3g}" for k, v in info.get("nu", {}).items()) or "—"
        arch, spec = key.split("|")
        beta = info.get("divergence_weight", "—")
        lines.append(f"| {arch}, tasks {spec} (seed {info.get('seed')}) | {nu} | {beta} | {info['best_epoch']} | "
                     f"{info['valid']:.1f} | {info['seconds']:.0f} | {info['ms_per_update']:.1f} |")
    return lines


def chart(out_dir: str, results: dict, published: dict, setup: str,
          variant: str = "en", published_variant: str = "en") -> Optional[str]:
    """babi_accuracy_<setup>.png in ``out_dir``: per task, ours and the published test accuracy
    of every column; its file name, or None (no matplotlib, or no results)."""
    try:
        import logging
        import matplotlib
        matplotlib.use("Agg")
        logging.getLogger("matplotlib").setLevel(logging.WARNING)
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    cols = collect(results)
    tasks = sorted({t for c in cols.values() for t in c})
    if not tasks:
        return None
    names = [("memn2n", "MemN2N"), ("t_memn2n_S1", "t-MEM-NN S=1"), ("t_memn2n_S10", "t-MEM-NN S=10")]
    fig, ax = plt.subplots(figsize=(max(6, len(tasks) * 0.7), 4))
    w = 0.8 / (2 * len(names))
    for i, (c, label) in enumerate(names):
        xs = [t + (2 * i - len(names)) * w for t in tasks]
        ax.bar(xs, [cols.get(c, {}).get(t, 0) for t in tasks], w, label=f"{label} (ours)")
        ax.bar([x + w for x in xs], [published.get(t, (0, 0, 0))[i] for t in tasks], w,
               label=f"{label} (published{'' if variant == published_variant else ', en-1k'})",
               alpha=0.45)
    ax.axhline(95, color="k", lw=0.8, ls="--")
    ax.set_xticks(tasks)
    ax.set_xlabel("bAbI task")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(f"bAbI {variant}, {setup} training"
                 + ("" if variant == published_variant else " (published: en-1k)"))
    ax.legend(fontsize=6, ncol=3, loc="lower left")
    fig.tight_layout()
    name = f"babi_accuracy_{setup}.png"
    save_chart(fig, os.path.join(out_dir, name), dpi=120)
    plt.close(fig)
    return name


def attention_section(args) -> List[str]:
    """Per-hop most-attended fact of each model for the chosen test questions (answers as
    written: a multi-word answer shows its words, :func:`~fairseq_acvi.data.babi.answer_text`).
    ``--attention`` names them (task:question index); the single-task models are rebuilt from
    OUT/ckpt (:func:`~fairseq_acvi.babi_eval.checkpoint.load_model`), questions whose models
    are not there are left out. attn (1, K, M): slot j is the j-th most recent fact."""
    from fairseq_acvi.data.babi import answer_text
    lines = []
    for item in [x for x in args.attention.split(",") if x]:
        t, q = (int(v) for v in item.split(":"))
        spec = str(t)
        paths = {a: os.path.join(args.out_dir, "ckpt", ckpt_name("single", a, spec))
                 for a in ("memn2n", "t_memn2n")}
        if not all(os.path.exists(p) for p in paths.values()):
            continue
        task = make_task(args.data, spec)
        te = task.datasets["test"]
        if q >= len(te):
            continue
        ex = te.examples[q]
        mem = ex.story[-task.cfg.memory_size:]
        s = te.batch(torch.tensor([q]))
        lines += [f"### Task {t}, test question {q} ({os.path.basename(ex.source)})", "",
                  "Facts: " + " / ".join(f"{i + 1}. {' '.join(w)}" for i, w in enumerate(mem)), "",
                  f"Question: {' '.join(ex.query)}? — answer **{answer_text(ex.answer)}**; supporting facts: "
                  + "; ".join(' '.join(ex.story[i]) for i in ex.supports), "",
                  "| model | predicted | hop 1 | hop 2 | hop 3 |", "|---|---|---|---|---|"]
        for arch, samples in [("memn2n", None), ("t_memn2n", 1), ("t_memn2n", 10)]:
            model = load_model(paths[arch], task, arch, args)
            model.eval()
            if samples is not None:
                model.set_mc_samples(samples)
            torch.manual_seed(0)
            with torch.no_grad():
                lp, extra = model(**s["net_input"])
            pred = answer_text(task.target_dictionary[int(lp.argmax(-1))])
            hops = []
            for h in range(extra["attn"].size(1)):
                a = extra["attn"][0, h]
                j = int(a.argmax())                      # slot j = j-th most recent fact
                fact = mem[len(mem) - 1 - j]
                hops.append(f"{' '.join(fact)} ({a[j]:.2f})")
            label = "MemN2N" if samples is None else f"t-MEM-NN S={samples}"
            lines.append(f"| {label} | {pred} | " + " | ".join(hops) + " |")
        lines.append("")
    return lines


def protocol_text(p: dict) -> str:
    """One run's recorded training options (:func:`~fairseq_acvi.babi_eval.build.run_protocol`)
    in words."""
    text = (f"optimizer {p['optimizer']}, lr {p['lr']} halved every {p['anneal_every']} epochs, "
            f"{p['epochs']} epochs, clip {p['clip_norm']}, {p['hops']} hops, {p['tying']} tying, "
            f"empty memories `{p['empty_memories']}`, random noise {p['random_noise']}, linear "
            f"start {p['linear_start_epochs']} epochs")
    if "t_divergence" in p:
        text += (f", t-divergence `{p['t_divergence']}`, prior ν={p['prior_dof']}, initial σ "
                 f"{p['sigma_init']}")
    if p.get("answer_classes", "dictionary") != "dictionary":
        text += f", answers over the training answers (`--answer-classes {p['answer_classes']}`)"
    return text


def recorded_protocols(results: dict, arch: str) -> Optional[List[dict]]:
    """The distinct training options the runs of ``arch`` recorded, or None when any run
    records none (runs written before runs kept them)."""
    runs = [r for k, v in results.items() if k.split("|")[0] == arch for r in v.get("runs", [])]
    if not runs or any("protocol" not in r for r in runs):
        return None
    distinct = []
    for r in runs:
        if r["protocol"] not in distinct:
            distinct.append(r["protocol"])
    return distinct


def runs_line(results: dict) -> str:
    """What the results themselves say about their protocol (true also for --merge and
    --render-only, whose command-line options need not be the runs'): per model, runs per task,
    seed range, δ, t-MEM-NN's escort sampler (runs recorded before the option existed used
    ``gamma``) and the minibatches (runs that record them)."""
    parts = []
    for arch, label in (("memn2n", "MemN2N"), ("t_memn2n", "t-MEM-NN")):
        infos = [v for k, v in results.items() if k.split("|")[0] == arch]
        if not infos:
            continue
        n = sorted({len(v.get("runs", [])) for v in infos})
        seeds = [r["seed"] for v in infos for r in v.get("runs", [])]
        dims = sorted({v.get("embed_dim") for v in infos if v.get("embed_dim")})
        line = (f"{label}: best of {'/'.join(map(str, n))} runs per task by validation "
                f"(seeds {min(seeds)}-{max(seeds)}), δ {'/'.join(map(str, dims)) or '?'}")
        if arch == "t_memn2n":
            samplers = sorted({r.get("escort_sampler", "gamma")
                               for v in infos for r in v.get("runs", [])})
            line += f", escort sampler {'/'.join(samplers)}"
        batching = sorted({(r["updates_per_epoch"],
                            round(r["train_questions"] / r["updates_per_epoch"]))
                           for v in infos for r in v.get("runs", []) if r.get("updates_per_epoch")})
        if batching:
            line += ", " + "/".join(f"{u} updates per epoch (≈ {b} questions each)"
                                    for u, b in batching)
        protocols = recorded_protocols(results, arch)
        if protocols and len(protocols) == 1:
            line += "; " + protocol_text(protocols[0])
        elif protocols:
            differ = sorted({k for p in protocols for k in p if any(p.get(k) != q.get(k)
                                                                   for q in protocols)})
            line += f"; the runs were trained with different options ({', '.join(differ)})"
        parts.append(line)
    return "From the results: " + "; ".join(parts) + "."


def merged_header(args, recorded: bool) -> str:
    """The header's options sentence for ``--merge`` / ``--render-only``: the runs' own (each
    section's first line) when every run records them, else this command's, said to be so."""
    if recorded:
        return ("the options each section's runs were trained with are its first line (results "
                "merged or re-rendered, not trained by this command)")
    return ("the runs do not record all their options (each section's first line gives what they "
            "do); those below are this command's, which need not be theirs")


def header_options(args, results: Dict[str, dict]) -> str:
    """The header's options sentence: ``args``' options; with ``--merge`` / ``--render-only``,
    when every run of ``results`` (setup -> results) records its own, a pointer to them instead
    (:func:`merged_header`)."""
    if getattr(args, "merge", None) or getattr(args, "render_only", False):
        archs = [(res, a) for res in results.values() for a in ("memn2n", "t_memn2n")
                 if any(k.split("|")[0] == a for k in res)]
        recorded = bool(archs) and all(recorded_protocols(res, a) for res, a in archs)
        if recorded:
            return (merged_header(args, True) + "; the best run per task by validation accuracy, "
                    "ties broken by the lower validation NLL; each run keeps its "
                    "best-validation epoch by the same order.")
        prefix = merged_header(args, False) + "; "
    else:
        prefix = ""
    return (prefix + f"optimizer {args.optimizer}, lr {args.lr} (halved every "
            f"{args.anneal_every} epochs single / {args.joint_anneal_every} joint), clip "
            f"{args.clip_norm}, δ={args.embed_dim} (t-MEM-NN: {t_embed_dim(args)}; joint: "
            f"{args.joint_embed_dim}), hops={args.hops}, {args.tying} tying, empty memories "
            f"`{args.empty_memories}`, random noise {args.random_noise}, linear start "
            f"{args.linear_start_epochs} epochs, t-divergence `{args.t_divergence}`, prior ν="
            f"{args.prior_dof}, initial σ {args.sigma_init}, escort sampler "
            f"`{args.escort_sampler}`, divergence weight β={args.divergence_weight} (joint: "
            f"{setup_args('joint', args).divergence_weight}){answer_classes_clause(args)}; "
            f"{seeds_clause(args)} by validation accuracy, ties broken by the lower validation "
            f"NLL (runs that record one); each run keeps its best-validation epoch by the same "
            f"order.")


def seeds_clause(args) -> str:
    """The header's account of the seeds: the command's seed options when it trained the runs;
    with ``--merge`` or ``--render-only`` they say nothing about the results, so the header
    points to each section's :func:`runs_line` instead."""
    if getattr(args, "merge", None) or getattr(args, "render_only", False):
        return ("the best run per task (how many runs and which seeds: each section's first "
                "line; results merged or re-rendered, not trained by this command)")
    return (f"best of {args.seeds} seed(s) (t-MEM-NN: {args.t_seeds or args.seeds}; joint: "
            f"{args.joint_seeds or 'the same'})")


def answer_classes_clause(args) -> str:
    """", answers over …" when --answer-classes is not the default (the whole dictionary: the
    header reads as it always did), else ""."""
    if str(getattr(args, "answer_classes", "dictionary")) == "dictionary":
        return ""
    return (", answers predicted over the training files' answers only "
            "(`--answer-classes answers`)")


def render(args):
    """Write OUT/babi_report.md (and the charts) from OUT/results_<setup>.json; the header
    gives ``args``' options (with ``--merge`` / ``--render-only``: the runs' own, when every run
    records them, :func:`merged_header`), each section :func:`runs_line`'s account of its runs."""
    variant = getattr(args, "variant", None) or data_variant(args.data)
    folder = os.path.basename(os.path.normpath(args.data))
    single_source, single_variant, single_published = babi_single_published(variant)
    results = {s: load_results(args.out_dir, s) for s in ("single", "joint")}
    out = [f"# bAbI report: {variant} (docs/method.md §4-5)", "",
           f"Data: `{variant}`" + ("" if folder == variant else f" (folder `{folder}`)")
           + "; " + header_options(args, results), ""]
    for setup, published, published_variant, title in [
            ("single", single_published, single_variant, f"Single-task training ({single_source})"),
            ("joint", BABI_JOINT, "en", "Joint training (D Table 10)")]:
        pub = "pub." if variant == published_variant else "pub. en-1k"
        res = results[setup]
        if not res:
            continue
        check_variant(res, variant, os.path.join(args.out_dir, f"results_{setup}.json"))
        out += [f"## {title}", "", runs_line(res), ""]
        if variant != published_variant:
            out += [f"The published columns are bAbI en-1k's (docs/method.md §5 lists no {variant} "
                    f"figures); ours are on {variant}.", ""]
        out += table(setup, res, published, pub) + [""]
        sel = selection_table(res)
        if sel:
            out += ["Selection (every run's test accuracy is recorded, never used to select; "
                    "\"mean over all runs\" is the expected result of a single seed):", ""] + sel + [""]
        png = chart(args.out_dir, res, published, setup, variant, published_variant)
        if png:
            out += [f"![accuracy]({png})", ""]
        unc_rows = uncertainty_table(res)
        if unc_rows:
            out += [f"### What the posterior draws know (t-MEM-NN, S = {UNCERTAINTY_SAMPLES})", "",
                    "Mean over the test questions answered right and wrong: predictive entropy "
                    "H[p̄], expected entropy E_s H[p_s] and their difference I, the mutual "
                    "information of the answer and the embedding matrices (nats; "
                    "docs/uncertainty.md).", ""] + unc_rows + [""]
        out += ["### Runs and fitted ν", ""] + nu_table(res) + [""]
    att = attention_section(args)
    if att:
        out += ["## Per-hop attention (most attended fact and its weight)", ""] + att
    path = os.path.join(args.out_dir, "babi_report.md")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {path}")


