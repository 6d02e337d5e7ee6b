#!/usr/bin/env python
"""Build the ``video_captioning`` task's data folder from the 1,000 MSR-VTT clips of ``$ACVI_DATA/msrvtt_1k``
(docs/method.md §3.2; the folder's README gives the provenance of its captions and features).

Input (``--src``, default ``$ACVI_DATA/msrvtt_1k``)::

    captions.json          {video_id: {category, url, start, end, msrvtt_split, captions: [str, ...]}}
    features/VIDEO_ID.npy  float array (frames, D) per clip (50 x 128: compressed VGG16 frame vectors)

Output (``--out-dir``, default ``data-bin/msrvtt_1k``), the layout of ``data_scripts/prepare_msvd.sh``::

    train.tsv valid.tsv test.tsv   VIDEO_ID<TAB>caption, every caption of every clip, in the JSON's order
    {split}.videos                 the split's clip ids, in item order of --caption-eval-unique-videos
    dict.txt                       dictionary of the training captions (lower-cased NLTK wordpunct tokens,
                                   ``fairseq_acvi.data.video_features.build_dictionary``, --min-count)
    features -> SRC/features       a link to the checked feature folder (the files are not copied)
    features_blank/VIDEO_ID.npy    one all-zero frame (1, D) per clip: the input of the no-video baseline
                                   (a caption language model; recipes/captioning_msrvtt.sh, NO_VIDEO=1)
    PROVENANCE.txt                 source, split rule, counts

The split is fixed by clip id: clips sorted by their number (video0, video1, ..., video999), the first
``--split-sizes`` TRAIN clips train, the next VALID validate, the last TEST test (default 800 / 100 / 100:
video0-799, video800-899, video900-999). Every caption of a clip is one line of its split's file (a training
clip gives 20 training pairs), whitespace runs inside a caption collapsed to one space, nothing else
changed (the captions are published lower-case; tokenisation happens when the task reads them, as for
MSVD).

Nothing is dropped silently: a malformed ``captions.json``, a clip without captions or with an empty one,
a clip without a feature file or a feature file without a clip, a feature file that cannot be read, is
not 2-D floating point, holds NaN/inf, or whose size D differs from the others', all stop the script with
a ``DataError`` naming the file (and the clip). The feature size is read from the files.

    python data_scripts/prepare_msrvtt.py [--src DIR] [--out-dir DIR] [--split-sizes 800 100 100]
                                          [--min-count 1] [--verify-checksums]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import DataError, acvi_data_dir, run_main, write_provenance  # noqa: E402

SPLITS = ("train", "valid", "test")
DEFAULT_SIZES = (800, 100, 100)
_VIDEO_ID = re.compile(r"^video(\d+)$")


def clip_number(video_id: str, where: str) -> int:
    """The number N of ``videoN``; DataError naming ``where`` for any other id."""
    m = _VIDEO_ID.match(video_id)
    if not m:
        raise DataError(f"{where}: clip id {video_id!r} is not of the form 'videoN'")
    return int(m.group(1))


def read_captions_json(path: Path) -> Tuple[Dict[str, List[str]], int]:
    """({clip id: its captions (whitespace-normalised)}, how many captions the normalisation changed);
    DataError naming ``path`` for malformed JSON,
    a clip without a ``captions`` list, an empty list, or a caption that is not a non-empty string."""
    try:
        with open(path, encoding="utf-8") as fh:
            raw = json.load(fh)
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except json.JSONDecodeError as err:
        raise DataError(f"{path}:{err.lineno}:{err.colno}: malformed JSON ({err.msg})") from None
    except UnicodeDecodeError as err:
        raise DataError(f"{path}: not valid UTF-8 ({err})") from None
    if not isinstance(raw, dict) or not raw:
        raise DataError(f"{path}: expected a non-empty JSON object {{video_id: {{captions: [...]}}}}")
    out: Dict[str, List[str]] = {}
    changed = 0
    for vid, entry in raw.items():
        clip_number(vid, str(path))
        caps = entry.get("captions") if isinstance(entry, dict) else None
        if not isinstance(caps, list):
            raise DataError(f"{path}: clip {vid!r} has no 'captions' list")
        if not caps:
            raise DataError(f"{path}: clip {vid!r} has no captions")
        clean = []
        for j, c in enumerate(caps):
            text = " ".join(c.split()) if isinstance(c, str) else ""
            if not re.search(r"\w", text):
                raise DataError(f"{path}: clip {vid!r}, caption {j}: {c!r} is empty or has no word")
            clean.append(text)
            changed += text != c
        out[vid] = clean
    return out, changed


def check_feature_file(path: Path) -> Tuple[int, int]:
    """(frames, D) of a checked feature file: 2-D floating point, at least one frame, every value
    finite; DataError naming the file otherwise."""
    try:
        arr = np.load(path, allow_pickle=False)
    except Exception as err:  # truncated file, pickled object, not .npy, ...
        raise DataError(f"{path}: cannot read the feature file ({err.__class__.__name__}: {err})") from None
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise DataError(f"{path}: feature array of shape {tuple(arr.shape)}; expected (frames >= 1, D >= 1)")
    if not np.issubdtype(arr.dtype, np.floating):
        raise DataError(f"{path}: feature array of dtype {arr.dtype}; expected floating point")
    bad = ~np.isfinite(arr)
    if bad.any():
        f, d = np.argwhere(bad)[0]
        raise DataError(f"{path}: {int(bad.sum())} non-finite values (NaN or inf; first at frame {f}, dim {d})")
    return int(arr.shape[0]), int(arr.shape[1])


def verify_checksums(src: Path) -> int:
    """Check ``SHA256SUMS`` (captions.json) and ``SHA256SUMS.features`` (features/*.npy) when present;
    DataError naming the first file whose SHA-256 differs. Returns the number of files checked."""
    n = 0
    for sums, folder in (("SHA256SUMS", src), ("SHA256SUMS.features", src / "features")):
        if not (src / sums).is_file():
            continue
        for line_no, line in enumerate((src / sums).read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            digest, _, name = line.strip().partition("  ")
            path = folder / name
            if not path.is_file():
                raise DataError(f"{src / sums}:{line_no}: {path} is missing")
            if hashlib.sha256(path.read_bytes()).hexdigest() != digest:
                raise DataError(f"{path}: SHA-256 differs from {src / sums}:{line_no}")
            n += 1
    return n


def split_clips(clips: Sequence[str], sizes: Sequence[int], where: str) -> Dict[str, List[str]]:
    """{split: clip ids}: clips sorted by number, then cut into ``sizes`` (train, valid, test)."""
    if len(sizes) != 3 or any(s < 1 for s in sizes):
        raise DataError(f"--split-sizes: three whole numbers >= 1 needed, got {list(sizes)}")
    if sum(sizes) != len(clips):
        raise DataError(f"--split-sizes {' '.join(map(str, sizes))} add up to {sum(sizes)}, but {where} "
                        f"has {len(clips)} clips")
    ordered = sorted(clips, key=lambda v: clip_number(v, where))
    out, start = {}, 0
    for split, n in zip(SPLITS, sizes):
        out[split] = ordered[start:start + n]
        start += n
    return out


def prepare(src: Path, out: Path, sizes: Sequence[int] = DEFAULT_SIZES, min_count: int = 1,
            checksums: bool = False) -> Dict[str, object]:
    """Check ``src`` and write the data folder ``out``; returns a summary (counts per split, D, frames)."""
    src, out = Path(src), Path(out)
    cap_path, feat_dir = src / "captions.json", src / "features"
    if not src.is_dir():
        raise DataError(f"{src}: no such folder (set --src or ACVI_DATA)")
    if not feat_dir.is_dir():
        raise DataError(f"{feat_dir}: no feature folder")
    n_checked = verify_checksums(src) if checksums else 0
    captions, n_changed = read_captions_json(cap_path)
    have = {p.name[:-4] for p in feat_dir.iterdir() if p.name.endswith(".npy")}
    no_file = sorted((v for v in captions if v not in have), key=lambda v: clip_number(v, str(cap_path)))
    if no_file:
        raise DataError(f"{feat_dir / (no_file[0] + '.npy')}: missing feature file of clip {no_file[0]!r} "
                        f"({len(no_file)} clips of {cap_path} have none)")
    no_caps = sorted(have - set(captions))
    if no_caps:
        raise DataError(f"{feat_dir / (no_caps[0] + '.npy')}: clip {no_caps[0]!r} has no captions in "
                        f"{cap_path} ({len(no_caps)} feature files without captions)")
    dims: Dict[int, Path] = {}
    frames: Dict[int, int] = {}
    for vid in captions:
        path = feat_dir / f"{vid}.npy"
        n_frames, d = check_feature_file(path)
        dims.setdefault(d, path)
        frames[n_frames] = frames.get(n_frames, 0) + 1
        if len(dims) > 1:
            (d0, p0), (d1, p1) = sorted(dims.items())[:2]
            raise DataError(f"{path}: {d}-d frame features, but {p0 if d0 != d else p1} has "
                            f"{d0 if d0 != d else d1}-d; every clip needs the same feature size")
    dim = next(iter(dims))
    split = split_clips(list(captions), sizes, str(cap_path))

    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    for name, clips in split.items():
        lines = [f"{v}\t{c}\n" for v in clips for c in captions[v]]
        (out / f"{name}.tsv").write_text("".join(lines), encoding="utf-8")
        (out / f"{name}.videos").write_text("".join(v + "\n" for v in clips), encoding="utf-8")
        counts[name] = {"clips": len(clips), "captions": len(lines),
                        "first": clips[0], "last": clips[-1]}
    n_written = sum(c["captions"] for c in counts.values())
    n_json = sum(len(c) for c in captions.values())
    if n_written != n_json:  # cannot happen unless the code above is wrong: refuse to drop anything
        raise DataError(f"{cap_path}: {n_json} captions read but {n_written} written")

    link = out / "features"
    if link.is_symlink() or not link.exists():
        if link.is_symlink():
            link.unlink()
        link.symlink_to(feat_dir.resolve(), target_is_directory=True)
    elif link.resolve() != feat_dir.resolve():
        raise DataError(f"{link} exists and is not a link to {feat_dir}; remove it")
    blank = out / "features_blank"
    blank.mkdir(exist_ok=True)
    zero = np.zeros((1, dim), dtype=np.float32)
    for vid in captions:
        np.save(blank / f"{vid}.npy", zero)

    from fairseq_acvi.data.video_features import build_dictionary  # imports fairseq (a few seconds)
    d = build_dictionary([str(out / "train.tsv")], min_count=min_count)
    d.save(str(out / "dict.txt"))
    n_words = len(d) - d.nspecial
    frames_text = ", ".join(f"{n} clips x {f} frames" for f, n in sorted(frames.items()))
    write_provenance(out, [
        f"source: $ACVI_DATA/msrvtt_1k (captions.json: MSR-VTT 1.0 train_val_videodatainfo.json, "
        f"features: third-party compressed VGG16 frame vectors; see that folder's README)",
        f"checksums verified: {n_checked} files" if checksums else "checksums: not verified (--verify-checksums)",
        f"clips: {len(captions)} ({frames_text}, D = {dim}); captions: {n_json}, all kept "
        f"({n_changed} with whitespace runs or trailing spaces collapsed)",
        "split: fixed by clip id (clips sorted by number): " + "; ".join(
            f"{s} {counts[s]['clips']} clips {counts[s]['first']}-{counts[s]['last']} "
            f"({counts[s]['captions']} captions)" for s in SPLITS),
        f"dictionary: {n_words} words of the training captions (lower-cased NLTK wordpunct tokens, "
        f"min count {min_count}, others -> <unk>)",
        "features -> the source's features/ (linked); features_blank/: one zero frame per clip "
        "(no-video baseline)",
        f"written by data_scripts/prepare_msrvtt.py --split-sizes {' '.join(map(str, sizes))} "
        f"--min-count {min_count}",
    ])
    for s in SPLITS:
        print(f"{s}: {counts[s]['clips']} clips ({counts[s]['first']}-{counts[s]['last']}), "
              f"{counts[s]['captions']} captions")
    print(f"dict.txt: {n_words} words (min count {min_count}); features {dim}-d ({frames_text})")
    return {"counts": counts, "dim": dim, "frames": frames, "words": n_words, "checked": n_checked}


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_src = acvi_data_dir("msrvtt_1k")
    p.add_argument("--src", type=Path, default=default_src,
                   help="the msrvtt_1k folder (default: $ACVI_DATA/msrvtt_1k)")
    p.add_argument("--out-dir", type=Path, default=Path("data-bin/msrvtt_1k"))
    p.add_argument("--split-sizes", type=int, nargs=3, default=list(DEFAULT_SIZES),
                   metavar=("TRAIN", "VALID", "TEST"), help="clips per split, in clip-number order")
    p.add_argument("--min-count", type=int, default=1,
                   help="words seen fewer times in the training captions map to <unk>")
    p.add_argument("--verify-checksums", action="store_true",
                   help="check SHA256SUMS and SHA256SUMS.features of --src first")
    args = p.parse_args(argv)
    if args.src is None:
        raise DataError("no source folder: pass --src DIR or set ACVI_DATA=<data root holding msrvtt_1k/> "
                        "(e.g. ACVI_DATA=../shared/data)")
    if args.min_count < 1:
        raise DataError(f"--min-count must be >= 1, got {args.min_count}")
    prepare(args.src, args.out_dir, args.split_sizes, args.min_count, args.verify_checksums)
    return 0


if __name__ == "__main__":
    run_main(main)
