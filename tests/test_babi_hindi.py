"""Hindi bAbI: multi-word and inflected answers through the parser, the answer
vocabulary and the evaluation, on lines of the release's ``hn`` folder, and a Hindi task trained
through fairseq-train / fairseq-validate on a small slice of the real files.

The fixtures are lines of ``tasks_1-20_v1-2/hn`` (bAbI v1.2, CC BY 3.0, Weston et al. 2015)
copied verbatim, so that these tests run without the data; with ``ACVI_DATA`` set,
:func:`test_fixture_lines_are_the_release_lines` checks that each is the release's line.
"""
import json
import re

import pytest
import torch
from fairseq.data import Dictionary

from conftest import USER_DIR, run_cli
from fairseq_acvi.babi_eval.errors import answer_form, breakdown, markdown, question_wording
from fairseq_acvi.babi_eval.errors import main as errors_main
from fairseq_acvi.babi_eval.evaluate import accuracy_by_task
from fairseq_acvi.data.babi import ANSWER_JOIN, answer_text, parse_babi_lines
from fairseq_acvi.tasks.babi_qa import BabiQAConfig, BabiQATask

# hn/qa1_single-supporting-fact_train.txt, lines 1-15 (the first story)
QA1_TRAIN = """1 Sita gusalkhaney mein gayi.
2 Priya sayanakaksh mein gayi.
3 Priya is samay kahan hai?\tsayanakaksh\t2
4 Sita sayanakaksh mein chali gayi.
5 Priya rasoi ghar mein chali gayi.
6 Priya is samay kahan hai?\trasoi ghar\t5
7 Sita gusalkhaney mein chali gayi.
8 Badri bagichey gaya.
9 Sita is samay kahan hai?\tgusalkhana\t7
10 Mohit gusalkhaney gaya.
11 Sita daftar mein gayi.
12 Sita is samay kahan hai?\tdaftar\t11
13 Sita rasoi ghar gayi.
14 Mohit daftar mein gaya.
15 Mohit ab kahan hai?\tdaftar\t14
"""
# hn/qa1_single-supporting-fact_train.txt, lines 16-30 (the second story)
QA1_TRAIN_2 = """1 Sita sayanakaksh mein gayi.
2 Priya daftar mein chali gayi.
3 Priya is samay kahan hai?\tdaftar\t2
4 Priya galiyarey mein chali gayi.
5 Priya bagichey mein chali gayi.
6 Priya ab kahan hai?\tbagicha\t5
7 Sita galiyarey mein gayi.
8 Badri gusalkhaney mein gaya.
9 Priya is samay kahan hai?\tbagicha\t5
10 Mohit bagichey gaya.
11 Badri bagichey mein chala gaya.
12 Mohit ab kahan hai?\tbagicha\t10
13 Badri rasoi ghar gaya.
14 Mohit daftar gaya.
15 Badri is samay kahan hai?\trasoi ghar\t13
"""
# hn/qa1_single-supporting-fact_test.txt, lines 91-96 (the question of line 96 is one the
# 60-epoch stock run got wrong, docs/results/babi_hindi_2026-11-28.md)
QA1_TEST = """1 Sita rasoi ghar mein gayi.
2 Mohit daftar mein gaya.
3 Sita is samay kahan hai?\trasoi ghar\t1
4 Sita gusalkhaney gayi.
5 Mohit galiyarey mein gaya.
6 Sita ab kahan hai?\tgusalkhana\t4
"""
# hn/qa20_agents-motivations_train.txt, lines 1-12: answers derived from the supporting fact
# ("kahan jayega?" -> a place the fact does not name; "sayankaksh" is spelt "sayanakaksh" in
# the stories) and two-word answers that the fact holds ("thaka hua")
QA20 = """1 Sumit thaka hua hai.
2 Sumit kahan jayega?\tsayankaksh\t1
3 Sumit sayanakaksh gaya.
4 Sumit sayanakaksh mein kyoun gaya?\tthaka hua\t1
5 Sumit pajama le kar aaya.
6 Sumit pajama kyoun le kar aaya?\tthaka hua\t1
7 Harsh pyasa hai.
8 Harsh kahan jayega?\trasoi ghar\t7
9 Harsh rasoi ghar mein chala gaya.
10 Harsh rasoi ghar mein kyoun gaya?\tpyasa\t7
11 Harsh dhoodh le kar aaya.
12 Harsh dhoodh kyoun le kar aaya?\tpyasa\t7
"""
# hn/qa8_lists-sets_train.txt, lines 1-11 and hn/qa19_path-finding_test.txt, lines 1-6
QA8 = """1 Sita gusalkhaney mein gayi.
2 Priya sayanakaksh mein gayi.
3 Sita gayend le kar aayi.
4 Mohit daftar mein gaya.
5 Sita ne kya cheezein pakdi hui hein?\tgayend\t3
6 Priya gusalkhaney mein chali gayi.
7 Badri galiyarey mein gaya.
8 Sita ne kya cheezein pakdi hui hein?\tgayend\t3
9 Mohit gusalkhaney mein gaya.
10 Priya bagichey mein chali gayi.
11 Badri seb le aaya.
"""
QA19 = """1 Bagicha gusalkhaney ki paschim disha mein hai.
2 Daftar galiyarey ki dakshin disha mein hai.
3 Gusalkhana sayanakaksh ki uttar disha mein hai.
4 Galiyara sayanakaksh ki dakshin disha mein hai.
5 Rasoi ghar sayanakaksh ki poorav disha mein hai.
6 Gusalkhana sey galiyara tak jaaney ka kya rasta hai?\tdakshin,dakshin\t3 4
"""
FIXTURES = {  # name -> (release file, first line number, text)
    "QA1_TRAIN": ("qa1_single-supporting-fact_train.txt", 1, QA1_TRAIN),
    "QA1_TRAIN_2": ("qa1_single-supporting-fact_train.txt", 16, QA1_TRAIN_2),
    "QA1_TEST": ("qa1_single-supporting-fact_test.txt", 91, QA1_TEST),
    "QA20": ("qa20_agents-motivations_train.txt", 1, QA20),
    "QA8": ("qa8_lists-sets_train.txt", 1, QA8),
    "QA19": ("qa19_path-finding_test.txt", 1, QA19),
}


