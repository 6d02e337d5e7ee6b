"""data_scripts/prepare_msrvtt.py on a slice of the real MSR-VTT folder ($ACVI_DATA/msrvtt_1k): counts,
a split disjoint by clip, every caption a line once, the task reading the result, and every bad input
stopping with an error that names the file (skipped without ACVI_DATA)."""
import collections
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "data_scripts"))
import prepare_msrvtt as pm  # noqa: E402
from common import DataError  # noqa: E402

N_SLICE = 30


@pytest.fixture
def msrvtt_slice(shared_data, tmp_path):
    """The first 30 clips of the real folder (video0-video29), their captions.json entries and features."""
    src = shared_data / "msrvtt_1k"
    if not (src / "captions.json").is_file():
        pytest.skip(f"{src} has no captions.json")
    full = json.loads((src / "captions.json").read_text(encoding="utf-8"))
    ids = [f"video{i}" for i in range(N_SLICE)]
    root = tmp_path / "msrvtt_slice"
    (root / "features").mkdir(parents=True)
    (root / "captions.json").write_text(json.dumps({v: full[v] for v in ids}), encoding="utf-8")
    for v in ids:
        (root / "features" / f"{v}.npy").write_bytes((src / "features" / f"{v}.npy").read_bytes())
    return root, {v: full[v]["captions"] for v in ids}


def read_tsv(path):
    return [tuple(line.split("\t")) for line in path.read_text(encoding="utf-8").splitlines()]


def test_slice_counts_split_and_every_caption_once(msrvtt_slice, tmp_path):
    src, captions = msrvtt_slice
    out = tmp_path / "out"
    summary = pm.prepare(src, out, sizes=(20, 5, 5))
    assert summary["dim"] == 128 and summary["frames"] == {50: N_SLICE}
    splits = {s: read_tsv(out / f"{s}.tsv") for s in pm.SPLITS}
    videos = {s: (out / f"{s}.videos").read_text().split() for s in pm.SPLITS}
    # by clip number, not by string order (video10 comes after video9)
    assert videos["train"] == [f"video{i}" for i in range(20)]
    assert videos["valid"] == [f"video{i}" for i in range(20, 25)]
    assert videos["test"] == [f"video{i}" for i in range(25, 30)]
    assert {len(splits[s]) for s in pm.SPLITS} == {20 * 5} | {20 * 20}
    assert len(splits["train"]) == 20 * 20 and len(splits["valid"]) == len(splits["test"]) == 5 * 20
    clip_sets = [{v for v, _ in splits[s]} for s in pm.SPLITS]
    assert not (clip_sets[0] & clip_sets[1]) and not (clip_sets[0] & clip_sets[2]) and not (clip_sets[1] & clip_sets[2])
    for s in pm.SPLITS:  # each split's lines are exactly its clips' published captions (whitespace runs
        # collapsed: some end in a space), duplicates kept
        expected = collections.Counter((v, " ".join(c.split())) for v in videos[s] for c in captions[v])
        assert collections.Counter(splits[s]) == expected
    # the dictionary counts the training captions' tokens only (test words seen nowhere else are absent)
    from fairseq_acvi.data.video_features import tokenize_caption
    train_words = collections.Counter(w for _, c in splits["train"] for w in tokenize_caption(c))
    dict_words = dict(line.split() for line in (out / "dict.txt").read_text().splitlines())
    real = {w: int(n) for w, n in dict_words.items() if not w.startswith("madeupword")}
    assert real == dict(train_words)
    test_only = {w for _, c in splits["test"] for w in tokenize_caption(c)} - set(train_words)
    assert test_only and not (test_only & set(real))
    assert (out / "features").resolve() == (src / "features").resolve()
    blank = np.load(out / "features_blank" / "video3.npy")
    assert blank.shape == (1, 128) and not blank.any()
    prov = (out / "PROVENANCE.txt").read_text()
    assert "train 20 clips video0-video19 (400 captions)" in prov and "captions: 600, all kept" in prov


