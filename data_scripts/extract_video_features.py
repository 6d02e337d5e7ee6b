#!/usr/bin/env python
"""Per-video frame features for the video_captioning task (docs/method.md §3.2; ACVI paper §4.2).

For each video: 24 equally spaced frames of the first 240 (``select_frame_indices``: frame
``k * u // 24`` for k = 0..23 with u = min(frames, 240), i.e. 0, 10, ..., 230 for a long video; a video
with u <= 24 frames keeps all u of them), each passed through GoogLeNet up to pool5 (the global
average pool before the classifier, 1024-d) -> ``OUT_DIR/VIDEO_ID.npy`` float32 (frames, 1024).

Real features (needs torchvision and PyAV, imported only in this mode)::

    curl -L -o googlenet-1378be20.pth https://download.pytorch.org/models/googlenet-1378be20.pth
    python data_scripts/extract_video_features.py --videos YouTubeClips/ \\
        --mapping ../shared/data/msvd/youtube_mapping.txt --weights googlenet-1378be20.pth --out-dir DATA/features

Weights. ``--weights`` is a LOCAL copy of torchvision's ``GoogLeNet_Weights.IMAGENET1K_V1`` file: nothing
is downloaded at run time. Fetch it once (``curl`` above, on a machine with internet access) from
https://download.pytorch.org/models/googlenet-1378be20.pth, the URL in
``torchvision.models.GoogLeNet_Weights.IMAGENET1K_V1.url``. That file is a plain state dict of
``torchvision.models.GoogLeNet(aux_logits=True)``: the main network, the two auxiliary classifiers
(``aux1.*``, ``aux2.*``; untrained, ignored here) and the 1000-way ``fc``. It is read with
``torch.load(weights_only=True)`` and must match that layout exactly (a state dict without the
``aux*`` keys, as saved from ``googlenet(weights=...)``, is accepted too). The weights expect
``transform_input=True`` (torchvision's own setting for them), which this script always uses. They are a
port of Google's Inception-v1, not the BVLC Caffe model the paper used, so features and scores will
differ somewhat from the paper's.

Frames go through the evaluation transform torchvision publishes for these weights
(``GoogLeNet_Weights.IMAGENET1K_V1.transforms()`` on uint8 tensors: shorter side to 256 with antialiased
bilinear resampling rounded back to uint8, centre 224 x 224 crop, /255, ImageNet mean/std), restated in
plain torch by :func:`preprocess_frames`; the model runs in eval mode.

torch / torchvision pairing. torchvision must be the release built for your torch: torch 2.N goes with
torchvision 0.(N+15) (torch 2.13 -> torchvision 0.28, torch 2.14 -> 0.29), from the same index as your
torch (for a CPU-only torch: ``pip install torchvision --index-url https://download.pytorch.org/whl/cpu``).
A mismatched pair fails at ``import torchvision``; this script then stops with that error. Tested with
torch 2.14.1 + torchvision 0.29.1 and PyAV 18.1 (``pip install -e .[video]``).

``--mapping`` maps the clip file names of the MSVD ``YouTubeClips`` archive to video ids
(``<clip> vidN`` lines, CRLF allowed); without it the file stem is the video id. Every non-hidden file
of ``--videos`` is decoded; a missing or undecodable video, a clip not in the mapping, or a bad
weights file stops the run with an ``error:`` line naming the file (exit code 2).

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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import DataError, run_main  # noqa: E402
from fairseq_acvi.data.video_features import (  # noqa: E402
    read_caption_file,
    select_frame_indices,
    synthetic_features,
    unique_video_ids,
)

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
GOOGLENET_URL = "https://download.pytorch.org/models/googlenet-1378be20.pth"
POOL5_DIM = 1024


# ----------------------------------------------------------------------------------------------
# frames


def read_frames(path: str, num_samples: int = 24, window: int = 240) -> np.ndarray:
    """Decode the first ``window`` frames of ``path`` with PyAV and keep the selected ones.

    Returns uint8 (n, H, W, 3) RGB, the frames ``select_frame_indices(decoded, num_samples, window)``
    in order (n = min(decoded, num_samples) with decoded = min(frames in the video, window)).
    Raises DataError naming ``path`` when it is missing, has no video stream or cannot be decoded.
    """
    try:
        import av  # PyAV
    except ImportError:
        raise ImportError("decoding videos needs PyAV: pip install av") from None
    if not os.path.isfile(path):
        raise DataError(f"video file not found: {path}")
    frames = []
    try:
        with av.open(path) as container:
            if not container.streams.video:
                raise DataError(f"{path}: no video stream")
            for frame in container.decode(container.streams.video[0]):
                frames.append(frame.to_ndarray(format="rgb24"))
                if len(frames) >= window:
                    break
    except DataError:
        raise
    except Exception as err:  # av.error.FFmpegError and friends: corrupt or unsupported file
        raise DataError(f"{path}: cannot decode video ({err.__class__.__name__}: {err})") from None
    if not frames:
        raise DataError(f"{path}: no video frames could be decoded")
    keep = select_frame_indices(len(frames), num_samples, window)
    return np.stack([frames[i] for i in keep])


def preprocess_frames(frames: np.ndarray, size: int = 224, resize: int = 256):
    """uint8 (n, H, W, 3) -> float32 tensor (n, 3, size, size), ImageNet-normalised.

    The tensor path of torchvision's ``ImageClassification(crop_size=224, resize_size=256)``, the
    evaluation transform of ``GoogLeNet_Weights.IMAGENET1K_V1``, restated in plain torch (no
    torchvision needed): shorter side resized to ``resize`` (longer side ``int(resize * long / short)``),
    bilinear with antialiasing, rounded back to uint8 levels; centre crop ``size`` x ``size`` at
    ``int(round(excess / 2))``; /255; ``(x - mean) / std``.
    """
    import torch
    import torch.nn.functional as F

    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise ValueError(f"frames must be uint8 (n, H, W, 3), got {frames.dtype} {frames.shape}")
    x = torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2)  # uint8 (n, 3, H, W)
    h, w = x.shape[-2:]
    short, long = min(h, w), max(h, w)
    new_long = int(resize * long / short)
    nh, nw = (resize, new_long) if h <= w else (new_long, resize)
    if (nh, nw) != (h, w):
        x = F.interpolate(x.float(), size=(nh, nw), mode="bilinear", align_corners=False, antialias=True)
        x = x.round().to(torch.uint8)
    if nh < size or nw < size:
        raise ValueError(f"resize {resize} is smaller than the crop {size}")
    top, left = int(round((nh - size) / 2.0)), int(round((nw - size) / 2.0))
    x = x[:, :, top:top + size, left:left + size].float() / 255.0
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    return (x - mean) / std


def _describe_mismatch(expected: Dict[str, tuple], got: Dict[str, tuple]) -> str:
    """Short summary of how a state dict's keys/shapes differ from the expected ones."""
    parts = []
    missing = [k for k in expected if k not in got and not k.endswith("num_batches_tracked")]
    unexpected = [k for k in got if k not in expected]
    wrong = [f"{k} {got[k]} (expected {expected[k]})" for k in expected if k in got and got[k] != expected[k]]
    for label, items in (("missing", missing), ("unexpected", unexpected), ("wrong shape", wrong)):
        if items:
            more = f" ... ({len(items)} in all)" if len(items) > 4 else ""
            parts.append(f"{label}: {', '.join(items[:4])}{more}")
    return "; ".join(parts)


