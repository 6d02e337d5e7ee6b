"""CNN/DailyMail in See et al.'s chunk format: data_scripts/read_see_chunks.py (the protobuf wire
format decoded without TensorFlow), prepare_cnndm.py --see-vocab and the wrapper
data_scripts/prepare_cnndm_see.sh.

Synthetic chunks test the decoder and its errors; the real chunks of $ACVI_DATA/cnn_dm_see_chunks (or
$CNNDM_SEE_DIR; skipped when absent) test the counts, the first canonical story and a dropped empty article.
"""
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SHARED_DATA, fast_python

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "data_scripts"
sys.path.insert(0, str(SCRIPTS))
import prepare_cnndm  # noqa: E402
import read_see_chunks as rsc  # noqa: E402

SEE = Path(os.environ.get("CNNDM_SEE_DIR") or SHARED_DATA / "cnn_dm_see_chunks")
needs_see = pytest.mark.skipif(not (SEE / "bin" / "train_000.bin.xz").is_file(),
                               reason=f"See et al.'s chunks not found at {SEE} (set ACVI_DATA to the real-data "
                                      f"root, or CNNDM_SEE_DIR to the chunk folder)")


from tf_example_encoder import example, frame, write_chunk  # noqa: E402


def _ex(i, article=None):
    return example(article=f"article {i} text ." if article is None else article,
                   abstract=f"<s> summary {i} . </s> <s> second {i} . </s>")


@pytest.fixture
def chunks(tmp_path):
    d = tmp_path / "bin"
    d.mkdir()
    write_chunk(d / "train_000.bin", [_ex(0), _ex(1, article=""), _ex(2)], compress=True)
    write_chunk(d / "train_003.bin", [_ex(3)])
    write_chunk(d / "val_000.bin", [_ex(10)])
    write_chunk(d / "test_000.bin", [_ex(20), _ex(21)])
    (tmp_path / "val_test_ids.tsv").write_text(
        "chunk\tindex_in_chunk\tsplit_index\tstory_sha1\ntest_000.bin\t1\t1\tabc123\n")
    return d


def test_parse_example_round_trip():
    feats = rsc.parse_example(example(article="a b c", abstract=["<s> x </s>", "<s> y </s>"]))
    assert feats == {"article": [b"a b c"], "abstract": [b"<s> x </s>", b"<s> y </s>"], "n": []}
    # multi-byte varints (a text over 127 and over 16383 bytes) decode exactly
    long = "w " * 9000
    assert rsc.parse_example(example(article=long))["article"] == [long.encode()]


def test_convert_writes_aligned_lines_and_drops_empty_articles(chunks, tmp_path):
    out = tmp_path / "out"
    stats = rsc.convert(str(chunks), str(out))
    src = (out / "train.source").read_text().splitlines()
    tgt = (out / "train.target").read_text().splitlines()
    ids = (out / "train.ids").read_text().splitlines()
    # chunk order (000 before 003, .xz and plain alike), the empty article (000:1) dropped
    assert src == ["article 0 text .", "article 2 text .", "article 3 text ."]
    assert tgt[1] == "<s> summary 2 . </s> <s> second 2 . </s>"
    assert ids == ["train_000.bin\t0\t-", "train_000.bin\t2\t-", "train_003.bin\t0\t-"]
    st = stats["splits"]["train"]
    assert (st["records"], st["written"], st["dropped_empty_article"]) == (4, 3, ["train_000.bin:1"])
    assert (out / "valid.source").read_text() == "article 10 text .\n"   # val -> valid
    assert (out / "test.ids").read_text().splitlines()[1] == "test_000.bin\t1\tabc123"
    assert json.loads((out / "read_stats.json").read_text())["splits"]["test"]["written"] == 2


@pytest.mark.parametrize("damage, message", [
    (lambda data: data[:-5], "train_000.bin: record 2: truncated record"),
    (lambda data: data + b"\x01\x02", "train_000.bin: record 3: truncated length (2 of 8 bytes)"),
    (lambda data: data + struct.pack("<q", 3) + b"\xff\xff\xff", "train_000.bin: record 3: not a tf.train.Example"),
    (lambda data: data + struct.pack("<q", 0), "train_000.bin: record 3: no 'article' feature"),
])
def test_malformed_record_names_chunk_and_index(tmp_path, damage, message):
    d = tmp_path / "bin"
    d.mkdir()
    good = frame([_ex(0), _ex(1), _ex(2)])
    (d / "train_000.bin").write_bytes(damage(good))
    with pytest.raises(rsc.ChunkError, match=message.replace("(", r"\(").replace(")", r"\)")):
        rsc.convert(str(d), str(tmp_path / "out"), splits=["train"])