def lines(text):
    return text.splitlines(keepends=True)


def hn_folder(tmp_path):
    """A folder with task 1 (the two real training stories, the real test story) and task 20."""
    folder = tmp_path / "hn"
    folder.mkdir()
    (folder / "qa1_single-supporting-fact_train.txt").write_text(QA1_TRAIN + QA1_TRAIN_2)
    (folder / "qa1_single-supporting-fact_test.txt").write_text(QA1_TEST)
    (folder / "qa20_agents-motivations_train.txt").write_text(QA20)
    (folder / "qa20_agents-motivations_test.txt").write_text(QA20)
    return folder


# --------------------------------------------------------------------------------- the parser
def test_fixture_lines_are_the_release_lines(shared_data):
    hn = shared_data / "babi" / "tasks_1-20_v1-2" / "hn"
    if not hn.is_dir():
        pytest.skip(f"{hn} not present")
    for name, (fname, first, text) in FIXTURES.items():
        real = (hn / fname).read_text(encoding="utf-8").splitlines(keepends=True)
        assert real[first - 1:first - 1 + len(lines(text))] == lines(text), name


def test_parser_multi_word_and_inflected_answers():
    exs = parse_babi_lines(lines(QA1_TRAIN), "qa1_train.txt", task=1)
    assert [e.answer for e in exs] == ["sayanakaksh", "rasoi\u2581ghar", "gusalkhana", "daftar",
                                       "daftar"]
    # the multi-word answer is one class symbol; its words stay separate story tokens
    assert exs[1].story[-1] == ["priya", "rasoi", "ghar", "mein", "chali", "gayi"]
    assert exs[1].supports == [3] and answer_text(exs[1].answer) == "rasoi ghar"
    # the inflected answer: the story says "gusalkhaney", the answer "gusalkhana"
    assert exs[2].story[exs[2].supports[0]] == ["sita", "gusalkhaney", "mein", "chali", "gayi"]
    assert exs[2].source == "qa1_train.txt:9"
    assert [e.query for e in exs][3:] == [["sita", "is", "samay", "kahan", "hai"],
                                           ["mohit", "ab", "kahan", "hai"]]