class GoogLeNetPool5:
    """torchvision GoogLeNet truncated after its global average pool: (n,3,224,224) -> (n,1024).

    ``weights``: path of torchvision's ``GoogLeNet_Weights.IMAGENET1K_V1`` state dict (see the module
    docstring), loaded weights-only; DataError naming the file when it is missing, not a weights-only
    loadable file, or not that state dict. The network is built with ``transform_input=True`` (as
    torchvision does for these weights) and run in eval mode, so pool5 = ``flatten(avgpool(inception5b))``
    (dropout is the identity in eval mode).
    """

    def __init__(self, weights: str, device: str = "cpu"):
        import torch
        try:
            from torchvision.models import googlenet
        except Exception as err:  # ImportError, or a torchvision built for another torch
            raise ImportError(
                f"real features need a torchvision built for torch {torch.__version__} "
                f"(torch 2.N <-> torchvision 0.(N+15); see the script's docstring): {err}") from None
        if not os.path.isfile(weights):
            raise DataError(f"--weights {weights}: file not found (download {GOOGLENET_URL} once, "
                            f"e.g. with curl, and pass its path)")
        try:
            state = torch.load(weights, map_location="cpu", weights_only=True)
        except Exception as err:  # truncated/corrupt file, or a pickled object other than tensors
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            raise DataError(f"--weights {weights}: cannot be read as a weights-only PyTorch state dict "
                            f"({err.__class__.__name__}: {first[:300]})") from None
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise DataError(f"--weights {weights}: holds a {type(state).__name__}, not a state dict of tensors "
                            f"(expected torchvision's GoogLeNet IMAGENET1K_V1 file {GOOGLENET_URL})")
        aux = any(k.startswith(("aux1.", "aux2.")) for k in state)
        model = googlenet(weights=None, aux_logits=aux, transform_input=True, init_weights=False)
        expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
        problem = _describe_mismatch(expected, {k: tuple(v.shape) for k, v in state.items()})
        if problem:
            raise DataError(f"--weights {weights}: not torchvision's GoogLeNet IMAGENET1K_V1 state dict ({problem})")
        model.load_state_dict(state, strict=False)  # keys and shapes checked above; old files lack num_batches_tracked
        model.aux_logits, model.aux1, model.aux2 = False, None, None
        model.fc = torch.nn.Identity()  # output = dropout(flatten(avgpool(inception5b))) -> 1024
        self.model = model.eval().to(device)
        self.device = device

    def __call__(self, x):
        """float32 (n, 3, 224, 224) ImageNet-normalised -> float32 numpy (n, 1024)."""
        import torch

        with torch.inference_mode():
            out = self.model(x.to(self.device))
        if out.shape[-1] != POOL5_DIM:
            raise RuntimeError(f"expected {POOL5_DIM}-d pool5 features, got {tuple(out.shape)}")
        return out.float().cpu().numpy()


