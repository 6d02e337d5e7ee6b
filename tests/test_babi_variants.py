"""Every folder of the bAbI v1.2 release: answer shapes, Hindi (Devanagari and Latin
letters), the shuffled vocabulary, CRLF / BOM / non-UTF-8 files, data_scripts/get_babi.sh, and a
multi-word-answer task through the real fairseq-train / fairseq-validate.

The fixtures are generated in the release's format by tests/babi_formats.py (the shared data
holds only en and en-10k).
"""
import os
import re
import shutil
import subprocess
import tarfile

import pytest
import torch
from fairseq.data import Dictionary

from babi_formats import (carrying, crlf, letter_cipher, path_finding, shuffle_letters, where_is,
                          write_task)
from conftest import REPO, USER_DIR, run_cli
from fairseq_acvi.data.babi import (ANSWER_JOIN, answer_symbol, answer_text, find_task_files,
                                    parse_babi_file, parse_babi_lines, tokenize)
from fairseq_acvi.tasks.babi_qa import BabiQAConfig, BabiQATask


def write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


# ------------------------------------------------------------------------------ answer shapes
@pytest.mark.parametrize("field,symbol,text", [
    ("bathroom", "bathroom", "bathroom"),                     # en, one word
    ("Bathroom ", "bathroom", "bathroom"),                    # case and edge spaces as before
    ("7", "7", "7"),                                          # guess-the-number
    ("n,w", "n,w", "n,w"),                                    # task 19
    ("apple,football", "apple,football", "apple,football"),   # task 8
    ("apple, football", "apple,football", "apple,football"),  # spaces around list commas
    ("nothing", "nothing", "nothing"),
    ("rasoi ghar", "rasoi\u2581ghar", "rasoi ghar"),           # hn, two words
    ("rasoi  ghar", "rasoi\u2581ghar", "rasoi ghar"),          # one symbol whatever the spacing
    ("kuch nahi", "kuch\u2581nahi", "kuch nahi"),              # hn task 8's "nothing"
    ("seb,doodh ki botal", "seb,doodh\u2581ki\u2581botal", "seb,doodh ki botal"),
    ("सोने का कमरा", "सोने\u2581का\u2581कमरा", "सोने का कमरा"),      # Devanagari, three words
    ("Ollcg,Frrpaocc", "ollcg,frrpaocc", "ollcg,frrpaocc"),   # shuffled letters
])
def test_answer_shapes(field, symbol, text):
    assert answer_symbol(field) == symbol
    assert answer_text(symbol) == text
    assert not any(c.isspace() for c in symbol)               # a dict.txt "symbol count" line
    assert len(symbol.split()) == 1


@pytest.mark.parametrize("field,msg", [("", "answer is empty"), (" \u3000", "answer is empty"),
                                       ("a,", "empty item"), (",a", "empty item"),
                                       ("a\u2581b", "reserved")])
def test_answer_errors(field, msg):
    with pytest.raises(ValueError, match=msg):
        answer_symbol(field)


def test_distinct_answers_stay_distinct():
    """The join character is reserved, so two different answer fields never share a class."""
    fields = ["rasoi ghar", "rasoi", "ghar", "rasoi_ghar", "rasoi-ghar", "rasoi,ghar", "ghar rasoi"]
    assert len({answer_symbol(f) for f in fields}) == len(fields)


# ----------------------------------------------------------------------------- whole files
def test_devanagari_multi_word_file(tmp_path):
    path = write(tmp_path, "qa1_hn_train.txt", where_is(10, seed=1, lang="deva").encode("utf-8"))
    exs = parse_babi_file(path, task=1)
    assert len(exs) == 10
    ex = exs[0]
    assert ex.story[0][-2:] == ["में", "गया"]                   # the danda "।" is dropped like "."
    assert ex.query[-2:] == ["कहाँ", "है"]
    multi = [e for e in exs if ANSWER_JOIN in e.answer]
    assert multi, "the fixture has multi-word answers"
    for e in exs:                                             # the answer's words are in its support
        words = answer_text(e.answer).split()
        fact = e.story[e.supports[0]]
        assert fact[1:1 + len(words)] == words