@pytest.mark.parametrize("text,want", [
    (QA1_TRAIN, [("one", "verbatim"), ("several", "verbatim"), ("one", "not verbatim"),
                 ("one", "verbatim"), ("one", "verbatim")]),
    (QA1_TRAIN_2, [("one", "verbatim"), ("one", "not verbatim"), ("one", "not verbatim"),
                   ("one", "not verbatim"), ("several", "verbatim")]),
    (QA20, [("one", "not verbatim"), ("several", "verbatim"), ("several", "verbatim"),
            ("several", "not verbatim"), ("one", "verbatim"), ("one", "verbatim")]),
    (QA19, [("list", "verbatim")]),                     # "dakshin" is in fact 4
])
def test_answer_forms_of_real_lines(text, want):
    exs = parse_babi_lines(lines(text))
    assert [tuple(answer_form(e).values()) for e in exs] == want


def test_question_wording_drops_the_names():
    exs = parse_babi_lines(lines(QA1_TRAIN))
    assert [question_wording(e) for e in exs] == ["is samay kahan hai"] * 4 + ["ab kahan hai"]


# ---------------------------------------------------------------------- the answer vocabulary
def test_answer_vocabulary_of_a_hindi_task(tmp_path):
    task = BabiQATask.setup_task(BabiQAConfig(data=str(hn_folder(tmp_path)), babi_tasks="1"))
    d = task.target_dictionary
    # one class per answer field; the inflected answer and its story form are two symbols; the
    # words of the multi-word answer are symbols of their own (story words)
    for sym in ("rasoi\u2581ghar", "rasoi", "ghar", "gusalkhana", "gusalkhaney", "bagicha",
                "bagichey"):
        assert d.index(sym) != d.unk(), sym
    assert len({d.index(s) for s in ("rasoi\u2581ghar", "rasoi", "ghar")}) == 3
    d.save(str(tmp_path / "dict.txt"))
    assert Dictionary.load(str(tmp_path / "dict.txt")).symbols == d.symbols
    task.load_dataset("test")
    te = task.datasets["test"]
    s = te.collater(list(range(len(te))))
    assert [answer_text(d[i]) for i in s["target"]] == ["rasoi ghar", "gusalkhana"]
    # the story's tokens of the multi-word place are the two words, not the answer class
    story = s["net_input"]["story"][0]                       # slot 0: the most recent statement
    assert [d[i] for i in story[1] if i != d.pad()] == ["sita", "rasoi", "ghar", "mein", "gayi"]
    assert d.index("rasoi\u2581ghar") not in story.tolist()


def test_joint_vocabulary_keeps_each_task_answer_once(tmp_path):
    task = BabiQATask.setup_task(BabiQAConfig(data=str(hn_folder(tmp_path)), babi_tasks="1,20"))
    d = task.target_dictionary
    answers = {e.answer for split in task.examples.values() for e in split}
    assert answers == {"sayanakaksh", "rasoi\u2581ghar", "gusalkhana", "daftar", "bagicha",
                       "sayankaksh", "thaka\u2581hua", "pyasa"}
    assert all(ANSWER_JOIN not in w or w in answers for w in d.symbols)


# ---------------------------------------------------------------------------- the evaluation
def test_breakdown_counts_by_answer_form_and_confusion():
    exs = parse_babi_lines(lines(QA1_TRAIN + QA1_TRAIN_2), "qa1_train.txt", task=1)
    gold = [e.answer for e in exs]
    pred = list(gold)
    pred[1] = "gusalkhana"          # rasoi ghar -> gusalkhana (several words, verbatim)
    pred[2] = "rasoi"               # gusalkhana -> a story word, half of a multi-word answer
    pred[6] = "galiyara"            # bagicha -> galiyara (one word, not verbatim)
    r = breakdown(exs, pred)
    assert r["n"] == 10 and r["accuracy"] == 70.0
    assert r["by_form"] == {
        "one, not verbatim": {"n": 4, "right": 2, "wrong": 2, "accuracy": 50.0},
        "one, verbatim": {"n": 4, "right": 4, "wrong": 0, "accuracy": 100.0},
        "several, verbatim": {"n": 2, "right": 1, "wrong": 1, "accuracy": 50.0}}
    assert r["by_words"]["several"]["wrong"] == 1 and r["by_verbatim"]["not verbatim"]["n"] == 4
    assert r["by_answer"]["bagicha"] == {"n": 3, "right": 2, "wrong": 1, "accuracy": 66.67}
    assert r["confusion"]["rasoi ghar"] == {"gusalkhana": 1, "rasoi ghar": 1}
    assert r["confusion"]["gusalkhana"] == {"rasoi": 1}
    assert r["by_question"]["ab kahan hai"]["n"] == 3
    assert r["by_support_distance"]["0"]["n"] == 6            # most questions ask about the last move
    assert [w["source"] for w in r["wrong"]] == ["qa1_train.txt:6", "qa1_train.txt:9",
                                                 "qa1_train.txt:21"]
    md = "\n".join(markdown(r))
    assert "| rasoi ghar | 2 | 1 | 50.0 |" in md and "| one, not verbatim | 4 | 2 | 50.0 |" in md
    # the evaluation's accuracy is the same count: a multi-word answer is right only as a whole
    ok = torch.tensor([p == g for p, g in zip(pred, gold)])
    assert accuracy_by_task(ok, torch.ones(10, dtype=torch.long)) == {1: 70.0}


