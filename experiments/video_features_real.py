#!/usr/bin/env python
"""Checks of the real frame features on real MSVD clips (docs/results/captioning_real_features_*).

For every clip of ``--videos`` (the 5 clips of ``$ACVI_DATA/msvd/mlds_subset/video``, ``ACVI_DATA`` being
the data root), with the default backbone of ``data_scripts/extract_video_features.py`` (EfficientNet-Lite0,
1280-d):

1. determinism: the (24, 1280) features extracted twice with one network, and with a freshly loaded one
   (largest absolute difference; 0 means bit-identical);
2. batch independence: frames in batches of 24 against one frame at a time (largest absolute difference);
3. plausibility: top-5 ImageNet classes (softmax probabilities) of the middle selected frame (index 12 of
   the 24), with the backbone's own normalisation ``(pixel - 127) / 128`` and with ImageNet mean/std;
4. similarity structure against the VGG16 fc2 features shipped beside the clips (``--vgg-dir``,
   ``<clip>.avi.npy`` of shape (80, 4096): 80 frames spread over the whole clip, Keras VGG16): each
   clip's features are mean-pooled over frames, the two 5 x 5 cosine-similarity matrices are compared
   by the Spearman rank correlation of their 10 off-diagonal entries (upper triangle), with the exact
   Mantel permutation p-value (all 5! = 120 relabellings of the clips of one matrix; one-sided,
   the share of relabellings whose correlation is at least the observed one).

    python experiments/video_features_real.py --videos "$ACVI_DATA/msvd/mlds_subset/video" \\
        --vgg-dir "$ACVI_DATA/msvd/mlds_subset/feat_vgg16_fc2" \\
        --mapping "$ACVI_DATA/msvd/youtube_mapping.txt" --json OUT.json

Prints a Markdown summary; ``--json`` writes every number.
"""
from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def _extractor():
    spec = importlib.util.spec_from_file_location("extract_video_features",
                                                  REPO / "data_scripts" / "extract_video_features.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cosine_matrix(x: np.ndarray) -> np.ndarray:
    """(n, D) -> (n, n) cosine similarities."""
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    return x @ x.T


def ranks(v: np.ndarray) -> np.ndarray:
    """Ranks 1..n of v, ties get their average rank."""
    order = np.argsort(v, kind="mergesort")
    r = np.empty(len(v), dtype=np.float64)
    r[order] = np.arange(1, len(v) + 1)
    for value in np.unique(v):
        tie = v == value
        if tie.sum() > 1:
            r[tie] = r[tie].mean()
    return r


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rank correlation of two equal-length vectors (Pearson of their ranks)."""
    ra, rb = ranks(a), ranks(b)
    return float(np.corrcoef(ra, rb)[0, 1])


def mantel(sim_a: np.ndarray, sim_b: np.ndarray) -> Dict[str, float]:
    """Spearman of the upper-triangle entries of two (n, n) matrices and its exact Mantel p-value."""
    n = sim_a.shape[0]
    iu = np.triu_indices(n, k=1)
    observed = spearman(sim_a[iu], sim_b[iu])
    null = []
    for perm in itertools.permutations(range(n)):
        p = np.array(perm)
        null.append(spearman(sim_a[iu], sim_b[p][:, p][iu]))
    null = np.array(null)
    return {"spearman": observed, "pairs": int(len(iu[0])), "permutations": int(len(null)),
            "p_one_sided": float((null >= observed - 1e-12).mean())}


def top5(logits: np.ndarray, names: Sequence[str]) -> List[Dict[str, float]]:
    p = np.exp(logits - logits.max())
    p /= p.sum()
    return [{"class": int(i), "label": names[i], "p": round(float(p[i]), 4)} for i in np.argsort(-p)[:5]]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--videos", required=True, help="folder of the clips (.avi)")
    ap.add_argument("--vgg-dir", required=True, help="folder of <clip>.avi.npy VGG16 fc2 features")
    ap.add_argument("--mapping", help="clip -> video id file (youtube_mapping.txt), for the report")
    ap.add_argument("--json", help="write all numbers here")
    args = ap.parse_args(argv)

    evf = _extractor()
    import torch
    torch.set_num_threads(1)
    clips = sorted(p for p in Path(args.videos).iterdir() if p.suffix == ".avi")
    if not clips:
        raise SystemExit(f"--videos {args.videos}: no .avi files")
    ids = evf.read_mapping(args.mapping) if args.mapping else {}
    names = evf.imagenet_classes()
    net = evf.build_backbone("efficientnet-lite0")
    fresh = evf.build_backbone("efficientnet-lite0")
    report: Dict[str, object] = {"backbone": "efficientnet-lite0", "dim": net.dim, "clips": []}
    pooled, pooled_imagenet, vgg = [], [], []
    for clip in clips:
        t0 = time.time()
        feats = evf.video_features(str(clip), net)
        seconds = time.time() - t0
        again = evf.video_features(str(clip), net)
        other = evf.video_features(str(clip), fresh)
        alone = evf.video_features(str(clip), net, batch_size=1)
        frames = evf.read_frames(str(clip))
        entry = {
            "clip": clip.name, "video_id": ids.get(clip.stem, ""), "frames_used": int(len(frames)),
            "frame_size": list(frames.shape[1:3]), "shape": list(feats.shape), "seconds": round(seconds, 2),
            "max_abs_diff_rerun": float(np.abs(again - feats).max()),
            "max_abs_diff_fresh_network": float(np.abs(other - feats).max()),
            "max_abs_diff_batch24_vs_alone": float(np.abs(alone - feats).max()),
            "feature_mean": float(feats.mean()), "feature_max": float(feats.max()),
        }
        for norm in ("auto", "imagenet"):
            mean, std = evf.normalization_for(net, norm)
            logits = net.logits(evf.preprocess_frames(frames[12:13], mean=mean, std=std))[0]
            entry[f"top5_{norm}"] = top5(logits, names)
        report["clips"].append(entry)
        pooled.append(feats.mean(axis=0))
        pooled_imagenet.append(evf.video_features(str(clip), net, normalization="imagenet").mean(axis=0))
        v = np.load(Path(args.vgg_dir) / f"{clip.name}.npy", allow_pickle=False)
        entry["vgg16_shape"] = list(v.shape)
        vgg.append(v.astype(np.float64).mean(axis=0))
    sim_ours = cosine_matrix(np.stack(pooled).astype(np.float64))
    sim_ours_imagenet = cosine_matrix(np.stack(pooled_imagenet).astype(np.float64))
    sim_vgg = cosine_matrix(np.stack(vgg))
    report["cosine_efficientnet_lite0"] = np.round(sim_ours, 4).tolist()
    report["cosine_efficientnet_lite0_imagenet_norm"] = np.round(sim_ours_imagenet, 4).tolist()
    report["cosine_vgg16_fc2"] = np.round(sim_vgg, 4).tolist()
    report["vs_vgg16"] = mantel(sim_ours, sim_vgg)
    report["vs_vgg16_imagenet_norm"] = mantel(sim_ours_imagenet, sim_vgg)
    report["order"] = [c.name for c in clips]

    print(f"| clip | video | frames | max |diff| rerun / fresh net / batch 1 | top-5 (native normalisation) |")
    print("|---|---|---|---|---|")
    for e in report["clips"]:
        t5 = "; ".join(f"{t['label'].split(',')[0]} {t['p']:.2f}" for t in e["top5_auto"])
        print(f"| {e['clip']} | {e['video_id']} | {e['frames_used']} | {e['max_abs_diff_rerun']:.1e} / "
              f"{e['max_abs_diff_fresh_network']:.1e} / {e['max_abs_diff_batch24_vs_alone']:.1e} | {t5} |")
    m = report["vs_vgg16"]
    print(f"\nSpearman (off-diagonal cosine similarities, lite0 vs VGG16 fc2): {m['spearman']:.3f} over "
          f"{m['pairs']} pairs, exact Mantel p = {m['p_one_sided']:.3f} ({m['permutations']} permutations); "
          f"with ImageNet mean/std: {report['vs_vgg16_imagenet_norm']['spearman']:.3f}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