def test_empty_abstract_and_line_break_are_errors(tmp_path):
    d = tmp_path / "bin"
    d.mkdir()
    write_chunk(d / "test_000.bin", [_ex(0), example(article="a .", abstract="<s> </s>")])
    with pytest.raises(rsc.ChunkError, match=r"test_000.bin: record 1: empty abstract"):
        rsc.convert(str(d), str(tmp_path / "o"), splits=["test"])
    write_chunk(d / "test_000.bin", [example(article="a .\nb .", abstract="<s> x </s>")])
    with pytest.raises(rsc.ChunkError, match=r"record 0: 'article' contains a line break"):
        rsc.convert(str(d), str(tmp_path / "o"), splits=["test"])


def test_missing_folder_or_split_is_a_clear_error(tmp_path, chunks):
    assert rsc.main(["--chunks", str(tmp_path / "nope"), "--out-dir", str(tmp_path / "o")]) == 1
    (chunks / "val_000.bin").unlink()
    with pytest.raises(FileNotFoundError, match=r"no chunk files val_NNN"):
        rsc.convert(str(chunks), str(tmp_path / "o"))


# --- See's vocabulary -------------------------------------------------------------------------------

def test_see_vocab_takes_the_first_words_and_leaves_out_nbsp_words(tmp_path):
    v = tmp_path / "vocab"
    v.write_text("the 10\n, 9\n2\xa01/2 8\ncat 7\ndog 7\nrare 1\n", encoding="utf-8")
    words, counts, skipped = prepare_cnndm.read_see_vocab(str(v), 4)
    assert words == ["the", ",", "cat", "dog"] and counts["cat"] == 7 and skipped == ["2\xa01/2"]
    with pytest.raises(ValueError, match=r"5 usable words, fewer than --vocab-size 6"):
        prepare_cnndm.read_see_vocab(str(v), 6)


@pytest.mark.parametrize("text, message", [
    ("the 10\n<unk> 9\n", r"vocab:2: reserved token '<unk>'"),
    ("the 10\n<unk-3> 9\n", r"vocab:2: reserved token '<unk-3>'"),
    ("the 10\nthe 9\n", r"vocab:2: 'the' repeated"),
    ("the 10\ncat 11\n", r"vocab:2: counts must not increase"),
    ("the 10\ncat\n", r"vocab:2: expected 'word count'"),
])
def test_see_vocab_errors_name_the_line(tmp_path, text, message):
    v = tmp_path / "vocab"
    v.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        prepare_cnndm.read_see_vocab(str(v), 2)


# --- the real chunks --------------------------------------------------------------------------------

@needs_see
def test_real_chunk_slice(tmp_path):
    # train_000 record 598 is one of the 67 empty articles of See's training data
    stats = rsc.convert(str(SEE / "bin"), str(tmp_path), splits=["train", "test"], max_records=600)
    st = stats["splits"]["train"]
    assert (st["records"], st["written"], st["dropped_empty_article"]) == (600, 599, ["train_000.bin:598"])
    src = (tmp_path / "train.source").read_text(encoding="utf-8").splitlines()
    tgt = (tmp_path / "train.target").read_text(encoding="utf-8").splitlines()
    assert len(src) == len(tgt) == 599
    assert src[0].startswith("editor 's note : in our behind the scenes series")
    assert "forgotten floor" in src[0] and tgt[0].startswith("<s> mentally ill inmates in miami")
    assert src[1].startswith("london , england ( reuters ) -- harry potter star daniel radcliffe")
    # story ids of the test records come from val_test_ids.tsv
    assert (tmp_path / "test.ids").read_text().splitlines()[0] == \
        "test_000.bin\t0\t469c6ac05092ca5997728c9dfc19f9ab6b936e40"