# ----------------------------------------------------------------------------------------------
# drivers


def read_mapping(path: str) -> Dict[str, str]:
    """{clip name: video id} from ``<clip> <video id>`` lines (CRLF, missing final newline allowed).

    DataError naming ``path`` (and the line) when the file is missing or a line is malformed.
    """
    if not os.path.isfile(path):
        raise DataError(f"--mapping {path}: file not found")
    mapping = {}
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            fields = line.strip().split()
            if len(fields) != 2:
                raise DataError(f"{path}:{line_no}: expected '<clip name> <video id>'")
            mapping[fields[0]] = fields[1]
    return mapping


def _save(out_dir: str, video_id: str, feats: np.ndarray, source: str = "") -> None:
    if not np.isfinite(feats).all():
        raise DataError(f"non-finite features for video {video_id!r}" + (f" ({source})" if source else ""))
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


def video_features(path: str, net: GoogLeNetPool5, num_frames: int = 24, window: int = 240,
                   batch_size: int = 24) -> np.ndarray:
    """float32 (n, 1024) pool5 features of the frames :func:`read_frames` selects from ``path``."""
    frames = read_frames(path, num_frames, window)
    return np.concatenate([net(preprocess_frames(frames[i:i + batch_size]))
                           for i in range(0, len(frames), batch_size)]).astype(np.float32)


def extract_real(args) -> int:
    mapping = read_mapping(args.mapping) if args.mapping else None
    if not os.path.isdir(args.videos):
        raise DataError(f"--videos {args.videos}: not a folder")
    videos = sorted(p for p in Path(args.videos).iterdir() if p.is_file() and not p.name.startswith("."))
    if not videos:
        raise DataError(f"--videos {args.videos}: no video files in it")
    if args.batch_size < 1:
        raise DataError(f"--batch-size must be >= 1, got {args.batch_size}")
    ids = []  # every clip's video id, checked before the long extraction starts
    for path in videos:
        if mapping is not None and path.stem not in mapping:
            raise DataError(f"{path}: clip {path.stem!r} is not in --mapping {args.mapping}")
        ids.append(mapping[path.stem] if mapping is not None else path.stem)
    net = GoogLeNetPool5(args.weights, args.device)
    os.makedirs(args.out_dir, exist_ok=True)
    n = 0
    for path, vid in zip(videos, ids):
        if args.skip_existing and os.path.isfile(os.path.join(args.out_dir, vid + ".npy")):
            continue
        feats = video_features(str(path), net, args.num_frames, args.window, args.batch_size)
        _save(args.out_dir, vid, feats, str(path))
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
    p.add_argument("--weights",
                   help=f"local copy of torchvision's GoogLeNet IMAGENET1K_V1 state dict ({GOOGLENET_URL})")
    p.add_argument("--device", default="cpu")
    p.add_argument("--batch-size", type=int, default=24)
    p.add_argument("--skip-existing", action="store_true", help="keep .npy files that already exist")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    """Run the extraction; returns the number of feature files written."""
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


def _cli() -> int:
    try:
        main()
    except ImportError as err:  # torchvision / PyAV missing or mismatched: one line, like bad input
        raise DataError(str(err)) from None
    return 0


if __name__ == "__main__":
    run_main(_cli)