def test_breakdown_refuses_mismatched_lengths():
    exs = parse_babi_lines(lines(QA1_TEST))
    with pytest.raises(ValueError, match="2 examples but 1 predictions"):
        breakdown(exs, ["daftar"])


# ----------------------------------------------------------- the stock CLIs on a real slice
def _accuracy(output: str, subset: str) -> float:
    m = re.findall(rf"valid on '{subset}' subset \| .*?accuracy ([0-9.]+)", output)
    assert m, output[-3000:]
    return float(m[-1])


def test_cli_train_validate_and_error_breakdown_on_a_hindi_slice(tmp_path, shared_data):
    """hn task 1, the first 1,500 lines of each real file (500 questions), through fairseq-train
    and fairseq-validate; the error breakdown of the checkpoint agrees with fairseq-validate and
    the model answers inflected and multi-word questions far beyond the 1-in-6 guess."""
    hn = shared_data / "babi" / "tasks_1-20_v1-2" / "hn"
    if not hn.is_dir():
        pytest.skip(f"{hn} not present")
    folder = tmp_path / "hn"
    folder.mkdir()
    for split in ("train", "test"):
        name = f"qa1_single-supporting-fact_{split}.txt"
        real = (hn / name).read_text(encoding="utf-8").splitlines(keepends=True)
        (folder / name).write_text("".join(real[:1500]), encoding="utf-8")
    save = tmp_path / "ck"
    res = run_cli("fairseq_cli.train", folder, "--user-dir", USER_DIR, "--task", "babi_qa",
                  "--babi-tasks", "1", "--arch", "memn2n", "--criterion", "qa_cross_entropy",
                  "--embed-dim", "20", "--tying", "adjacent", "--random-noise", "0",
                  "--optimizer", "adam", "--lr", "0.02", "--clip-norm", "40",
                  "--batch-size", "32", "--required-batch-size-multiple", "1",
                  "--max-epoch", "12", "--save-dir", save, "--no-epoch-checkpoints",
                  "--num-workers", "0", "--seed", "1", "--cpu", "--log-format", "simple",
                  timeout=600)
    assert _accuracy(res.stdout + res.stderr, "valid") > 60.0
    ck = save / "checkpoint_best.pt"
    res = run_cli("fairseq_cli.validate", folder, "--user-dir", USER_DIR, "--task", "babi_qa",
                  "--babi-tasks", "1", "--path", ck, "--valid-subset", "test",
                  "--batch-size", "100", "--cpu", timeout=300)
    acc_cli = _accuracy(res.stdout + res.stderr, "test")
    out = tmp_path / "errors.json"
    errors_main(["--path", str(ck), "--data", str(folder), "--tasks", "1", "--out", str(out)])
    r = json.loads(out.read_text())
    assert r["n"] == 500 and r["accuracy"] == pytest.approx(acc_cli, abs=0.05)
    assert set(r["by_form"]) == {"one, verbatim", "one, not verbatim", "several, verbatim"}
    for form, cell in r["by_form"].items():
        assert cell["n"] > 50 and cell["accuracy"] > 50.0, (form, cell)
    assert sum(sum(row.values()) for row in r["confusion"].values()) == 500
    md = (tmp_path / "errors.md").read_text().splitlines()
    assert sum(line.startswith("| gusalkhana |") for line in md) == 2   # its row in 2 tables