@needs_see
def test_prepare_cnndm_see_end_to_end(tmp_path):
    dest = tmp_path / "bin"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHON=sys.executable, DEST=str(dest), MAX_RECORDS="40",
               SEE_DIR=str(SEE), MAX_SOURCE_POSITIONS="100")
    r = subprocess.run(["bash", str(SCRIPTS / "prepare_cnndm_see.sh")], capture_output=True, text=True,
                       env=env, cwd=str(REPO), timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "5 words holding a no-break space left out" in r.stdout
    stats = json.loads((dest / "text" / "prepare_stats.json").read_text())
    assert stats["vocab_from"] == "see_vocab" and stats["vocab_size"] == 50000
    assert [stats[s]["examples"] for s in ("train", "valid", "test")] == [40, 40, 40]
    dict_lines = (dest / "dict.src.txt").read_text(encoding="utf-8").splitlines()
    assert dict_lines[0] == ". 12124504" and len(dict_lines) == 50000 + 100   # words, then 100 markers
    for split in ("train", "valid", "test"):
        assert (dest / f"{split}.src-tgt.src.bin").is_file()
        assert len((dest / f"{split}.ids").read_text().splitlines()) == 40
    src = (dest / "text" / "train.src").read_text(encoding="utf-8").splitlines()
    assert all(len(line.split()) <= 100 for line in src)


def test_prepare_cnndm_see_missing_folder(tmp_path):
    env = dict(os.environ, PYTHON=sys.executable, SEE_DIR=str(tmp_path / "absent"), DEST=str(tmp_path / "d"))
    r = subprocess.run(["bash", str(SCRIPTS / "prepare_cnndm_see.sh")], capture_output=True, text=True,
                       env=env, cwd=str(REPO), timeout=60)
    assert r.returncode == 2 and "absent/bin not found" in r.stderr


def test_prepare_cnndm_see_needs_a_location(tmp_path):
    """No default chunk folder: neither SEE_DIR nor ACVI_DATA -> exit 2 naming both; ACVI_DATA alone ->
    $ACVI_DATA/cnn_dm_see_chunks is the folder looked at."""
    env = dict(os.environ, PYTHON=sys.executable, DEST=str(tmp_path / "d"))
    env.pop("SEE_DIR", None)
    env.pop("ACVI_DATA", None)
    r = subprocess.run(["bash", str(SCRIPTS / "prepare_cnndm_see.sh")], capture_output=True, text=True,
                       env=env, cwd=str(REPO), timeout=60)
    assert r.returncode == 2, r.stderr
    assert "SEE_DIR=" in r.stderr and "ACVI_DATA=" in r.stderr and "cnn_dm_see_chunks/" in r.stderr
    assert not (tmp_path / "d").exists()
    root = tmp_path / "root"
    r = subprocess.run(["bash", str(SCRIPTS / "prepare_cnndm_see.sh")], capture_output=True, text=True,
                       env=dict(env, ACVI_DATA=str(root)), cwd=str(REPO), timeout=60)
    assert r.returncode == 2 and f"{root / 'cnn_dm_see_chunks' / 'bin'} not found" in r.stderr, r.stderr


@needs_see
@pytest.mark.slow
def test_recipe_smoke_on_see_chunks(tmp_path):
    """See's chunks -> data -> the phased recipe (an explicit two-phase schedule, coverage last) ->
    beam search on test, OOV restoration and ROUGE, through the recipe's own commands."""
    dest = tmp_path / "bin"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHON=fast_python(), DEST=str(dest), MAX_RECORDS="24",
               SEE_DIR=str(SEE), MAX_SOURCE_POSITIONS="60", MAX_TARGET_POSITIONS="30", VOCAB_SIZE="2000")
    r = subprocess.run(["bash", str(SCRIPTS / "prepare_cnndm_see.sh")], capture_output=True, text=True,
                       env=env, cwd=str(REPO), timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    save = tmp_path / "ckpt"
    tiny = ["--encoder-embed-dim", "16", "--decoder-embed-dim", "16", "--encoder-hidden-size", "16",
            "--decoder-hidden-size", "16", "--attention-dim", "16"]
    env = dict(env, CONTEXT="soft", DATA=str(dest), SAVE=str(save), SCHEDULE="3:20:10:0 5:40:20:1",
               BATCH="8", MIN_LEN="3", MAX_LEN="12", METEOR="none", GEN_BATCH="8", LOG_INTERVAL="1")
    r = subprocess.run(["bash", str(REPO / "recipes" / "summarization_cnndm.sh"), *tiny], capture_output=True,
                       text=True, env=env, cwd=str(REPO), timeout=900)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    assert "phase 1: updates -> 3, source 20 words, target 10 tokens, coverage 0" in r.stdout
    assert "phase 2: updates -> 5, source 40 words, target 20 tokens, coverage 1" in r.stdout
    assert not (save / "phase3").exists()
    hyp = (save / "hyp_test.txt").read_text(encoding="utf-8").splitlines()
    assert len(hyp) == 24
    scores = json.loads((save / "scores_test.json").read_text())
    assert scores["n"] == 24 and 0.0 <= scores["rouge1"] <= 100.0 and "rougeL" in scores
    assert "repeat_3gram" in scores and "novel_2gram" in scores

    # the same run without coverage in its last phase, branched from it: phase 1 is copied, not
    # trained again; a run of other phases, or this run with another schedule, is refused
    branch = tmp_path / "branch"
    r = subprocess.run(["bash", str(REPO / "recipes" / "summarization_cnndm.sh"), *tiny], capture_output=True,
                       text=True, env=dict(env, SAVE=str(branch), SCHEDULE="3:20:10:0 5:40:20:0",
                                           BRANCH_FROM=str(save)), cwd=str(REPO), timeout=900)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    assert f"phase 1: the same training as {save}/phase1 (checkpoint copied)" in r.stdout
    assert "phase 2: updates -> 5, source 40 words, target 20 tokens, coverage 0" in r.stdout
    assert (branch / "phases.txt").read_text().splitlines()[:2] == \
        (save / "phases.txt").read_text().splitlines()[:2]
    assert json.loads((branch / "scores_test.json").read_text())["n"] == 24
    for schedule, says in (("4:20:10:0 5:40:20:0", "differs from this run before its last phase"),):
        r = subprocess.run(["bash", str(REPO / "recipes" / "summarization_cnndm.sh"), *tiny],
                           capture_output=True, text=True, cwd=str(REPO), timeout=300,
                           env=dict(env, SAVE=str(tmp_path / "other"), SCHEDULE=schedule,
                                    BRANCH_FROM=str(save)))
        assert r.returncode == 2 and says in r.stderr, r.stderr[-2000:]
    r = subprocess.run(["bash", str(REPO / "recipes" / "summarization_cnndm.sh"), *tiny], capture_output=True,
                       text=True, env=dict(env, SCHEDULE="3:20:10:0 6:40:20:1"), cwd=str(REPO), timeout=300)
    assert r.returncode == 2 and "phases.txt: the run was trained with other settings" in r.stderr

    # a fixed subset, decoded from the phase before coverage, and the report beside lead-3
    r = subprocess.run([sys.executable, str(SCRIPTS / "cnndm_subset.py"), "--data", str(dest), "--every", "3"],
                       capture_output=True, text=True, env=env, cwd=str(REPO), timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    env = dict(env, TRAIN="0", SUBSET="test_every3", DECODE_PHASE="1")
    r = subprocess.run(["bash", str(REPO / "recipes" / "summarization_cnndm.sh")], capture_output=True,
                       text=True, env=env, cwd=str(REPO), timeout=900)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    assert len((save / "hyp_test_every3_phase1.txt").read_text(encoding="utf-8").splitlines()) == 8
    assert json.loads((save / "scores_test_every3_phase1.json").read_text())["n"] == 8
    r = subprocess.run([sys.executable, "-m", "fairseq_acvi.cli.summ_report", "--data", str(dest),
                        "--subset", "test_every3", "--system", f"phase1={save}/hyp_{{subset}}_phase1.txt",
                        "--out-dir", str(tmp_path / "report")], capture_output=True, text=True, env=env,
                       cwd=str(REPO), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "| lead-3 | 8 |" in r.stdout and "| phase1 | 8 |" in r.stdout
    env = dict(env, DECODE_PHASE="3")
    r = subprocess.run(["bash", str(REPO / "recipes" / "summarization_cnndm.sh")], capture_output=True,
                       text=True, env=env, cwd=str(REPO), timeout=60)
    assert r.returncode == 2 and "DECODE_PHASE must be a phase of the schedule, 1..2, got '3'" in r.stderr

    # a second run (another seed; a 5-update model without copying writes no words at all) and both
    # in one table through the comparison recipe
    seed2 = tmp_path / "seed2"
    env = {k: v for k, v in env.items() if k != "DECODE_PHASE"}
    r = subprocess.run(["bash", str(REPO / "recipes" / "summarization_cnndm.sh"), *tiny],
                       capture_output=True, text=True, env=dict(env, TRAIN="1", SAVE=str(seed2), SEED="2"),
                       cwd=str(REPO), timeout=900)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    out = tmp_path / "compare"
    r = subprocess.run(["bash", str(REPO / "recipes" / "summarization_cnndm_compare.sh")], capture_output=True,
                       text=True, env=dict(env, RUNS=f"soft={save} seed2={seed2}", SUBSETS="test_every3",
                                           OUT=str(out)), cwd=str(REPO), timeout=900)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    assert f"soft: {save}/hyp_test_every3_phase1.txt exists, not decoded again" in r.stdout
    assert "seed2: decoding test_every3 from phase 1" in r.stdout
    rep = json.loads((out / "results.json").read_text())["subsets"]["test_every3"]
    assert list(rep["rows"]) == ["lead-3", "soft (ours, phase 1)", "soft + coverage (ours)",
                                 "seed2 (ours, phase 1)", "seed2 + coverage (ours)"]
    assert rep["missing"] == {} and all(r["n"] == 8 for r in rep["rows"].values())
    assert set(rep["paired"]) == {"soft (ours, phase 1):soft + coverage (ours)",
                                  "seed2 (ours, phase 1):seed2 + coverage (ours)",
                                  "soft (ours, phase 1):seed2 (ours, phase 1)",
                                  "soft + coverage (ours):seed2 + coverage (ours)"}
    assert (out / "outputs" / "test_every3" / "seed2_coverage_ours.txt").read_text() == \
        (seed2 / "hyp_test_every3.txt").read_text()
    # runs of other schedules are refused before anything is decoded
    (seed2 / "phase3").mkdir()
    r = subprocess.run(["bash", str(REPO / "recipes" / "summarization_cnndm_compare.sh")], capture_output=True,
                       text=True, env=dict(env, RUNS=f"soft={save} seed2={seed2}", OUT=str(out)),
                       cwd=str(REPO), timeout=60)
    assert r.returncode == 2 and "has 3 phase folders" in r.stderr, r.stderr

    # decoding in shards (resumable, two processes side by side): the same summaries as in one go
    env = dict(env, GEN_BATCH="2")                  # 8 articles: 4 batches
    recipe = ["bash", str(REPO / "recipes" / "summarization_cnndm.sh")]
    r = subprocess.run(recipe, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    whole = (save / "hyp_test_every3.txt").read_text()
    (save / "hyp_test_every3.txt").unlink()
    r = subprocess.run(recipe, capture_output=True, text=True, env=dict(env, SHARDS="3", SHARD_IDS="0 2"),
                       cwd=str(REPO), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "2 of 3 shards decoded" in r.stdout and not (save / "hyp_test_every3.txt").exists()
    (save / ".merging_test_every3").mkdir()       # as if another process were merging
    r = subprocess.run(recipe, capture_output=True, text=True, env=dict(env, SHARDS="3"), cwd=str(REPO), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "shard0-of3.out exists, not decoded again" in r.stdout and "decoding shard 1 of 3" in r.stdout
    assert "another process is merging" in r.stdout and not (save / "hyp_test_every3.txt").exists()
    (save / ".merging_test_every3").rmdir()
    r = subprocess.run(recipe, capture_output=True, text=True, env=dict(env, SHARDS="3"), cwd=str(REPO), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "decoding shard" not in r.stdout and not (save / ".merging_test_every3").exists()
    assert (save / "hyp_test_every3.txt").read_text() == whole
    r = subprocess.run(recipe, capture_output=True, text=True, env=dict(env, SHARDS="9", SHARD_IDS="7"),
                       cwd=str(REPO), timeout=300)
    assert r.returncode == 2 and "decoding in 4 shards" in r.stdout and "'7' is not a shard of 0..3" in r.stderr

def test_recipe_rejects_a_malformed_schedule(tmp_path):
    data = tmp_path / "d"
    data.mkdir()
    (data / "dict.src.txt").write_text("a 1\n")
    env = dict(os.environ, PYTHON=fast_python(), DATA=str(data), SCHEDULE="10:50:50", SAVE=str(tmp_path / "s"))
    r = subprocess.run(["bash", str(REPO / "recipes" / "summarization_cnndm.sh")], capture_output=True, text=True,
                       env=env, cwd=str(REPO), timeout=60)
    assert r.returncode == 2 and "SCHEDULE phase '10:50:50' is not END:SOURCE_WORDS:TARGET_TOKENS:COVERAGE" in r.stderr

