#!/usr/bin/env python
"""Attention over the frames for a few test clips, beside their reference captions.

For each checkpoint and clip: beam-5 decoding with the task's generator (as fairseq-generate does), then
the best caption read teacher-forced, which gives the attention of that decoding (the decoder's
incremental and teacher-forced paths agree: tests/test_seq2seq_model.py); for ACVI the attention is the
mixture weights a_t of its latent context (docs/method.md §2). fairseq_acvi/cli/attention_pictures.py
draws the same for text sources; a video has frames, not tokens, hence this script.

    python docs/results/captioning_msrvtt_2026-11-28/make_pictures.py DATA_DIR OUT_DIR NAME=CKPT... \
        [--clips video900 video901 ...]

Writes OUT_DIR/attention_<clip>.png (one panel per checkpoint: rows = the caption's tokens, columns = the
25 frames read) and OUT_DIR/attention.json (the numbers).
"""
import argparse
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("data")
    p.add_argument("out_dir")
    p.add_argument("models", nargs="+", help="NAME=checkpoint")
    p.add_argument("--clips", nargs="+", default=["video900", "video901", "video902"])
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--refs", type=int, default=5, help="reference captions printed beside each picture")
    args = p.parse_args()

    import fairseq_acvi  # noqa: F401  (registers the plugin)
    from fairseq import checkpoint_utils
    from fairseq_acvi.data.video_features import group_references, read_caption_file
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    refs = group_references(read_caption_file(os.path.join(args.data, "test.tsv")))
    records = {c: {"references": refs[c], "models": {}} for c in args.clips}
    for spec in args.models:
        name, path = spec.split("=", 1)
        torch.manual_seed(1)
        models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
            [path], arg_overrides={"data": args.data, "caption_eval_unique_videos": True})
        model = models[0].eval()
        task.load_dataset("test")
        ds = task.datasets["test"]
        gen = task.build_generator([model], argparse.Namespace(beam=args.beam, max_len_a=0, max_len_b=30,
                                                                min_len=1, nbest=1))
        tgt = task.target_dictionary
        for clip in args.clips:
            i = ds.video_ids.index(clip)
            sample = ds.collater([ds[i]])
            with torch.no_grad():
                best = gen.generate([model], sample)[0][0]
                hyp = best["tokens"]
                prev = torch.cat([hyp.new_tensor([tgt.eos()]), hyp[:-1]]).unsqueeze(0)
                net = sample["net_input"]
                _, extra = model(net["src_feats"], net["src_lengths"], prev)
            attn = extra["attn"][0]
            records[clip]["models"][name] = {
                "hypothesis": [tgt[t] for t in hyp.tolist()],
                "attn": None if attn is None else attn[0].float().tolist()}
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for clip, rec in records.items():
        names = [n for n in rec["models"] if rec["models"][n]["attn"] is not None]
        fig, axes = plt.subplots(len(names), 1, figsize=(7.5, 1.6 + 2.5 * len(names)), squeeze=False,
                                 gridspec_kw={"hspace": 0.55})
        for ax, n in zip(axes[:, 0], names):
            m = rec["models"][n]
            a = torch.tensor(m["attn"]).numpy()
            ax.imshow(a, aspect="auto", cmap="Greys", vmin=0.0, vmax=max(float(a.max()), 1e-6),
                      interpolation="nearest")
            ax.set_yticks(range(len(m["hypothesis"])))
            ax.set_yticklabels(m["hypothesis"], fontsize=7)
            ax.set_xlabel("frame (25 of the clip's 50, in time order)", fontsize=7)
            ax.set_title(f"{n}: attention over frames (black = {a.max():.2f}, the largest weight; "
                         f"uniform would be {1 / a.shape[1]:.2f})", fontsize=8)
        ref_text = "references (first %d of %d):\n" % (args.refs, len(rec["references"])) + "\n".join(
            rec["references"][:args.refs])
        fig.suptitle(f"MSR-VTT {clip} (test)", fontsize=9)
        fig.text(0.01, -0.01, ref_text, fontsize=7, va="top", family="monospace")
        path = out / f"attention_{clip}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        print(f"[pictures] {path}")
    (out / "attention.json").write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