def test_hindi_in_latin_letters_task8_and_task19(tmp_path):
    hn8 = parse_babi_file(write(tmp_path, "qa8_hn_train.txt", carrying(12, lang="roman").encode()))
    shapes = {e.answer for e in hn8}
    # "nothing" in two words, a three-word object alone and inside a list
    assert {"kuch\u2581nahi", "doodh\u2581ki\u2581botal", "football,doodh\u2581ki\u2581botal"} <= shapes
    en19 = parse_babi_file(write(tmp_path, "qa19_en_train.txt", path_finding(5).encode()))
    assert all(re.fullmatch(r"[nsew],[nsew]", e.answer) for e in en19)
    assert all(e.supports == [0, 1] for e in en19)
    en8 = parse_babi_file(write(tmp_path, "qa8_en_train.txt", carrying(20).encode()))
    assert "nothing" in {e.answer for e in en8} and any("," in e.answer for e in en8)
    assert all(e.supports == [] for e in en8 if e.answer == "nothing")


def test_shuffled_vocabulary_is_the_english_one_renamed(tmp_path):
    """The shuffled folders permute letters: the parse must be the English parse with every
    token and answer renamed by the same permutation (nothing merged, nothing split)."""
    text = where_is(30, seed=2, lang="en") + carrying(8, seed=3)
    en = parse_babi_lines(text.splitlines(), "en")
    sh = parse_babi_lines(shuffle_letters(text, seed=5).splitlines(), "shuffled")
    table = str.maketrans(letter_cipher(seed=5))
    assert len(en) == len(sh)
    for a, b in zip(en, sh):
        assert [[w.translate(table).lower() for w in s] for s in a.story] == b.story
        assert [w.translate(table).lower() for w in a.query] == b.query
        assert a.answer.translate(table).lower() == b.answer and a.supports == b.supports
    vocab = lambda exs: {w for e in exs for s in e.story + [e.query, [e.answer]] for w in s}
    assert len(vocab(en)) == len(vocab(sh))


def test_crlf_bom_and_lf_give_the_same_examples(tmp_path):
    text = where_is(10, seed=4, lang="deva")
    lf = parse_babi_file(write(tmp_path, "a.txt", text.encode("utf-8")))
    for data in (crlf(text).encode("utf-8"), b"\xef\xbb\xbf" + text.encode("utf-8"),
                 b"\xef\xbb\xbf" + crlf(text).encode("utf-8")):
        other = parse_babi_file(write(tmp_path, "b.txt", data))
        assert [(e.story, e.query, e.answer, e.supports) for e in other] == \
               [(e.story, e.query, e.answer, e.supports) for e in lf]
    # the line numbers of errors count CRLF lines like LF lines
    bad = crlf("1 Mary moved.\n2 John left.\n3 Where?\tx\t7\n").encode()
    with pytest.raises(ValueError, match=r"c\.txt:3: supporting fact 7 points forward"):
        parse_babi_file(write(tmp_path, "c.txt", bad))


def test_not_utf8_names_file_and_line(tmp_path):
    data = "1 सीता गई।\n".encode("utf-8") + b"2 Mary went to the caf\xe9.\n"   # latin-1 byte
    path = write(tmp_path, "qa1_x_train.txt", data)
    with pytest.raises(ValueError, match=r"qa1_x_train\.txt:2: not UTF-8 \(byte 0xe9"):
        parse_babi_file(path)


def test_extra_spaces_after_the_id_are_tolerated():
    exs = parse_babi_lines(["1  Mary moved to the hallway.", "2 Where is Mary?\thallway\t1"])
    assert exs[0].story == [["mary", "moved", "to", "the", "hallway"]]


