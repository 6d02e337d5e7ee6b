"""fairseq_acvi.mt_eval.reuse_run: a finished default run counted under another tag (the softmax rows
of the normalisers' comparison) only when it is that model under the same budget; the copy keeps
what the reports read and says where it came from."""
import json
import os

import pytest

from fairseq_acvi.mt_eval import reuse_run as R
from fairseq_acvi.mt_eval.runs import read_run


def _finished(folder, **meta):
    folder.mkdir(parents=True)
    record = {"pair": "en_de", "context": "soft", "tag": "", "seed": 2, "arch": "acvi_lstm_multi30k",
              "max_epoch": 20, "patience": 0, "extra_train_args": "", **meta}
    (folder / "run.json").write_text(json.dumps(record))
    (folder / "checkpoint_best.pt").write_bytes(b"weights")
    (folder / "train.log").write_text("log\n")
    for s in R.SPLITS:
        (folder / f"gen_{s}.txt").write_text(f"H-0\t-0.1\thyp {s}\n")
        (folder / f"bleu_{s}.json").write_text(json.dumps({"bleu": 30.0}))
    return folder


def test_a_finished_default_run_becomes_the_tagged_run(tmp_path):
    src = _finished(tmp_path / "multi30k" / "soft_seed2")
    dst = tmp_path / "normalizers" / "soft-softmax_seed2"
    assert R.main([str(src), str(dst), "--tag", "softmax", "--max-epoch", "20",
                   "--patience", "0"]) == 0
    meta = json.loads((dst / "run.json").read_text())
    assert meta["tag"] == "softmax" and meta["seed"] == 2 and meta["max_epoch"] == 20
    assert meta["reused_from"] == os.path.join("..", "..", "multi30k", "soft_seed2")
    assert (dst / "checkpoint_best.pt").is_symlink()
    assert (dst / "checkpoint_best.pt").read_bytes() == b"weights"
    assert (dst / "gen_test2017.txt").read_text() == "H-0\t-0.1\thyp test2017\n"
    run = read_run(str(dst))
    assert run["variant"] == "soft-softmax" and run["tag"] == "softmax"
    # again: nothing to do; the source is untouched
    assert R.reuse(str(src), str(dst), "softmax", "soft", 20, 0) is False
    assert json.loads((src / "run.json").read_text())["tag"] == ""


@pytest.mark.parametrize("meta,says", [
    ({"context": "acvi"}, "context 'acvi', not 'soft'"),
    ({"tag": "nofeed"}, "tag 'nofeed'"),
    ({"extra_train_args": "--attention-normalizer sparsemax"}, "--attention-normalizer sparsemax"),
    ({"max_epoch": 12}, "max_epoch 12, not 20"),
    ({"patience": 3}, "patience 3, not 0"),
])
def test_a_run_of_another_model_or_budget_is_refused_naming_why(tmp_path, meta, says):
    src = _finished(tmp_path / "soft_seed2", **meta)
    dst = tmp_path / "soft-softmax_seed2"
    with pytest.raises(R.ReuseError, match="cannot stand for the softmax run") as e:
        R.reuse(str(src), str(dst), "softmax", "soft", 20, 0)
    assert says in str(e.value) and str(src / "run.json") in str(e.value)
    assert not dst.exists()


def test_an_unfinished_run_and_an_occupied_destination_are_refused(tmp_path, capsys):
    src = _finished(tmp_path / "soft_seed2")
    (src / "bleu_test2017.json").unlink()
    dst = tmp_path / "soft-softmax_seed2"
    assert R.main([str(src), str(dst), "--tag", "softmax", "--max-epoch", "20",
                   "--patience", "0"]) == 2
    assert "not a finished run (missing bleu_test2017.json)" in capsys.readouterr().err
    (src / "bleu_test2017.json").write_text("{}")
    other = _finished(tmp_path / "other_seed2")
    R.reuse(str(other), str(dst), "softmax", "soft", 20, 0)
    with pytest.raises(R.ReuseError, match="holds another run"):
        R.reuse(str(src), str(dst), "softmax", "soft", 20, 0)
    with pytest.raises(R.ReuseError, match="run.json: cannot be read"):
        R.reuse(str(tmp_path / "none"), str(dst), "softmax", "soft", 20, 0)
    (src / "run.json").write_text("{")
    with pytest.raises(R.ReuseError, match="run.json: not valid JSON"):
        R.reuse(str(src), str(tmp_path / "third"), "softmax", "soft", 20, 0)


def test_decode_normalizer_makes_a_folder_to_decode_again(tmp_path):
    """--decode-normalizer: the softmax model (even one counted under the tag softmax) becomes the
    folder of its decodes with another normaliser: train.log and the checkpoint link only, the
    normaliser recorded; a source trained with another normaliser, or an unknown name, is refused."""
    src = _finished(tmp_path / "normalizers" / "soft-softmax_seed2", tag="softmax")
    dst = tmp_path / "normalizers" / "soft-softmax-decoded-sparsemax_seed2"
    assert R.main([str(src), str(dst), "--tag", "softmax-decoded-sparsemax", "--max-epoch", "20",
                   "--patience", "0", "--decode-normalizer", "sparsemax"]) == 0
    meta = json.loads((dst / "run.json").read_text())
    assert meta["decode_normalizer"] == "sparsemax" and meta["tag"] == "softmax-decoded-sparsemax"
    assert "decoded with sparsemax" in meta["reuse_note"]
    assert sorted(p.name for p in dst.iterdir()) == ["checkpoint_best.pt", "run.json", "train.log"]
    assert (dst / "checkpoint_best.pt").read_bytes() == b"weights"
    assert read_run(str(dst))["variant"] == "soft-softmax-decoded-sparsemax"
    other = _finished(tmp_path / "n" / "soft-entmax15_seed2", tag="",
                      extra_train_args="--attention-normalizer entmax15")
    with pytest.raises(R.ReuseError, match="entmax15, not softmax"):
        R.reuse(str(other), str(tmp_path / "x"), "softmax-decoded-sparsemax", "soft", 20, 0,
                decode_normalizer="sparsemax")
    with pytest.raises(R.ReuseError, match="--decode-normalizer: unknown value 'sparse'"):
        R.reuse(str(src), str(tmp_path / "y"), "t", "soft", 20, 0, decode_normalizer="sparse")
    # the plain reuse still refuses a tagged source
    with pytest.raises(R.ReuseError, match="tag 'softmax'"):
        R.reuse(str(src), str(tmp_path / "z"), "softmax", "soft", 20, 0)
