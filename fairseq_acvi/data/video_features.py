"""Video-captioning data: caption files, frame-feature files and the batched dataset (docs/method.md §3.2).

On-disk layout read by the ``video_captioning`` task (written by ``data_scripts/prepare_msvd.sh``)::

    DATA/
      dict.txt              fairseq dictionary over caption words (lower-cased NLTK wordpunct tokens)
      train.tsv valid.tsv test.tsv
                            one caption a line: ``VIDEO_ID<TAB>caption`` (UTF-8, LF or CRLF)
      features/VIDEO_ID.npy one array per video, shape (frames, feature_dim), floating point;
                            24 x 1024 GoogLeNet pool5 features (``data_scripts/extract_video_features.py``)

Items and ids. In *caption* mode item ``i`` is the ``i``-th caption line of the split file (every caption
is a training pair). In *unique-video* mode item ``i`` is the ``i``-th distinct video id in order of
first appearance in the file, and its target is that video's first caption. :func:`item_video_ids`
computes the item -> video map for both modes; the evaluation command uses it to map the ``H-<id>``
lines of ``fairseq-generate`` back to videos.

Batches (:meth:`VideoCaptionDataset.collater`)::

    id                             LongTensor (B,)       item ids
    net_input.src_feats            FloatTensor (B, F_max, D) float32, zero beyond src_lengths[b]
    net_input.src_lengths          LongTensor (B,)       frames per video, sorted in descending order
    net_input.prev_output_tokens   LongTensor (B, T)     [eos, w_1 .. w_{T-1}] right-padded
    target                         LongTensor (B, T)     [w_1 .. w_{T-1}, eos] right-padded
    ntokens, nsentences            int

The padding mask is ``padding_mask_from_lengths(src_lengths, F_max)``: BoolTensor (B, F_max), True at
padded frames (fairseq's ``encoder_padding_mask`` convention).
"""
from __future__ import annotations

import codecs
import hashlib
import os
import re
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch
from fairseq.data import Dictionary, FairseqDataset, data_utils

# NLTK's WordPunctTokenizer splits on this pattern (alphanumeric runs, or runs of other non-space
# characters); it is restated here so that the data path does not need nltk at run time. A test
# checks that it agrees with ``nltk.tokenize.wordpunct_tokenize``.
_WORDPUNCT = re.compile(r"\w+|[^\w\s]+")


def tokenize_caption(text: str) -> List[str]:
    """Lower-case ``text`` and split it as NLTK's ``wordpunct_tokenize`` does (docs/method.md §3.2)."""
    return _WORDPUNCT.findall(text.lower())


# ----------------------------------------------------------------------------------------------
# caption files


@dataclass(frozen=True)
class CaptionRecord:
    video_id: str
    caption: str  # raw caption text, stripped
    line_no: int  # 1-based line number in the file it came from


