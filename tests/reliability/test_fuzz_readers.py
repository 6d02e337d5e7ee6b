"""Generated corruptions of every reader's input (reliability_fuzz.py); every
case loads correctly or stops with a clear error naming the file and the line or record: no bare
traceback, no hang, no silently dropped or altered record.

The regression tests below pin the reader bugs the fuzzing found (each failed before its fix;
the last one pins the NaN check that was already right).
"""
import lzma
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

import reliability_fuzz as F

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "data_scripts"))


@pytest.mark.parametrize("reader", sorted(F.readers()))
def test_fuzzed_inputs_load_or_fail_clearly(tmp_path, reader):
    res = F.campaign(4, tmp_path, names=[reader])[reader]
    assert res["cases"] == 4 * len(F.readers()[reader].corruptions)
    assert not res["failures"], res["failures"][:5]
    assert res["loaded"] and res["clear_error"]  # both paths are exercised


@pytest.mark.slow
def test_fuzz_campaign_full(tmp_path):
    res = F.campaign(F.FULL_PER_CORRUPTION, tmp_path)
    assert all(r["cases"] >= 2500 for r in res.values()), {k: r["cases"] for k, r in res.items()}
    assert not [f for r in res.values() for f in r["failures"]]



# --- regressions --------------------------------------------------------------------------------
def _chunk(path, records, xz=False):
    data = b"".join(struct.pack("<q", len(r)) + r for r in records)
    path.write_bytes(lzma.compress(data) if xz else data)


def test_chunk_with_a_huge_length_field_is_a_truncated_record_not_a_memory_error(tmp_path):
    import read_see_chunks as rsc
    p = tmp_path / "train_000.bin"
    p.write_bytes(struct.pack("<q", 2 ** 62) + b"abc")  # was: MemoryError (an 4 EiB allocation)
    with pytest.raises(rsc.ChunkError, match=r"train_000.bin: record 0: truncated record"):
        list(rsc.read_records(p))


def test_truncated_xz_chunk_names_file_and_record(tmp_path):
    import read_see_chunks as rsc
    p = tmp_path / "train_000.bin.xz"
    _chunk(p, [F.tf_example(article="a b", abstract="<s> c . </s>")] * 50, xz=True)
    p.write_bytes(p.read_bytes()[:-20])  # was: a bare EOFError from lzma
    with pytest.raises(rsc.ChunkError, match=r"train_000.bin.xz: record \d+: truncated .xz file"):
        list(rsc.read_records(p))


def test_empty_chunk_file_is_an_error(tmp_path):
    import read_see_chunks as rsc
    (tmp_path / "train_000.bin").write_bytes(b"")  # was: read as a chunk of no records
    with pytest.raises(rsc.ChunkError, match="train_000.bin: empty chunk file"):
        list(rsc.read_split(str(tmp_path), "train"))


def test_story_ids_with_a_bad_index_name_the_line(tmp_path):
    import read_see_chunks as rsc
    (tmp_path / "val_test_ids.tsv").write_text("chunk\tindex\tsplit\tid\n"
                                               "test_000.bin\tx\t0\tabc\n")
    with pytest.raises(ValueError, match=r"val_test_ids.tsv:2: expected 4 tab-separated"):
        rsc.story_ids(str(tmp_path))


def test_guess_number_reader_names_line_of_bad_utf8_and_skips_a_bom(tmp_path):
    from fairseq_acvi import guess_number as gn
    rec = gn.GameRecord(0, 10, 9, [gn.Round("5", gn.LARGER), gn.Round("9", gn.CORRECT)])
    p = tmp_path / "g.txt"
    gn.write_babi([rec], p)
    good = gn.read_babi_games(p)
    p.write_bytes(b"\xef\xbb\xbf" + p.read_bytes())
    assert [[q.answer for q in g] for g in gn.read_babi_games(p)] == [[q.answer for q in g]
                                                                      for g in good]
    lines = p.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b"guess", b"gu\xffess")
    p.write_bytes(b"\n".join(lines))
    with pytest.raises(ValueError, match=r"g.txt:3: not UTF-8"):  # was: UnicodeDecodeError
        gn.read_babi_games(p)


def test_summarization_line_files_name_line_of_bad_utf8_and_skip_a_bom(tmp_path):
    import prepare_cnndm
    src, tgt = tmp_path / "a.source", tmp_path / "a.target"
    src.write_bytes(b"\xef\xbb\xbfthe cat sat\nthe dog ran\n")
    tgt.write_bytes(b"<s> cat . </s>\n<s> dog . </s>\n")
    ex = list(prepare_cnndm.read_line_pairs(str(src), str(tgt), str.split, True))
    assert ex[0][0] == ["the", "cat", "sat"]  # was: '\ufeffthe', a silently altered word
    src.write_bytes(b"the cat sat\nthe d\xc3og ran\n")
    with pytest.raises(ValueError, match=r"a.source:2: not UTF-8"):
        list(prepare_cnndm.read_line_pairs(str(src), str(tgt), str.split, True))


def test_story_file_names_line_of_bad_utf8(tmp_path):
    import prepare_cnndm
    (tmp_path / "x.story").write_bytes(b"the cat sat .\n\n\xfe bad\n\n@highlight\n\ncat sat\n")
    with pytest.raises(ValueError, match=r"x.story:3: not UTF-8"):
        list(prepare_cnndm.read_stories(str(tmp_path), str.split, True))


def test_caption_and_translation_files_skip_a_bom(tmp_path):
    from common import read_parallel
    from fairseq_acvi.data.video_features import read_caption_file
    p = tmp_path / "train.tsv"
    p.write_bytes(b"\xef\xbb\xbfvid1\ta man plays\n")
    assert read_caption_file(str(p))[0].video_id == "vid1"  # was: '\ufeffvid1'
    a, b = tmp_path / "t.en", tmp_path / "t.de"
    a.write_bytes(b"\xef\xbb\xbfone two\n")
    b.write_bytes(b"zwei eins\n")
    assert read_parallel(a, b) == (["one two"], ["zwei eins"])


def test_parallel_length_mismatch_points_at_the_empty_line(tmp_path):
    from common import DataError, read_parallel
    a, b = tmp_path / "t.en", tmp_path / "t.de"
    a.write_text("one\n\ntwo\n")
    b.write_text("eins\nzwei\n")
    with pytest.raises(DataError, match=r"t.en:2 is an empty line"):
        read_parallel(a, b)


def test_nan_feature_names_file_and_frame(tmp_path):
    from fairseq_acvi.data.video_features import VideoFeatureStore
    arr = np.zeros((4, 3), np.float32)
    arr[2, 1] = np.nan
    np.save(tmp_path / "v.npy", arr)
    store = VideoFeatureStore(str(tmp_path), ["v"], 3, 24)
    with pytest.raises(ValueError, match=r"v.npy contains NaN or inf \(first at frame 2, dim 1\)"):
        store.load("v")