# ------------------------------------------------------------ --answer-classes answers (option)
@pytest.mark.parametrize("arch", ["memn2n", "t_memn2n"])
def test_answer_classes_limit_the_prediction_to_training_answers(tmp_path, arch):
    from fairseq_acvi.babi_eval.build import build_model, model_options
    from fairseq_acvi.babi_eval.checkpoint import load_model, save_checkpoint
    from fairseq_acvi.cli.babi_report import build_parser
    folder = str(hn_folder(tmp_path))
    task = BabiQATask.setup_task(BabiQAConfig(data=folder, babi_tasks="1",
                                              answer_classes="answers"))
    d = task.target_dictionary
    assert [d[i] for i in task.answer_indices()] == ["bagicha", "daftar", "gusalkhana",
                                                     "rasoi\u2581ghar", "sayanakaksh"]
    task.load_dataset("test")
    s = task.datasets["test"].batch(torch.arange(2))
    args = build_parser().parse_args(["--data", folder, "--answer-classes", "answers"])
    opts = model_options(arch, args)
    assert opts["answer_classes"] == "answers"
    torch.manual_seed(0)
    model = build_model(task, opts).eval()
    lp, extra = model(**s["net_input"])
    p = lp.exp()
    keep = torch.zeros(len(d), dtype=torch.bool)
    keep[task.answer_indices()] = True
    assert torch.allclose(p.sum(-1), torch.ones(2)) and p[:, ~keep].max() == 0
    assert p[:, keep].min() > 0 and torch.isfinite(extra["uncertainty"]).all()
    # the default model answers over the whole dictionary and its options are as before
    default = model_options(arch, build_parser().parse_args(["--data", folder]))
    assert "answer_classes" not in default
    torch.manual_seed(0)
    p_all = build_model(task, default).eval()(**s["net_input"])[0].exp()
    assert (p_all[:, ~keep] > 0).all()
    # a checkpoint carries the option: rebuilt with the same classes, the same answers
    save_checkpoint(str(tmp_path / "m.pt"), model, opts)
    again = load_model(str(tmp_path / "m.pt"), task, arch, args).eval()
    if arch == "memn2n":
        assert torch.equal(again(**s["net_input"])[0], lp)
    assert again.answer_bias is not None and torch.equal(again.answer_bias, model.answer_bias)


def test_answer_classes_refuses_an_unknown_mode(tmp_path):
    from fairseq_acvi.babi_eval.build import answer_classes
    task = BabiQATask.setup_task(BabiQAConfig(data=str(hn_folder(tmp_path)), babi_tasks="1"))
    assert answer_classes(task, "dictionary") is None
    with pytest.raises(ValueError, match="'dictionary' or 'answers', got 'words'"):
        answer_classes(task, "words")


def test_recipe_checks_and_passes_answer_classes(tmp_path):
    """recipes/babi.sh: ANSWER_CLASSES is checked (exit 2 naming it) and reaches the report,
    whose header and runs record it; the default leaves both as they were."""
    import os
    import subprocess
    import sys

    from conftest import REPO, fast_python
    env = dict(os.environ, BABI_DATA=str(hn_folder(tmp_path)), TASKS="1", SETUPS="single",
               MODELS="memn2n", SEEDS="1", EPOCHS="1", OMP_NUM_THREADS="1",
               EXTRA="--batches-per-epoch 2 --attention=",
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
               PYTHON=fast_python())   # babi_report through the tests' fork server
    bad = subprocess.run(["bash", "recipes/babi.sh"], cwd=str(REPO), capture_output=True,
                         text=True, timeout=60, env=dict(env, ANSWER_CLASSES="words"))
    assert bad.returncode == 2 and "ANSWER_CLASSES" in bad.stderr + bad.stdout
    for mode in ("answers", "dictionary"):
        out = tmp_path / mode
        res = subprocess.run(["bash", "recipes/babi.sh"], cwd=str(REPO), capture_output=True,
                             text=True, timeout=600,
                             env=dict(env, ANSWER_CLASSES=mode, OUT_DIR=str(out)))
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        assert f"ANSWER_CLASSES={mode}" in res.stdout
        run = json.loads((out / "results_single.json").read_text())["memn2n|1"]
        header = (out / "babi_report.md").read_text().split("\n\n")[1]
        if mode == "answers":
            assert run["answer_classes"] == "answers" and "`--answer-classes answers`" in header
        else:
            assert "answer_classes" not in run and "answer" not in header