def read_caption_file(path: str) -> List[CaptionRecord]:
    """Read a ``VIDEO_ID<TAB>caption`` file; every non-final-newline line must be a valid record.

    Raises ValueError naming the file and line for a blank line, a line without exactly one tab, an
    empty video id, a caption with no tokens, or bytes that are not UTF-8; FileNotFoundError when
    the file does not exist. A leading UTF-8 byte-order mark is skipped.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"caption file not found: {path}")
    records = []
    with open(path, "rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            where = f"{path}:{line_no}"
            if line_no == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8):]  # a byte-order mark is not part of the video id
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(f"{where}: not valid UTF-8 ({err})") from None
            line = line.rstrip("\r\n")
            if not line.strip():
                raise ValueError(f"{where}: empty line (expected 'VIDEO_ID<TAB>caption')")
            fields = line.split("\t")
            if len(fields) != 2:
                raise ValueError(
                    f"{where}: expected 'VIDEO_ID<TAB>caption' (exactly one tab), found {len(fields) - 1} tabs"
                )
            video_id, caption = fields[0].strip(), fields[1].strip()
            if not video_id:
                raise ValueError(f"{where}: empty video id")
            if not tokenize_caption(caption):
                raise ValueError(f"{where}: empty caption for video {video_id!r}")
            records.append(CaptionRecord(video_id, caption, line_no))
    if not records:
        raise ValueError(f"{path}: no captions")
    return records


def unique_video_ids(records: Iterable[CaptionRecord]) -> List[str]:
    """Distinct video ids in order of first appearance."""
    return list(OrderedDict.fromkeys(r.video_id for r in records))


def item_video_ids(records: Sequence[CaptionRecord], unique_videos: bool) -> List[str]:
    """Video id of every dataset item (see the module docstring for the two item orders)."""
    return unique_video_ids(records) if unique_videos else [r.video_id for r in records]


def group_references(records: Iterable[CaptionRecord]) -> "OrderedDict[str, List[str]]":
    """All reference captions of each video, videos in order of first appearance."""
    refs: "OrderedDict[str, List[str]]" = OrderedDict()
    for r in records:
        refs.setdefault(r.video_id, []).append(r.caption)
    return refs


def build_dictionary(caption_files: Sequence[str], min_count: int = 1) -> Dictionary:
    """fairseq Dictionary over the lower-cased wordpunct tokens of ``caption_files``.

    Words seen fewer than ``min_count`` times are left out (they map to ``<unk>``).
    """
    if min_count < 1:
        raise ValueError(f"--min-count must be >= 1, got {min_count}")
    counts: Counter = Counter()
    for path in caption_files:
        for rec in read_caption_file(path):
            counts.update(tokenize_caption(rec.caption))
    d = Dictionary()
    for word, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if n >= min_count:
            d.add_symbol(word, n)
    d.finalize(padding_factor=8)
    return d


def encode_caption(dictionary: Dictionary, caption: str) -> torch.LongTensor:
    """Token ids of ``caption`` followed by eos: LongTensor (len + 1,)."""
    ids = [dictionary.index(w) for w in tokenize_caption(caption)] + [dictionary.eos()]
    return torch.tensor(ids, dtype=torch.long)


# ----------------------------------------------------------------------------------------------
# frames and features


def select_frame_indices(num_frames: int, num_samples: int = 24, window: Optional[int] = 240) -> List[int]:
    """Indices of ``num_samples`` equally spaced frames among the first ``window`` (docs/method.md §3.2).

    With ``u = min(num_frames, window)`` usable frames (``window=None``: all frames), frame
    ``k = 0..num_samples-1`` is ``floor(k * u / num_samples)``: for u = 240, n = 24 this is
    0, 10, ..., 230. A video with ``u <= num_samples`` frames keeps all of them (no repeats), so
    its feature array has fewer rows; the dataset batches variable frame counts with padding.
    """
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    if num_frames < 1:
        raise ValueError(f"a video needs at least one frame, got {num_frames}")
    usable = num_frames if window is None else min(num_frames, window)
    if usable <= num_samples:
        return list(range(usable))
    return [(k * usable) // num_samples for k in range(num_samples)]


def synthetic_features(video_id: str, num_frames: int = 24, feature_dim: int = 1024) -> np.ndarray:
    """Deterministic stand-in features for ``video_id``: float32 (num_frames, feature_dim), >= 0.

    Seeded by a SHA-256 of the id (stable across runs and platforms); values are |N(0, 1)| / 2,
    non-negative like post-ReLU pool5 activations. Only for running the pipeline offline.
    """
    seed = int.from_bytes(hashlib.sha256(video_id.encode("utf-8")).digest()[:8], "little")
    rng = np.random.default_rng(seed)
    return (np.abs(rng.standard_normal((num_frames, feature_dim))) * 0.5).astype(np.float32)


def padding_mask_from_lengths(lengths: torch.Tensor, max_len: Optional[int] = None) -> torch.BoolTensor:
    """BoolTensor (B, max_len), True where position >= lengths[b] (padding)."""
    max_len = int(lengths.max()) if max_len is None else max_len
    return torch.arange(max_len, device=lengths.device)[None, :] >= lengths[:, None]


def infer_feature_dim(feature_dir: str) -> int:
    """The per-frame feature size D shared by every ``FEATURE_DIR/*.npy`` file of shape (frames, D).

    Only the .npy headers are read. Raises FileNotFoundError when the folder is missing or holds no .npy
    file, ValueError naming the files when a header is unreadable, not 2-D, or the sizes disagree (e.g.
    1280 from EfficientNet-Lite0 next to 1024 from GoogLeNet). Used by the task when ``--feature-dim``
    is 0 (its default): the model is then built for whatever the extraction wrote.
    """
    if not os.path.isdir(feature_dir):
        raise FileNotFoundError(f"feature folder not found: {feature_dir}")
    by_dim: Dict[int, str] = {}
    for name in sorted(os.listdir(feature_dir)):
        if not name.endswith(".npy") or name.endswith(".tmp.npy") or name.startswith("."):
            continue
        path = os.path.join(feature_dir, name)
        try:
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
        except Exception as err:
            raise ValueError(f"cannot read feature file {path}: {err}") from None
        if arr.ndim != 2:
            raise ValueError(f"feature file {path} has shape {tuple(arr.shape)}; expected (frames, feature_dim)")
        by_dim.setdefault(int(arr.shape[1]), path)
    if not by_dim:
        raise FileNotFoundError(f"no .npy feature files in {feature_dir} to take the feature size from "
                                f"(extract them first, or pass --feature-dim D)")
    if len(by_dim) > 1:
        examples = "; ".join(f"{d}-d: {p}" for d, p in sorted(by_dim.items()))
        raise ValueError(f"feature files in {feature_dir} disagree on the feature size ({examples}); "
                         f"use one backbone for every video")
    return next(iter(by_dim))


class VideoFeatureStore:
    """Lazy, validated access to ``FEATURE_DIR/VIDEO_ID.npy`` (memory-mapped, read per item).

    On construction every listed video's file must exist and have a 2-D floating shape
    (frames >= 1, feature_dim columns); only the .npy header is read. NaN/inf are checked when a
    video is loaded. Files with more than ``max_frames`` rows are reduced to ``max_frames`` equally
    spaced rows (:func:`select_frame_indices` over all rows).
    """

    def __init__(self, feature_dir: str, video_ids: Iterable[str], feature_dim: int, max_frames: int,
                 caption_file: Optional[str] = None):
        if max_frames < 1 or feature_dim < 1:
            raise ValueError(f"--max-frames and --feature-dim must be >= 1, got {max_frames}, {feature_dim}")
        self.feature_dir = feature_dir
        self.feature_dim = feature_dim
        self.max_frames = max_frames
        self.num_frames: Dict[str, int] = {}
        if not os.path.isdir(feature_dir):
            raise FileNotFoundError(f"feature folder not found: {feature_dir}")
        for vid in video_ids:
            if vid in self.num_frames:
                continue
            path = self.path(vid)
            if not os.path.isfile(path):
                ref = f" (video id used in {caption_file})" if caption_file else ""
                raise FileNotFoundError(f"missing feature file {path}{ref}: no features for video {vid!r}")
            arr = self._open(path)
            self.num_frames[vid] = min(arr.shape[0], max_frames)

    def path(self, video_id: str) -> str:
        return os.path.join(self.feature_dir, video_id + ".npy")

    def _open(self, path: str) -> np.ndarray:
        try:
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
        except Exception as err:  # corrupt header, pickled object, truncated file, ...
            raise ValueError(f"cannot read feature file {path}: {err}") from None
        if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] != self.feature_dim:
            raise ValueError(
                f"feature file {path} has shape {tuple(arr.shape)}; expected (frames >= 1, {self.feature_dim}) "
                f"(see --feature-dim)"
            )
        if not np.issubdtype(arr.dtype, np.floating):
            raise ValueError(f"feature file {path} has dtype {arr.dtype}; expected floating point")
        return arr

    def load(self, video_id: str) -> torch.Tensor:
        """FloatTensor (F, D) float32 with F = min(frames in file, max_frames)."""
        path = self.path(video_id)
        arr = self._open(path)
        if arr.shape[0] > self.max_frames:
            arr = arr[select_frame_indices(arr.shape[0], self.max_frames, window=None)]
        with np.errstate(over="ignore"):  # float64 beyond float32's range -> inf, refused below
            out = np.array(arr, dtype=np.float32)  # copies out of the memory map
        if not np.isfinite(out).all():
            f, d = np.argwhere(~np.isfinite(out))[0]
            what = ("a value beyond float32's range" if np.isfinite(arr[f, d])
                    else "NaN or inf")
            raise ValueError(f"feature file {path} contains {what} (first at frame {f}, dim {d})")
        return torch.from_numpy(out)


class VideoCaptionDataset(FairseqDataset):
    """(video features, caption) pairs; see the module docstring for items and batch layout.

    Args:
        store: the feature reader.
        video_ids: video id of each item (length N).
        targets: LongTensor (len_i + 1,) per item, ending in eos.
        tgt_dict: the caption dictionary (pad/eos ids).
        shuffle: shuffle before sorting by length in :meth:`ordered_indices`.
    """

    def __init__(self, store: VideoFeatureStore, video_ids: Sequence[str], targets: Sequence[torch.Tensor],
                 tgt_dict: Dictionary, shuffle: bool = True):
        if len(video_ids) != len(targets):
            raise ValueError(f"{len(video_ids)} video ids but {len(targets)} targets")
        self.store = store
        self.video_ids = list(video_ids)
        self.targets = list(targets)
        self.tgt_dict = tgt_dict
        self.shuffle = shuffle
        self.src_sizes = np.array([store.num_frames[v] for v in self.video_ids], dtype=np.int64)
        self.tgt_sizes = np.array([len(t) for t in self.targets], dtype=np.int64)

    def __len__(self):
        return len(self.video_ids)

    def __getitem__(self, index):
        return {"id": index, "source": self.store.load(self.video_ids[index]), "target": self.targets[index]}

    def collater(self, samples):
        samples = [s for s in samples if s is not None]
        if not samples:
            return {}
        # longest video first, as packed-sequence LSTM encoders expect (stable for ties)
        order = sorted(range(len(samples)), key=lambda i: -samples[i]["source"].size(0))
        samples = [samples[i] for i in order]
        lengths = torch.tensor([s["source"].size(0) for s in samples], dtype=torch.long)
        feats = torch.zeros(len(samples), int(lengths.max()), self.store.feature_dim, dtype=torch.float32)
        for b, s in enumerate(samples):
            feats[b, : s["source"].size(0)] = s["source"]
        targets = [s["target"] for s in samples]
        pad, eos = self.tgt_dict.pad(), self.tgt_dict.eos()
        target = data_utils.collate_tokens(targets, pad, eos, left_pad=False)
        prev = data_utils.collate_tokens(targets, pad, eos, left_pad=False, move_eos_to_beginning=True)
        return {
            "id": torch.tensor([s["id"] for s in samples], dtype=torch.long),
            "nsentences": len(samples),
            "ntokens": sum(len(t) for t in targets),
            "net_input": {"src_feats": feats, "src_lengths": lengths, "prev_output_tokens": prev},
            "target": target,
        }

    def num_tokens(self, index):
        return max(int(self.src_sizes[index]), int(self.tgt_sizes[index]))

    def num_tokens_vec(self, indices):
        return np.maximum(self.src_sizes[indices], self.tgt_sizes[indices])

    def size(self, index):
        return int(self.src_sizes[index]), int(self.tgt_sizes[index])

    @property
    def sizes(self):
        return np.vstack((self.src_sizes, self.tgt_sizes)).T

    def ordered_indices(self):
        order = np.random.permutation(len(self)) if self.shuffle else np.arange(len(self))
        order = order[np.argsort(self.tgt_sizes[order], kind="mergesort")]
        return order[np.argsort(self.src_sizes[order], kind="mergesort")]

    def filter_indices_by_size(self, indices, max_sizes):
        return data_utils.filter_paired_dataset_indices_by_size(self.src_sizes, self.tgt_sizes, indices, max_sizes)

    @property
    def supports_prefetch(self):
        return False


def load_caption_dataset(caption_file: str, feature_dir: str, tgt_dict: Dictionary, feature_dim: int,
                         max_frames: int, unique_videos: bool = False, shuffle: bool = True
                         ) -> Tuple[VideoCaptionDataset, List[CaptionRecord]]:
    """Read ``caption_file``, check that every video has a valid feature file, build the dataset."""
    records = read_caption_file(caption_file)
    store = VideoFeatureStore(feature_dir, (r.video_id for r in records), feature_dim, max_frames,
                              caption_file=caption_file)
    if unique_videos:
        firsts = OrderedDict()
        for r in records:
            firsts.setdefault(r.video_id, r)
        chosen = list(firsts.values())
    else:
        chosen = records
    targets = [encode_caption(tgt_dict, r.caption) for r in chosen]
    dataset = VideoCaptionDataset(store, [r.video_id for r in chosen], targets, tgt_dict, shuffle=shuffle)
    return dataset, records