def test_task_reads_the_folder_with_all_references(msrvtt_slice, tmp_path):
    """The video_captioning task loads the result (D = 128 from the files); the evaluation's reference
    sets hold all 20 captions of each test clip."""
    from fairseq_acvi.data.video_features import group_references, read_caption_file
    from fairseq_acvi.tasks.video_captioning import VideoCaptioningConfig, VideoCaptioningTask
    src, captions = msrvtt_slice
    out = tmp_path / "out"
    pm.prepare(src, out, sizes=(20, 5, 5), min_count=2)
    task = VideoCaptioningTask.setup_task(VideoCaptioningConfig(data=str(out), max_frames=25,
                                                                caption_eval_unique_videos=True))
    assert task.cfg.feature_dim == 128
    task.load_dataset("test")
    ds = task.datasets["test"]
    assert len(ds) == 5 and ds[0]["source"].shape == (25, 128)  # 50 rows -> 25 equally spaced
    refs = group_references(read_caption_file(str(out / "test.tsv")))
    assert list(refs) == [f"video{i}" for i in range(25, 30)]
    assert all(refs[v] == [" ".join(c.split()) for c in captions[v]] and len(refs[v]) == 20 for v in refs)


def _expect_error(src, tmp_path, *fragments, sizes=(20, 5, 5)):
    with pytest.raises(DataError) as err:
        pm.prepare(src, tmp_path / "out_err", sizes=sizes)
    for f in fragments:
        assert str(f) in str(err.value), str(err.value)
    return str(err.value)


def test_missing_feature_file_names_it(msrvtt_slice, tmp_path):
    src, _ = msrvtt_slice
    (src / "features" / "video7.npy").unlink()
    _expect_error(src, tmp_path, src / "features" / "video7.npy", "missing feature file", "'video7'")


def test_non_finite_and_unreadable_feature_files_name_the_file(msrvtt_slice, tmp_path):
    src, _ = msrvtt_slice
    path = src / "features" / "video12.npy"
    arr = np.load(path)
    arr[3, 5] = np.nan
    np.save(path, arr)
    _expect_error(src, tmp_path, path, "non-finite", "frame 3, dim 5")
    arr[3, 5] = np.inf
    np.save(path, arr)
    _expect_error(src, tmp_path, path, "non-finite")
    path.write_bytes(b"not a numpy file")
    _expect_error(src, tmp_path, path, "cannot read")
    np.save(path, np.zeros((50, 64), np.float32))  # another feature size than the other clips'
    _expect_error(src, tmp_path, path, "64-d", "same feature size")


def test_clip_without_captions_and_features_without_clip(msrvtt_slice, tmp_path):
    src, _ = msrvtt_slice
    data = json.loads((src / "captions.json").read_text())
    data["video4"]["captions"] = []
    (src / "captions.json").write_text(json.dumps(data))
    _expect_error(src, tmp_path, src / "captions.json", "'video4' has no captions")
    data["video4"]["captions"] = ["a man", "   "]
    (src / "captions.json").write_text(json.dumps(data))
    _expect_error(src, tmp_path, src / "captions.json", "'video4', caption 1")
    del data["video4"]
    (src / "captions.json").write_text(json.dumps(data))
    _expect_error(src, tmp_path, src / "features" / "video4.npy", "has no captions")


def test_malformed_json_names_file_and_line(msrvtt_slice, tmp_path):
    src, _ = msrvtt_slice
    (src / "captions.json").write_text('{"video0": {"captions": ["a dog"]},\n "video1": {"captions": [}\n}')
    _expect_error(src, tmp_path, f"{src / 'captions.json'}:2:", "malformed JSON")


def test_split_sizes_must_cover_every_clip(msrvtt_slice, tmp_path):
    src, _ = msrvtt_slice
    _expect_error(src, tmp_path, "add up to 29", "has 30 clips", sizes=(20, 5, 4))


def test_cli_reports_bad_input_as_one_line_and_exit_2(msrvtt_slice, tmp_path):
    src, _ = msrvtt_slice
    (src / "features" / "video0.npy").unlink()
    res = subprocess.run([sys.executable, str(REPO / "data_scripts" / "prepare_msrvtt.py"), "--src", str(src),
                          "--out-dir", str(tmp_path / "o"), "--split-sizes", "20", "5", "5"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert res.stderr.startswith("error: ") and str(src / "features" / "video0.npy") in res.stderr
    assert "Traceback" not in res.stderr
