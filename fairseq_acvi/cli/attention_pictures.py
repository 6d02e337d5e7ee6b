"""Attention pictures of a translation model on a few sentences (docs/method.md §2, §3.4).

Usage (from the repository root)::

    python -m fairseq_acvi.cli.attention_pictures data-bin/multi30k_char_en_de \\
        --path runs/pag/en_de/pag_seed1/checkpoint_best.pt --subset test2016 --ids 0 1 2 \\
        --beam 5 --out-dir docs/results/pag_pictures_<date>

For every sentence id the model first decodes the source with fairseq's beam search
(``SequenceGenerator``, ``--beam``, ``--max-len-a/-b``), then reads its own best hypothesis
teacher-forced, which gives exactly the attention of the decoding (the decoder's incremental path
equals its teacher-forced one: tests/test_seq2seq_model.py, tests/test_context_pag.py). The picture
(``<subset>_<id>.png``) shows the attention a_t over the source pieces for every output token
(rows: the hypothesis, characters for a character target, ``▁`` the word boundary; columns: the
source pieces) and, for planning attention (``pag``, ``rpag``), the commitment switch g_t under
it: 1 where the plan was recomputed, 0 where it was shifted (PAG) or the previous alignment reused
(rPAG), as in Dutil et al. (2017)'s figures. ``attention.json`` holds the numbers of every picture
(tokens, attention matrix, g_t, the hypothesis score). For ACVI the attention is the mixture
weights a_t of its latent context; ``none`` has none to draw.

``--subset`` is a fairseq subset name (``valid``, ``test``, ``test1``) or a split named in
``DATA/splits.json`` (``test2016``; data_scripts/prepare_multi30k*.sh write it).
"""
import argparse
import json
import os
import sys
from typing import Dict, List

import torch

from fairseq_acvi.charts import save_chart


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("data", help="the data-bin folder the model was trained on")
    p.add_argument("--path", required=True, help="the checkpoint")
    p.add_argument("--subset", default="valid",
                   help="fairseq subset name, or a split named in DATA/splits.json (test2016)")
    p.add_argument("--ids", type=int, nargs="+", default=[0, 1, 2], help="sentence ids of the subset")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--max-len-a", type=float, default=0.0)
    p.add_argument("--max-len-b", type=int, default=200)
    p.add_argument("--mc-samples", type=int, default=None,
                   help="K of a sampling context (ACVI) while decoding (default: the model's)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--model-overrides", default=None, metavar="DICT",
                   help="model options replacing the checkpoint's, a Python dict as fairseq-generate's "
                        "(e.g. \"{'attention_normalizer': 'sparsemax'}\": a softmax model drawn "
                        "with sparse attention)")
    p.add_argument("--out-dir", required=True)
    return p


def subset_name(data: str, subset: str) -> str:
    """``subset`` itself, or its fairseq name from ``data/splits.json`` when it names a split."""
    path = os.path.join(data, "splits.json")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f).get(subset, subset)
    return subset


def pictures_data(model, task, subset: str, ids: List[int], beam: int, max_len_a: float,
                  max_len_b: int) -> List[Dict]:
    """Decode each sentence of ``ids`` and read the best hypothesis teacher-forced.

    Returns one record per id: source / hypothesis tokens (as the dictionaries spell them),
    ``attn`` (T, N) as nested lists (T = hypothesis length with </s>, N = source length with
    </s>; None for ``none``), ``replan`` (T,) g_t for planning attention (else None), ``score``
    (fairseq's hypothesis score, log-probability per token).
    """
    from fairseq.sequence_generator import SequenceGenerator

    dataset = task.dataset(subset)
    src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
    generator = SequenceGenerator([model], tgt_dict, beam_size=beam, max_len_a=max_len_a,
                                  max_len_b=max_len_b)
    records = []
    for i in ids:
        if not 0 <= i < len(dataset):
            raise SystemExit(f"--ids: {i} is not a sentence of subset {subset!r} "
                             f"({len(dataset)} sentences)")
        sample = dataset.collater([dataset[i]])
        with torch.no_grad():
            best = generator.generate([model], sample)[0][0]
            hyp = best["tokens"]                                           # (T,), ends with </s>
            prev = torch.cat([hyp.new_tensor([tgt_dict.eos()]), hyp[:-1]]).unsqueeze(0)
            net = sample["net_input"]
            _, extra = model(net["src_tokens"], net["src_lengths"], prev)
        attn = extra["attn"][0]
        replan = extra.get("token_terms", {}).get("replan")
        src = net["src_tokens"][0]
        records.append({
            "id": i,
            "source": [src_dict[t] for t in src.tolist() if t != src_dict.pad()],
            "hypothesis": [tgt_dict[t] for t in hyp.tolist()],
            "score": float(best["score"]),
            "attn": None if attn is None else attn[0].float().tolist(),
            "replan": None if replan is None else replan[0].float().tolist(),
        })
    return records


