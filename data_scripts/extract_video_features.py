#!/usr/bin/env python
"""Per-video frame features for the video_captioning task (METHOD.md §3.2; ACVI paper §4.2).

For each video: 24 equally spaced frames of the first 240 (``select_frame_indices``; fewer frames ->
all of them), each passed through GoogLeNet up to pool5 (the 7x7 average pool before the classifier,
1024-d) -> ``OUT_DIR/VIDEO_ID.npy`` float32 (frames, 1024).

Real features (needs torchvision and PyAV, imported only in this mode)::

    python data_scripts/extract_video_features.py --videos YouTubeClips/ \\
        --mapping ../shared/data/msvd/youtube_mapping.txt --weights googlenet-1378be20.pth --out-dir DATA/features

``--weights`` is a LOCAL file of torchvision's ``GoogLeNet_Weights.IMAGENET1K_V1`` state dict; nothing is
downloaded at run time. Get it once, on a machine with internet access, from
https://download.pytorch.org/models/googlenet-1378be20.pth (the URL in
``torchvision.models.GoogLeNet_Weights.IMAGENET1K_V1.url``). These weights are a port of Google's
Inception-v1 (input transform on, as torchvision applies for them), not the BVLC Caffe model the paper
used, so features and scores will differ somewhat from the paper's.

``--mapping`` maps the clip file names of the MSVD ``YouTubeClips`` archive to video ids
(``<clip> vidN`` lines, CRLF allowed); without it the file stem is the video id.

Synthetic features (no torchvision, no videos: deterministic values seeded by the video id, for
running the pipeline offline)::

    python data_scripts/extract_video_features.py --synthetic --captions DATA/train.tsv DATA/valid.tsv \\
        DATA/test.tsv --out-dir DATA/features
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Optional

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from fairseq_acvi.data.video_features import (  # noqa: E402
    read_caption_file,
    select_frame_indices,
    synthetic_features,
    unique_video_ids,
)

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
GOOGLENET_URL = "https://download.pytorch.org/models/googlenet-1378be20.pth"


# ----------------------------------------------------------------------------------------------
# frames


def read_frames(path: str, num_samples: int = 24, window: int = 240) -> np.ndarray:
    """Decode the first ``window`` frames of ``path`` with PyAV and keep the selected ones.

    Returns uint8 (n, H, W, 3) RGB, n = len(select_frame_indices(decoded, num_samples, window)).
    """
    try:
        import av  # PyAV
    except ImportError:
        raise ImportError("decoding videos needs PyAV: pip install av") from None
    frames = []
    with av.open(path) as container:
        stream = container.streams.video[0]
        for frame in container.decode(stream):
            frames.append(frame.to_ndarray(format="rgb24"))
            if len(frames) >= window:
                break
    if not frames:
        raise ValueError(f"{path}: no video frames could be decoded")
    keep = select_frame_indices(len(frames), num_samples, window)
    return np.stack([frames[i] for i in keep])


def preprocess_frames(frames: np.ndarray, size: int = 224, resize: int = 256):
    """uint8 (n, H, W, 3) -> float32 tensor (n, 3, size, size), ImageNet-normalised.

    Shorter side resized to ``resize`` (bilinear), then a centred ``size`` x ``size`` crop: the
    evaluation transform torchvision lists for these weights. Plain torch, no torchvision needed.
    """
    import torch
    import torch.nn.functional as F

    if frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(f"frames must be (n, H, W, 3), got {frames.shape}")
    x = torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2).float() / 255.0
    h, w = x.shape[-2:]
    scale = resize / min(h, w)
    nh, nw = max(size, round(h * scale)), max(size, round(w * scale))
    x = F.interpolate(x, size=(nh, nw), mode="bilinear", align_corners=False, antialias=True)
    top, left = (nh - size) // 2, (nw - size) // 2
    x = x[:, :, top:top + size, left:left + size]
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    return (x - mean) / std


class GoogLeNetPool5:
    """torchvision GoogLeNet truncated after its global average pool (pool5/7x7_s1): (n,3,224,224) -> (n,1024)."""

    def __init__(self, weights: str, device: str = "cpu"):
        import torch
        try:
            from torchvision.models import googlenet
        except Exception as err:  # ImportError, or a torchvision built for another torch
            raise ImportError(f"real features need a torchvision matching your torch ({err})") from None
        if not os.path.isfile(weights):
            raise FileNotFoundError(f"--weights {weights} not found (download {GOOGLENET_URL} once)")
        # the IMAGENET1K_V1 state dict includes the auxiliary classifiers and expects transform_input
        model = googlenet(weights=None, aux_logits=True, transform_input=True, init_weights=False)
        state = torch.load(weights, map_location="cpu", weights_only=True)
        model.load_state_dict(state)
        model.aux_logits, model.aux1, model.aux2 = False, None, None
        model.fc = torch.nn.Identity()  # output = dropout(flatten(avgpool(inception5b))) -> 1024
        self.model = model.eval().to(device)
        self.device = device

    def __call__(self, x):
        import torch

        with torch.inference_mode():
            out = self.model(x.to(self.device))
        if out.shape[-1] != 1024:
            raise RuntimeError(f"expected 1024-d pool5 features, got {tuple(out.shape)}")
        return out.float().cpu().numpy()


# ----------------------------------------------------------------------------------------------
# drivers


def read_mapping(path: str) -> Dict[str, str]:
    """{clip name: video id} from ``<clip> <video id>`` lines (CRLF, missing final newline allowed)."""
    mapping = {}
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            fields = line.strip().split()
            if len(fields) != 2:
                raise ValueError(f"{path}:{line_no}: expected '<clip name> <video id>'")
            mapping[fields[0]] = fields[1]
    return mapping


def _save(out_dir: str, video_id: str, feats: np.ndarray) -> None:
    if not np.isfinite(feats).all():
        raise ValueError(f"non-finite features for video {video_id!r}")
    tmp = os.path.join(out_dir, video_id + ".tmp.npy")
    np.save(tmp, feats.astype(np.float32))
    os.replace(tmp, os.path.join(out_dir, video_id + ".npy"))


def write_synthetic(video_ids: Iterable[str], out_dir: str, num_frames: int, feature_dim: int) -> int:
    os.makedirs(out_dir, exist_ok=True)
    n = 0
    for vid in video_ids:
        _save(out_dir, vid, synthetic_features(vid, num_frames, feature_dim))
        n += 1
    return n


def extract_real(args) -> int:
    mapping = read_mapping(args.mapping) if args.mapping else None
    videos = sorted(p for p in Path(args.videos).iterdir() if p.is_file())
    if not videos:
        raise FileNotFoundError(f"no video files in {args.videos}")
    net = GoogLeNetPool5(args.weights, args.device)
    os.makedirs(args.out_dir, exist_ok=True)
    n = 0
    for path in videos:
        if mapping is not None:
            if path.stem not in mapping:
                raise ValueError(f"{path}: clip {path.stem!r} is not in {args.mapping}")
            vid = mapping[path.stem]
        else:
            vid = path.stem
        if args.skip_existing and os.path.isfile(os.path.join(args.out_dir, vid + ".npy")):
            continue
        frames = read_frames(str(path), args.num_frames, args.window)
        feats = np.concatenate([net(preprocess_frames(frames[i:i + args.batch_size]))
                                for i in range(0, len(frames), args.batch_size)])
        _save(args.out_dir, vid, feats)
        n += 1
        if n % 50 == 0:
            print(f"{n} videos", file=sys.stderr)
    return n


def get_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out-dir", required=True, help="folder for VIDEO_ID.npy files")
    p.add_argument("--num-frames", type=int, default=24, help="frames per video (24)")
    p.add_argument("--window", type=int, default=240, help="sample from the first WINDOW frames (240)")
    p.add_argument("--synthetic", action="store_true", help="write deterministic synthetic features")
    p.add_argument("--captions", nargs="+", default=[], help="--synthetic: caption files whose video ids get features")
    p.add_argument("--feature-dim", type=int, default=1024, help="--synthetic: feature size (1024)")
    p.add_argument("--videos", help="folder of video files (e.g. MSVD YouTubeClips/)")
    p.add_argument("--mapping", help="clip-name -> video-id file (MSVD youtube_mapping.txt)")
    p.add_argument("--weights", help=f"local GoogLeNet IMAGENET1K_V1 state dict ({GOOGLENET_URL})")
    p.add_argument("--device", default="cpu")
    p.add_argument("--batch-size", type=int, default=24)
    p.add_argument("--skip-existing", action="store_true", help="keep .npy files that already exist")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = get_parser().parse_args(argv)
    if args.synthetic:
        if not args.captions:
            raise SystemExit("--synthetic needs --captions FILE [FILE ...]")
        ids: List[str] = []
        for path in args.captions:
            ids.extend(unique_video_ids(read_caption_file(path)))
        n = write_synthetic(dict.fromkeys(ids), args.out_dir, args.num_frames, args.feature_dim)
    else:
        if not args.videos or not args.weights:
            raise SystemExit("real features need --videos and --weights (or use --synthetic)")
        n = extract_real(args)
    print(f"wrote {n} feature files to {args.out_dir}")
    return n


if __name__ == "__main__":
    main()