def test_tokenize_drops_the_dandas_and_keeps_english():
    assert tokenize("सीता रसोई घर में गई।") == ["सीता", "रसोई", "घर", "में", "गई"]
    assert tokenize("पहला॥") == ["पहला"]
    assert tokenize("Mary, then John: left (again).") == ["mary", ",", "then", "john", ":", "left",
                                                          "(", "again", ")"]


def test_en_valid_folder_is_named_in_the_error(tmp_path):
    folder = tmp_path / "en-valid"
    folder.mkdir()
    for split in ("train", "valid", "test"):
        (folder / f"qa1_{split}.txt").write_text(where_is(5, lang="en"))
    assert len(parse_babi_file(str(folder / "qa1_valid.txt"))) == 5   # its lines read
    with pytest.raises(ValueError, match="looks like en-valid"):
        find_task_files(str(folder))


def test_task_dictionary_round_trips_through_dict_txt(tmp_path):
    """One class per multi-word answer, in a dictionary that fairseq's dict.txt format keeps."""
    folder = tmp_path / "hn"
    write_task(folder, 1, where_is(40, seed=1), where_is(20, seed=2), newline_crlf=True)
    write_task(folder, 8, carrying(20, lang="roman"), carrying(8, seed=1, lang="roman"))
    task = BabiQATask.setup_task(BabiQAConfig(data=str(folder), babi_tasks="1,8"))
    d = task.target_dictionary
    for a in ("रसोई\u2581घर", "सोने\u2581का\u2581कमरा", "kuch\u2581nahi"):
        assert d.index(a) != d.unk()
    d.save(str(tmp_path / "dict.txt"))
    d2 = Dictionary.load(str(tmp_path / "dict.txt"))
    assert d2.symbols == d.symbols
    task.load_dataset("test")
    s = task.datasets["test"].collater(list(range(len(task.datasets["test"]))))
    got = [answer_text(d[i]) for i in s["target"]]
    want = [answer_text(e.answer) for e in task.datasets["test"].examples]
    assert got == want and "रसोई घर" in got


def test_real_english_answers_are_the_fields_as_before(shared_data):
    """English answers are single tokens: their class symbols are the lower-cased answer field,
    exactly what the reader produced before multi-word answers (results do not move)."""
    root = shared_data / "babi" / "tasks_1-20_v1-2"
    if not (root / "en").is_dir():
        pytest.skip("bAbI en not present")
    n = 0
    for variant in ("en", "en-10k"):
        if not (root / variant).is_dir():
            continue
        for t, files in sorted(find_task_files(str(root / variant)).items()):
            path = files["test"]
            raw = [ln.split("\t")[1].strip().lower()
                   for ln in open(path, encoding="utf-8") if "\t" in ln]
            assert [e.answer for e in parse_babi_file(path)] == raw, path
            n += len(raw)
    assert n >= 20000


# --------------------------------------------------------------------------- get_babi.sh
def get_babi(tmp_path, **env):
    e = dict(os.environ, BABI_DIR=str(tmp_path / "dl"), SHARED_BABI=str(tmp_path / "no_shared"))
    e.pop("BABI_SRC", None)
    e.pop("VARIANT", None)
    e.update({k: str(v) for k, v in env.items()})
    return subprocess.run(["bash", "data_scripts/get_babi.sh"], cwd=str(REPO), env=e,
                          capture_output=True, text=True, timeout=60)


def fake_release(root, variants=("en", "hn", "shuffled")):
    """A tasks_1-20_v1-2 folder with task 1 (and 8) in each variant."""
    rel = root / "tasks_1-20_v1-2"
    for v in variants:
        lang = {"hn": "roman"}.get(v.split("-")[0], "en")
        text = where_is(10, lang=lang)
        if v.startswith("shuffled"):
            text = shuffle_letters(text)
        write_task(rel / v, 1, text, text, name="single-supporting-fact")
    return rel