def draw(record: Dict, path: str, title: str) -> None:
    """One picture: the attention matrix (source pieces × output tokens), and g_t under it where
    there is one (a strip sharing the output axis)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    attn, replan = record["attn"], record["replan"]
    src, hyp = record["source"], record["hypothesis"]
    T, N = len(hyp), len(src)
    rows = 1 if replan is None else 2
    fig, axes = plt.subplots(rows, 1, sharex=True, squeeze=False,
                             figsize=(max(4.0, 0.22 * T + 1.5), max(2.5, 0.25 * N + 1.5 + rows)),
                             gridspec_kw={"height_ratios": [max(N, 2)] + [1] * (rows - 1)})
    ax = axes[0][0]
    ax.imshow(torch.tensor(attn).t().numpy(), aspect="auto", cmap="Greys", vmin=0.0, vmax=1.0,
              interpolation="nearest")
    ax.set_yticks(range(N))
    ax.set_yticklabels(src, fontsize=7)
    ax.set_ylabel("source")
    bottom = ax
    if replan is not None:
        bottom = axes[1][0]
        bottom.imshow(torch.tensor([replan]).numpy(), aspect="auto", cmap="Reds", vmin=0.0,
                      vmax=1.0, interpolation="nearest")
        bottom.set_yticks([0])
        bottom.set_yticklabels(["g_t"], fontsize=7)
        title += f"; plan recomputed at {sum(g >= 0.5 for g in replan)} of {T} steps"
    bottom.set_xticks(range(T))
    bottom.set_xticklabels(hyp, fontsize=7, rotation=90)
    bottom.set_xlabel("output")
    ax.set_title(title, fontsize=9)
    save_chart(fig, path, dpi=130, bbox_inches="tight")
    plt.close(fig)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from fairseq import checkpoint_utils  # the plugin is registered: this module is in its package

    if not os.path.isfile(args.path):
        raise SystemExit(f"--path: no checkpoint {args.path}")
    from fairseq_acvi.metrics.attention_stats import parse_model_overrides
    changed = parse_model_overrides(args.model_overrides)
    overrides = {**changed, "data": args.data}
    if args.mc_samples is not None:
        overrides["mc_samples"] = args.mc_samples
    torch.manual_seed(args.seed)
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([args.path], arg_overrides=overrides)
    model = models[0].eval()
    subset = subset_name(args.data, args.subset)
    task.load_dataset(subset)
    records = pictures_data(model, task, subset, args.ids, args.beam, args.max_len_a, args.max_len_b)
    os.makedirs(args.out_dir, exist_ok=True)
    variant = getattr(cfg.model, "context_inference", None) or "?"
    for r in records:
        if r["attn"] is None:
            print(f"[pictures] {args.subset} {r['id']}: the model has no attention to draw "
                  f"(--context-inference {variant})", file=sys.stderr)
            continue
        path = os.path.join(args.out_dir, f"{args.subset}_{r['id']}.png")
        with_ = "".join(f", {k} {v}" for k, v in changed.items())
        draw(r, path, f"{variant}{with_}, {args.subset} sentence {r['id']} (beam {args.beam})")
        print(f"[pictures] {path}")
    out = {"checkpoint": args.path, "subset": args.subset, "context_inference": variant,
           "beam": args.beam, "sentences": records}
    with open(os.path.join(args.out_dir, "attention.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
