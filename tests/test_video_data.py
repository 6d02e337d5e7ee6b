"""Video-captioning data path (docs/method.md §3.2): caption files, dictionary, feature files, batches,
frame selection, the task's generator, and a fairseq-train -> fairseq-generate -> eval round trip."""
import importlib.util
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from fairseq_acvi.data.video_features import (
    build_dictionary,
    encode_caption,
    item_video_ids,
    padding_mask_from_lengths,
    read_caption_file,
    select_frame_indices,
    synthetic_features,
    tokenize_caption,
)
from tests.conftest import REPO, run_cli

D = 8  # feature dim of the toy data


def _write_data(root: Path, frames=None, captions=None, dim=D):
    """A toy data folder: features/vid*.npy with the given frame counts, train/valid.tsv, dict.txt."""
    frames = frames or {"vidA": 5, "vidB": 3, "vidC": 8}
    captions = captions or {
        "train": [("vidA", "a man is playing a guitar"), ("vidB", "a cat eats"), ("vidA", "someone plays guitar"),
                  ("vidC", "a woman is slicing an onion"), ("vidB", "the cat is eating food")],
        "valid": [("vidC", "a woman slices an onion"), ("vidA", "a man plays"), ("vidC", "onion cutting")],
    }
    (root / "features").mkdir(parents=True, exist_ok=True)
    for vid, n in frames.items():
        # row f of video v holds (index of v + 1) * 100 + f, so rows can be identified after batching
        base = (sorted(frames).index(vid) + 1) * 100
        arr = (base + np.arange(n, dtype=np.float32))[:, None] * np.ones((1, dim), np.float32)
        np.save(root / "features" / f"{vid}.npy", arr)
    for split, rows in captions.items():
        (root / f"{split}.tsv").write_text("".join(f"{v}\t{c}\n" for v, c in rows), encoding="utf-8")
    build_dictionary([str(root / "train.tsv")]).save(str(root / "dict.txt"))
    return root


def _task(root: Path, **overrides):
    from fairseq_acvi.tasks.video_captioning import VideoCaptioningConfig, VideoCaptioningTask

    return VideoCaptioningTask.setup_task(VideoCaptioningConfig(data=str(root), feature_dim=D, **overrides))


# ----------------------------------------------------------------------------------------------
# captions and dictionary


def test_tokenizer_matches_nltk_wordpunct():
    nltk_tok = pytest.importorskip("nltk.tokenize")
    for s in ["A man's playing guitar!", "it s 3.5 o'clock -- really?", "Ünïcode café, naïve  words", "x_y z-w"]:
        assert tokenize_caption(s) == nltk_tok.wordpunct_tokenize(s.lower())


def test_read_caption_file_and_dictionary(tmp_path):
    p = tmp_path / "c.tsv"
    p.write_bytes(b"vid1\tA Man plays\r\nvid2\ta man sings\nvid1\tguitar, man\n")
    recs = read_caption_file(str(p))
    assert [(r.video_id, r.caption, r.line_no) for r in recs] == [
        ("vid1", "A Man plays", 1), ("vid2", "a man sings", 2), ("vid1", "guitar, man", 3)]
    assert item_video_ids(recs, unique_videos=False) == ["vid1", "vid2", "vid1"]
    assert item_video_ids(recs, unique_videos=True) == ["vid1", "vid2"]
    d = build_dictionary([str(p)], min_count=1)
    for w in ["a", "man", "plays", "sings", "guitar", ","]:
        assert d.index(w) != d.unk(), w
    assert d.count[d.index("man")] == 3
    d2 = build_dictionary([str(p)], min_count=2)  # only 'a' (2) and 'man' (3) survive
    assert d2.index("man") != d2.unk() and d2.index("a") != d2.unk()
    assert d2.index("plays") == d2.unk() and d2.index("guitar") == d2.unk()
    ids = encode_caption(d2, "A man plays")
    assert ids.tolist() == [d2.index("a"), d2.index("man"), d2.unk(), d2.eos()]


@pytest.mark.parametrize("content,line,msg", [
    (b"vid1\ta cat\n\nvid2\ta dog\n", 2, "empty line"),
    (b"vid1\ta cat\nvid2\t   \n", 2, "empty caption"),
    (b"vid1 a cat\n", 1, "exactly one tab"),
    (b"vid1\ta\tcat\n", 1, "exactly one tab"),
    (b"\ta cat\n", 1, "empty video id"),
])
def test_caption_file_errors_name_file_and_line(tmp_path, content, line, msg):
    p = tmp_path / "bad.tsv"
    p.write_bytes(content)
    with pytest.raises(ValueError) as err:
        read_caption_file(str(p))
    assert f"{p}:{line}" in str(err.value) and msg in str(err.value)