def test_get_babi_locates_each_variant(tmp_path):
    rel = fake_release(tmp_path / "src")
    for v in ("en", "hn", "shuffled"):
        res = get_babi(tmp_path, BABI_SRC=tmp_path / "src", VARIANT=v)
        assert res.returncode == 0, res.stderr
        assert res.stdout.strip().splitlines()[-1] == str((rel / v).resolve())
        assert "no training file for task(s) 2 3" in res.stderr           # only task 1 here
    # the release folder itself, or the variant folder itself
    assert get_babi(tmp_path, BABI_SRC=rel, VARIANT="hn").stdout.strip() == str((rel / "hn").resolve())
    assert get_babi(tmp_path, BABI_SRC=rel / "hn", VARIANT="hn").stdout.strip() == \
        str((rel / "hn").resolve())
    # a variant this copy lacks: the error says what it holds
    res = get_babi(tmp_path, BABI_SRC=tmp_path / "src", VARIANT="hn-10k")
    assert res.returncode != 0 and "no hn-10k folder (it holds: en hn shuffled)" in res.stderr
    # not a release folder name
    res = get_babi(tmp_path, VARIANT="fr")
    assert res.returncode != 0 and "not a folder of the bAbI v1.2 release" in res.stderr
    res = get_babi(tmp_path, VARIANT="en-valid")
    assert res.returncode != 0 and "VARIANT=en" in res.stderr


def test_get_babi_tarball_download_and_shared_copy(tmp_path):
    fake_release(tmp_path / "src", variants=("en", "hn-10k", "shuffled-10k"))
    tarball = tmp_path / "tasks_1-20_v1-2.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(tmp_path / "src" / "tasks_1-20_v1-2", arcname="tasks_1-20_v1-2")
    # a tarball as BABI_SRC is unpacked into BABI_DIR
    res = get_babi(tmp_path, BABI_SRC=tarball, VARIANT="hn-10k")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == str((tmp_path / "dl/tasks_1-20_v1-2/hn-10k").resolve())
    # then BABI_DIR is found without BABI_SRC
    res = get_babi(tmp_path, VARIANT="shuffled-10k")
    assert res.returncode == 0 and res.stdout.strip().endswith("dl/tasks_1-20_v1-2/shuffled-10k")
    # a shared copy is used when BABI_DIR has nothing
    shutil.rmtree(tmp_path / "dl")
    res = get_babi(tmp_path, VARIANT="en", SHARED_BABI=tmp_path / "src")
    assert res.returncode == 0 and res.stdout.strip().endswith("src/tasks_1-20_v1-2/en")
    # else the download (a file:// URL stands for the official one)
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    res = get_babi(tmp_path, VARIANT="hn-10k", BABI_URL=f"file://{tarball}")
    assert res.returncode == 0, res.stderr
    assert "downloading file://" in res.stderr
    assert (tmp_path / "dl/tasks_1-20_v1-2.tar.gz").is_file()
    assert res.stdout.strip().endswith("dl/tasks_1-20_v1-2/hn-10k")


