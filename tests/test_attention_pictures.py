"""python -m fairseq_acvi.cli.attention_pictures on checkpoints trained through fairseq-train:
the hypothesis is fairseq-generate's, the attention rows are distributions over the source,
planning attention's switch g_t is drawn with it."""
import json

import pytest

from conftest import USER_DIR, run_cli
from test_translation_cli import reversal_bin, train


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory):
    return reversal_bin(tmp_path_factory.mktemp("raw"))


@pytest.fixture(scope="module")
def checkpoints(data_bin, tmp_path_factory):
    out = {}
    for variant in ("pag", "soft", "none"):
        save = tmp_path_factory.mktemp(variant)
        train(data_bin, save, "--context-inference", variant, updates=8)
        out[variant] = save / "checkpoint_best.pt"
    return out


def _generate_hypotheses(data_bin, ckpt, beam):
    res = run_cli("fairseq_cli.generate", data_bin, "--user-dir", USER_DIR, "--path", ckpt,
                  "--gen-subset", "test", "--beam", beam, "--batch-size", "1", "--max-len-a", "0",
                  "--max-len-b", "12", "--cpu")
    hyps = {}
    for line in res.stdout.splitlines():
        if line.startswith("H-"):
            key, _, text = line.split("\t")
            hyps[int(key[2:])] = text.split()
    return hyps


def _pictures(data_bin, ckpt, out, beam=3):
    return run_cli("fairseq_acvi.cli.attention_pictures", data_bin, "--path", ckpt, "--subset", "test",
                   "--ids", "0", "3", "--beam", beam, "--max-len-a", "0", "--max-len-b", "12",
                   "--out-dir", out)


def test_pag_pictures_show_attention_and_the_switch(data_bin, checkpoints, tmp_path):
    res = _pictures(data_bin, checkpoints["pag"], tmp_path)
    assert "[pictures]" in res.stdout
    rec = json.loads((tmp_path / "attention.json").read_text())
    assert rec["context_inference"] == "pag" and [s["id"] for s in rec["sentences"]] == [0, 3]
    generated = _generate_hypotheses(data_bin, checkpoints["pag"], 3)
    for s in rec["sentences"]:
        assert (tmp_path / f"test_{s['id']}.png").stat().st_size > 1000
        T, N = len(s["hypothesis"]), len(s["source"])
        assert s["hypothesis"][-1] == "</s>" and s["hypothesis"][:-1] == generated[s["id"]]
        assert len(s["attn"]) == T and all(len(row) == N for row in s["attn"])
        assert all(abs(sum(row) - 1.0) < 1e-4 for row in s["attn"])
        assert len(s["replan"]) == T and all(0.0 <= g <= 1.0 for g in s["replan"])
        assert s["replan"][0] == pytest.approx(1.0)        # no plan before the first step


def test_soft_pictures_have_no_switch_and_none_has_nothing_to_draw(data_bin, checkpoints, tmp_path):
    _pictures(data_bin, checkpoints["soft"], tmp_path / "soft")
    soft = json.loads((tmp_path / "soft" / "attention.json").read_text())
    assert all(s["replan"] is None and s["attn"] for s in soft["sentences"])
    res = _pictures(data_bin, checkpoints["none"], tmp_path / "none")
    assert "no attention to draw" in res.stderr and not list((tmp_path / "none").glob("*.png"))
    # the same softmax model drawn with sparsemax in its place (--model-overrides): other weights,
    # still distributions
    run_cli("fairseq_acvi.cli.attention_pictures", data_bin, "--path", checkpoints["soft"], "--subset",
            "test", "--ids", "0", "3", "--beam", 3, "--max-len-a", "0", "--max-len-b", "12",
            "--out-dir", tmp_path / "sparse", "--model-overrides", "{'attention_normalizer': 'sparsemax'}")
    sparse = json.loads((tmp_path / "sparse" / "attention.json").read_text())
    assert all(abs(sum(row) - 1.0) < 1e-4 for s in sparse["sentences"] for row in s["attn"])
    assert [s["attn"] for s in sparse["sentences"]] != [s["attn"] for s in soft["sentences"]]
    bad = run_cli("fairseq_acvi.cli.attention_pictures", data_bin, "--path", checkpoints["soft"],
                  "--out-dir", tmp_path / "x", "--model-overrides", "sparsemax", check=False)
    assert bad.returncode != 0 and "--model-overrides" in bad.stderr


def test_a_sentence_id_outside_the_subset_is_named(data_bin, checkpoints, tmp_path):
    res = run_cli("fairseq_acvi.cli.attention_pictures", data_bin, "--path", checkpoints["soft"],
                  "--subset", "test", "--ids", "99", "--out-dir", tmp_path, check=False)
    assert res.returncode != 0 and "--ids: 99 is not a sentence of subset 'test' (12 sentences)" in res.stderr


def test_a_named_split_is_read_from_splits_json(tmp_path):
    from fairseq_acvi.cli.attention_pictures import subset_name
    assert subset_name(str(tmp_path), "test2016") == "test2016"          # no splits.json: as given
    (tmp_path / "splits.json").write_text(json.dumps({"valid": "valid", "test2016": "test",
                                                      "test2017": "test1"}))
    assert [subset_name(str(tmp_path), s) for s in ("test2016", "test2017", "test")] == \
        ["test", "test1", "test"]