def test_shared_msvd_captions(shared_data):
    d = shared_data / "msvd"
    train = read_caption_file(str(d / "sents_train_lc_nopunc.txt"))
    valid = read_caption_file(str(d / "sents_val_lc_nopunc.txt"))
    assert len(train) == 48774 and len(set(item_video_ids(train, True))) == 1200
    assert len(item_video_ids(valid, True)) == 100 and item_video_ids(valid, True)[0] == "vid1201"
    assert train[0].video_id == "vid1" and "squirrel" in train[0].caption


# ----------------------------------------------------------------------------------------------
# frame selection and synthetic features


def test_select_frame_indices():
    assert select_frame_indices(240) == list(range(0, 240, 10))
    assert select_frame_indices(1000) == list(range(0, 240, 10))  # only the first 240 frames count
    idx = select_frame_indices(100)
    assert len(idx) == 24 and idx[:4] == [0, 4, 8, 12] and idx[-1] == 95
    assert all(b > a for a, b in zip(idx, idx[1:]))  # equally spaced -> strictly increasing
    assert max(b - a for a, b in zip(idx, idx[1:])) - min(b - a for a, b in zip(idx, idx[1:])) <= 1
    assert select_frame_indices(24) == list(range(24))
    assert select_frame_indices(10) == list(range(10))  # fewer frames than samples: all, no repeats
    assert select_frame_indices(30, 24, window=None) == [(k * 30) // 24 for k in range(24)]
    with pytest.raises(ValueError):
        select_frame_indices(0)


def test_synthetic_features_deterministic():
    a, b = synthetic_features("vid7"), synthetic_features("vid7")
    assert a.shape == (24, 1024) and a.dtype == np.float32 and np.array_equal(a, b)
    assert (a >= 0).all() and np.isfinite(a).all()
    assert not np.allclose(a, synthetic_features("vid8"))


def test_extract_script_synthetic_mode(tmp_path):
    caps = tmp_path / "c.tsv"
    caps.write_text("vid2\ta b\nvid9\tc d\nvid2\te\n")
    out = tmp_path / "feats"
    mod = _load_extract_script()
    n = mod.main(["--synthetic", "--captions", str(caps), "--out-dir", str(out), "--feature-dim", "16"])
    assert n == 2 and sorted(os.listdir(out)) == ["vid2.npy", "vid9.npy"]
    assert np.array_equal(np.load(out / "vid9.npy"), synthetic_features("vid9", 24, 16))
    # frame preprocessing (plain torch): shape and ImageNet normalisation of a constant grey frame
    x = mod.preprocess_frames(np.full((2, 120, 160, 3), 128, np.uint8))
    assert x.shape == (2, 3, 224, 224)
    expect = (128 / 255 - torch.tensor(mod.IMAGENET_MEAN)) / torch.tensor(mod.IMAGENET_STD)
    assert torch.allclose(x[0, :, 100, 100], expect, atol=1e-4)


def _load_extract_script():
    spec = importlib.util.spec_from_file_location("extract_video_features",
                                                  REPO / "data_scripts" / "extract_video_features.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_read_frames_decodes_the_selected_frames(tmp_path):
    """Encode a lossless toy video whose frame i is grey level 8*i; decoding must return the selected frames."""
    av = pytest.importorskip("av")
    path = str(tmp_path / "toy.mkv")
    with av.open(path, "w") as c:
        stream = c.add_stream("ffv1", rate=25)
        stream.width, stream.height, stream.pix_fmt = 32, 24, "yuv444p"
        for i in range(30):
            frame = av.VideoFrame.from_ndarray(np.full((24, 32, 3), 8 * i, np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                c.mux(packet)
        for packet in stream.encode():
            c.mux(packet)
    mod = _load_extract_script()
    frames = mod.read_frames(path, num_samples=24, window=240)  # 30 frames < 240: 24 of all 30
    assert frames.shape == (24, 24, 32, 3) and frames.dtype == np.uint8
    expect = np.array([8 * i for i in select_frame_indices(30, 24, 240)])
    assert np.abs(frames[:, 5, 5, 0].astype(int) - expect).max() <= 2  # yuv<->rgb rounding only
    frames = mod.read_frames(path, num_samples=6, window=12)  # only the first 12 frames count
    assert np.abs(frames[:, 5, 5, 0].astype(int) - np.array([0, 16, 32, 48, 64, 80])).max() <= 2
    frames = mod.read_frames(path, num_samples=40, window=240)  # fewer frames than samples: all 30
    assert len(frames) == 30


# ----------------------------------------------------------------------------------------------
# dataset and batches


def test_batches_pad_variable_frame_counts(tmp_path):
    root = _write_data(tmp_path)
    task = _task(root, max_frames=24)
    task.load_dataset("train")
    ds = task.dataset("train")
    assert len(ds) == 5 and ds.video_ids == ["vidA", "vidB", "vidA", "vidC", "vidB"]
    batch = ds.collater([ds[i] for i in range(5)])
    net = batch["net_input"]
    assert set(net) == {"src_feats", "src_lengths", "prev_output_tokens"}
    feats, lengths = net["src_feats"], net["src_lengths"]
    assert feats.dtype == torch.float32 and feats.shape == (5, 8, D)
    assert lengths.tolist() == [8, 5, 5, 3, 3]  # sorted, longest first
    assert batch["id"].tolist() == [3, 0, 2, 1, 4]
    base = {"vidA": 100, "vidB": 200, "vidC": 300}
    for b, i in enumerate(batch["id"].tolist()):
        n = int(lengths[b])
        vid = ds.video_ids[i]
        assert torch.equal(feats[b, :n, 0], base[vid] + torch.arange(n, dtype=torch.float32))
        assert (feats[b, n:] == 0).all()  # zero padding
    mask = padding_mask_from_lengths(lengths, feats.size(1))
    assert mask.dtype == torch.bool and mask.shape == (5, 8)
    assert mask.sum(1).tolist() == [0, 3, 3, 5, 5] and not mask[:, 0].any()
    d = task.target_dictionary
    tgt, prev = batch["target"], net["prev_output_tokens"]
    for b, i in enumerate(batch["id"].tolist()):
        words = tokenize_caption(["a man is playing a guitar", "a cat eats", "someone plays guitar",
                                  "a woman is slicing an onion", "the cat is eating food"][i])
        t = tgt[b][tgt[b] != d.pad()].tolist()
        assert t == [d.index(w) for w in words] + [d.eos()]
        p = prev[b][prev[b] != d.pad()].tolist()
        assert p == [d.eos()] + t[:-1]
    assert batch["ntokens"] == sum(len(tokenize_caption(c)) + 1 for c in
                                   ["a man is playing a guitar", "a cat eats", "someone plays guitar",
                                    "a woman is slicing an onion", "the cat is eating food"])
    assert batch["nsentences"] == 5
    # the batching iterator of fairseq works on it
    itr = task.get_batch_iterator(ds, max_sentences=2, max_positions=task.max_positions()).next_epoch_itr(shuffle=False)
    assert sum(b["nsentences"] for b in itr) == 5


def test_max_frames_takes_equally_spaced_rows(tmp_path):
    root = _write_data(tmp_path, frames={"vidA": 30, "vidB": 3, "vidC": 8})
    task = _task(root, max_frames=6)
    task.load_dataset("train")
    ds = task.dataset("train")
    item = ds[0]  # vidA, 30 rows -> 6 rows 0, 5, 10, ...
    assert item["source"][:, 0].tolist() == [100 + k * 5 for k in range(6)]
    assert ds[3]["source"].shape == (6, D)  # vidC: 8 -> 6 rows
    assert ds[1]["source"].shape == (3, D)  # vidB: kept as is


def test_unique_video_mode(tmp_path):
    root = _write_data(tmp_path)
    task = _task(root, caption_eval_unique_videos=True)
    task.load_dataset("valid")
    task.load_dataset("train")
    ds = task.dataset("valid")
    assert ds.video_ids == ["vidC", "vidA"]  # first appearance order
    d = task.target_dictionary
    assert ds[0]["target"].tolist() == [d.index(w) for w in tokenize_caption("a woman slices an onion")] + [d.eos()]
    assert len(task.dataset("train")) == 5  # training keeps one item per caption


def test_feature_errors_name_the_file(tmp_path):
    root = _write_data(tmp_path)
    feat = root / "features"
    # unknown video id: caption without a feature file
    with open(root / "train.tsv", "a") as fh:
        fh.write("vidZ\ta new video\n")
    with pytest.raises(FileNotFoundError, match=r"vidZ\.npy.*train\.tsv"):
        _task(root).load_dataset("train")
    (root / "train.tsv").write_text("vidA\ta man\n")
    # wrong feature dim
    np.save(feat / "vidA.npy", np.zeros((5, D + 1), np.float32))
    with pytest.raises(ValueError, match=r"vidA\.npy has shape \(5, 9\)"):
        _task(root).load_dataset("train")
    # 1-D / 3-D arrays, zero frames
    for bad in [np.zeros(D, np.float32), np.zeros((2, 3, D), np.float32), np.zeros((0, D), np.float32)]:
        np.save(feat / "vidA.npy", bad)
        with pytest.raises(ValueError, match=r"vidA\.npy has shape"):
            _task(root).load_dataset("train")
    # not a .npy file
    (feat / "vidA.npy").write_bytes(b"garbage")
    with pytest.raises(ValueError, match=r"cannot read feature file .*vidA\.npy"):
        _task(root).load_dataset("train")
    # integer dtype
    np.save(feat / "vidA.npy", np.zeros((5, D), np.int64))
    with pytest.raises(ValueError, match=r"vidA\.npy has dtype int64"):
        _task(root).load_dataset("train")
    # NaN / inf: found when the item is read
    for value in (np.nan, np.inf):
        arr = np.ones((5, D), np.float32)
        arr[3, 2] = value
        np.save(feat / "vidA.npy", arr)
        task = _task(root)
        task.load_dataset("train")
        with pytest.raises(ValueError, match=r"vidA\.npy contains NaN or inf \(first at frame 3, dim 2\)"):
            task.dataset("train")[0]
    # float64 beyond float32's range: named as such, no overflow warning
    arr = np.ones((5, D), np.float64)
    arr[1, 0] = 1e300
    np.save(feat / "vidA.npy", arr)
    task = _task(root)
    task.load_dataset("train")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"vidA\.npy contains a value beyond float32's range "
                                             r"\(first at frame 1, dim 0\)"):
            task.dataset("train")[0]
    # missing split file / dictionary
    with pytest.raises(FileNotFoundError, match=r"test\.tsv"):
        _task(root).load_dataset("test")
    os.remove(root / "dict.txt")
    with pytest.raises(FileNotFoundError, match=r"dict\.txt"):
        _task(root)


def test_empty_caption_in_split_names_file_and_line(tmp_path):
    root = _write_data(tmp_path)
    (root / "valid.tsv").write_text("vidA\ta man\nvidB\t \n")
    with pytest.raises(ValueError, match=r"valid\.tsv:2: empty caption"):
        _task(root).load_dataset("valid")


# ----------------------------------------------------------------------------------------------
# generation with a toy model (in process), and the real CLIs


TOY_MODEL = '''
"""A tiny feature->caption model, only for tests: masked mean of projected frames conditions a GRU."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.models import (FairseqDecoder, FairseqEncoder, FairseqEncoderDecoderModel, register_model,
                            register_model_architecture)

import fairseq_acvi  # noqa: F401  (registers the video_captioning task)
from fairseq_acvi.data.video_features import padding_mask_from_lengths


class ToyEncoder(FairseqEncoder):
    def __init__(self, dim_in, dim):
        super().__init__(None)
        self.proj = nn.Linear(dim_in, dim)

    def forward(self, src_feats, src_lengths):  # exactly the contract: no other keys
        mask = padding_mask_from_lengths(src_lengths, src_feats.size(1))
        h = torch.tanh(self.proj(src_feats)).masked_fill(mask[..., None], 0.0)
        return {"encoder_out": [h.sum(1) / src_lengths[:, None].to(h)]}

    def reorder_encoder_out(self, encoder_out, new_order):
        return {"encoder_out": [encoder_out["encoder_out"][0].index_select(0, new_order)]}


class ToyDecoder(FairseqDecoder):
    def __init__(self, dictionary, dim):
        super().__init__(dictionary)
        self.embed = nn.Embedding(len(dictionary), dim, padding_idx=dictionary.pad())
        self.rnn = nn.GRU(2 * dim, dim, batch_first=True)
        self.out = nn.Linear(dim, len(dictionary))

    def forward(self, prev_output_tokens, encoder_out=None, **kwargs):
        ctx = encoder_out["encoder_out"][0]
        x = self.embed(prev_output_tokens)
        x = torch.cat([x, ctx[:, None, :].expand(-1, x.size(1), -1)], dim=-1)
        y, _ = self.rnn(x, ctx[None].contiguous())
        return self.out(y), None

    def max_positions(self):
        return 1024


@register_model("toy_video_captioner")
class ToyCaptioner(FairseqEncoderDecoderModel):
    @staticmethod
    def add_args(parser):
        parser.add_argument("--toy-dim", type=int)

    def forward(self, src_feats, src_lengths, prev_output_tokens, **kwargs):
        enc = self.encoder(src_feats=src_feats, src_lengths=src_lengths)
        return self.decoder(prev_output_tokens, encoder_out=enc)

    @classmethod
    def build_model(cls, args, task):
        return cls(ToyEncoder(task.cfg.feature_dim, args.toy_dim), ToyDecoder(task.target_dictionary, args.toy_dim))


@register_model_architecture("toy_video_captioner", "toy_video_captioner")
def toy_arch(args):
    args.toy_dim = getattr(args, "toy_dim", None) or 32
'''


def _toy_plugin(tmp_path: Path) -> Path:
    plugin = tmp_path / "toy_plugin"
    plugin.mkdir()
    (plugin / "__init__.py").write_text(TOY_MODEL)
    return plugin


def test_generator_reads_src_feats_and_learns_toy_task(tmp_path):
    """Train the toy model in process on 3 videos (1 caption each), then beam-search with the task's generator."""
    import importlib
    import sys
    from argparse import Namespace

    from fairseq_acvi.tasks.video_captioning import FeatureSequenceGenerator

    caps = {"vidA": "a man plays a guitar", "vidB": "a cat eats food", "vidC": "a woman slices an onion"}
    rows = [(v, c) for v, c in caps.items()]
    root = _write_data(tmp_path / "data", captions={"train": rows, "valid": rows})
    for vid, n in {"vidA": 3, "vidB": 5, "vidC": 7}.items():  # distinguishable features, padded batches
        np.save(root / "features" / f"{vid}.npy", synthetic_features(vid, n, D))
    toy = sys.modules.get("toy_plugin")
    if toy is None:  # import once per process (it registers a model)
        _toy_plugin(tmp_path)
        sys.path.insert(0, str(tmp_path))
        try:
            toy = importlib.import_module("toy_plugin")
        finally:
            sys.path.remove(str(tmp_path))
    task = _task(root, caption_eval_unique_videos=True)
    task.load_dataset("train")
    task.load_dataset("valid")
    torch.manual_seed(0)
    model = toy.ToyCaptioner.build_model(Namespace(toy_dim=32), task)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    ds = task.dataset("train")
    batch = ds.collater([ds[i] for i in range(len(ds))])
    pad = task.target_dictionary.pad()
    for _ in range(150):
        logits, _ = model(**batch["net_input"])
        loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch["target"], ignore_index=pad)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    model.eval()
    gen = task.build_generator([model], Namespace(beam=3, max_len_b=20, max_len_a=0))
    assert isinstance(gen, FeatureSequenceGenerator)
    vds = task.dataset("valid")
    vbatch = vds.collater([vds[i] for i in range(len(vds))])
    hyps = task.inference_step(gen, [model], vbatch)
    out = {vds.video_ids[i]: task.target_dictionary.string(h[0]["tokens"])
           for i, h in zip(vbatch["id"].tolist(), hyps)}
    assert out == caps


@pytest.mark.slow  # three CLI start-ups; ~90 s on the shared 2-core machine
def test_train_generate_eval_cli_round_trip(tmp_path):
    """fairseq-train (toy model) -> fairseq-generate --caption-eval-unique-videos -> eval_captioning."""
    pytest.importorskip("pycocoevalcap")
    caps = {"vidA": "a man plays a guitar", "vidB": "a cat eats food", "vidC": "a woman slices an onion"}
    rows = [(v, c) for v, c in caps.items()]
    root = _write_data(tmp_path / "data", captions={"train": rows * 10, "valid": rows})
    for vid, n in {"vidA": 3, "vidB": 5, "vidC": 7}.items():
        np.save(root / "features" / f"{vid}.npy", synthetic_features(vid, n, D))
    plugin = _toy_plugin(tmp_path)
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO), os.environ.get("PYTHONPATH", "")])}
    ckpt = tmp_path / "ckpt"
    run_cli("fairseq_cli.train", root, "--user-dir", plugin, "--task", "video_captioning", "--feature-dim", D,
            "--arch", "toy_video_captioner", "--optimizer", "adam", "--lr", "0.02", "--max-epoch", "20",
            "--batch-size", "6", "--required-batch-size-multiple", "1", "--criterion", "cross_entropy",
            "--save-dir", ckpt, "--no-epoch-checkpoints",
            "--no-save-optimizer-state", "--log-format", "simple", "--log-interval", "50", "--seed", "1",
            "--validate-interval", "20", "--save-interval", "20", "--num-workers", "0", "--cpu", env_extra=env)
    gen = run_cli("fairseq_cli.generate", root, "--user-dir", plugin, "--task", "video_captioning",
                  "--feature-dim", D, "--path", ckpt / "checkpoint_last.pt", "--gen-subset", "valid",
                  "--caption-eval-unique-videos", "--beam", "3", "--batch-size", "2", "--cpu",
                  "--num-workers", "0", env_extra=env)
    gen_file = tmp_path / "gen.txt"
    gen_file.write_text(gen.stdout)
    hyp_lines = sorted(l for l in gen.stdout.splitlines() if l.startswith("H-"))
    assert [l.split("\t")[0] for l in hyp_lines] == ["H-0", "H-1", "H-2"]  # one per video
    assert [l.split("\t")[2] for l in hyp_lines] == [caps["vidA"], caps["vidB"], caps["vidC"]]
    res = run_cli("fairseq_acvi.cli.eval_captioning", "--split", "valid", root / "valid.tsv", gen_file,
                  "--metrics", "BLEU-4", "ROUGE-L", "CIDEr", "--json", tmp_path / "s.json")
    import json
    scores = json.loads((tmp_path / "s.json").read_text())["valid"]
    assert scores["ROUGE-L"] == pytest.approx(1.0)
    assert scores["BLEU-4"] == pytest.approx(1.0, abs=1e-6)
    assert scores["CIDEr"] == pytest.approx(10.0)  # CIDEr-D of identical captions of >= 4 words
    assert "ACVI" in res.stdout and "0.5968" in res.stdout  # Table 3 with the published values