def test_get_babi_assembles_en10k_with_the_qa3_questions_that_exist(tmp_path):
    """A shared copy whose en-10k lacks qa3's training file (as this project's): en-10k is
    assembled from links, qa3's training file the en-valid-10k qa3 split, and it says so;
    EN10K_QA3=none keeps the shared folder with task 3 missing."""
    shared = tmp_path / "shared"
    rel = fake_release(shared, variants=("en-10k",))
    partial = shared / "en-valid-10k-qa3" / "en-valid-10k_qa3_valid.txt"
    partial.parent.mkdir()
    partial.write_text(where_is(10, seed=5, lang="en"))
    res = get_babi(tmp_path, VARIANT="en-10k", SHARED_BABI=shared)
    assert res.returncode == 0, res.stderr
    folder = tmp_path / "dl" / "assembled" / "en-10k"
    assert res.stdout.strip().splitlines()[-1] == str(folder.resolve())
    assert "task 3 trains on 1,000 questions" in res.stderr and "task(s) 2 3" not in res.stderr
    qa3 = folder / "qa3_three-supporting-facts_train.txt"
    assert qa3.read_text() == partial.read_text()
    assert (folder / "qa1_single-supporting-fact_train.txt").resolve() == \
        (rel / "en-10k" / "qa1_single-supporting-fact_train.txt").resolve()
    assert "1,000 of the release's 10,000" in (folder / "ASSEMBLED.txt").read_text()
    assert find_task_files(str(folder))[3]["train"].endswith("qa3_three-supporting-facts_train.txt")
    res = get_babi(tmp_path, VARIANT="en-10k", SHARED_BABI=shared, BABI_DIR=tmp_path / "dl2",
                   EN10K_QA3="none")
    assert res.returncode == 0 and res.stdout.strip().endswith("shared/tasks_1-20_v1-2/en-10k")
    assert "no training file for task(s) 2 3" in res.stderr
    assert get_babi(tmp_path, VARIANT="en-10k", EN10K_QA3="all").returncode != 0


# ---------------------------------------------------------------- the stock CLIs, end to end
def _accuracy(output: str, subset: str) -> float:
    m = re.findall(rf"valid on '{subset}' subset \| .*?accuracy ([0-9.]+)", output)
    assert m, output[-3000:]
    return float(m[-1])


def test_cli_train_and_validate_on_a_multi_word_answer_task(tmp_path):
    """A Devanagari task whose answers are one to three words (CRLF files) trains through
    fairseq-train and is scored by fairseq-validate: every answer is one class, and the model
    learns them, multi-word ones included, far beyond the 1-in-6 guess."""
    folder = tmp_path / "hn"
    write_task(folder, 1, where_is(500, seed=11), where_is(200, seed=12), newline_crlf=True)
    save = tmp_path / "ck"
    res = run_cli("fairseq_cli.train", folder, "--user-dir", USER_DIR, "--task", "babi_qa",
                  "--babi-tasks", "1", "--arch", "memn2n", "--criterion", "qa_cross_entropy",
                  "--embed-dim", "20", "--optimizer", "adam", "--lr", "0.02",
                  "--batch-size", "32", "--required-batch-size-multiple", "1",
                  "--max-epoch", "8", "--save-dir", save, "--no-epoch-checkpoints",
                  "--num-workers", "0", "--seed", "1", "--cpu", "--log-format", "simple",
                  timeout=300)
    assert _accuracy(res.stdout + res.stderr, "valid") > 50.0
    ck = save / "checkpoint_best.pt"
    res = run_cli("fairseq_cli.validate", folder, "--user-dir", USER_DIR, "--task", "babi_qa",
                  "--babi-tasks", "1", "--path", ck, "--valid-subset", "test",
                  "--batch-size", "100", "--cpu", timeout=300)
    acc_cli = _accuracy(res.stdout + res.stderr, "test")
    assert acc_cli > 50.0

    from fairseq import checkpoint_utils
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(ck)])
    model = models[0].eval()
    task.load_dataset("test")
    te = task.datasets["test"]
    d = task.target_dictionary
    with torch.no_grad():
        s = te.batch(torch.arange(len(te)))
        pred = model(**s["net_input"])[0].argmax(-1)
    ok = pred == s["target"]
    assert 100 * ok.float().mean().item() == pytest.approx(acc_cli, abs=0.06)
    gold = [answer_text(d[i]) for i in s["target"]]
    multi = torch.tensor([" " in g for g in gold])
    assert multi.sum() > 50 and ok[multi].float().mean() > 0.5      # multi-word answers learned
    assert {answer_text(d[i]) for i in pred[ok]} >= {"रसोई घर", "सोने का कमरा"}