@pytest.mark.slow  # two Python start-ups with fairseq imports (~1 min on the shared machine)
def test_prepare_msvd_script_synthetic(tmp_path):
    """data_scripts/prepare_msvd.sh on toy MSVD-named files: tsv copies, .videos, dict.txt, synthetic features."""
    import subprocess

    msvd = tmp_path / "msvd"
    msvd.mkdir()
    (msvd / "sents_train_lc_nopunc.txt").write_bytes(b"vid1\ta man plays\r\nvid2\ta cat eats\r\nvid1\ta man sings\r\n")
    (msvd / "sents_val_lc_nopunc.txt").write_text("vid3\ta dog runs\n")
    (msvd / "sents_test_lc_nopunc.txt").write_text("vid5\ta bird flies\nvid4\ta man runs\n")
    out = tmp_path / "out"
    env = dict(os.environ, MSVD_DIR=str(msvd), OUT_DIR=str(out), OMP_NUM_THREADS="1")
    res = subprocess.run(["bash", "data_scripts/prepare_msvd.sh", "--synthetic", "--min-count", "2"], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (out / "train.tsv").read_text() == "vid1\ta man plays\nvid2\ta cat eats\nvid1\ta man sings\n"
    assert (out / "test.videos").read_text() == "vid5\nvid4\n"
    words = [line.split()[0] for line in (out / "dict.txt").read_text().splitlines()]
    assert words[:2] == ["a", "man"] and "plays" not in words  # min count 2 over train captions
    assert sorted(os.listdir(out / "features")) == [f"vid{i}.npy" for i in range(1, 6)]
    assert np.array_equal(np.load(out / "features" / "vid4.npy"), synthetic_features("vid4"))
    # a video id in two splits is refused
    (msvd / "sents_val_lc_nopunc.txt").write_text("vid1\ta dog runs\n")
    res = subprocess.run(["bash", "data_scripts/prepare_msvd.sh"], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=900)
    assert res.returncode != 0 and "vid1 is in both train and valid" in res.stderr
