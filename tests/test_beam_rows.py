"""Beam search leaves the per-sentence tensors uncopied while rows move within their sentences
(modules/seq2seq/beam_rows.py, decoder_state.py; docs/method.md §3.9): the same hypotheses and
scores, bit for bit, as copying every tensor at every step, for every kind of decoder state; the
copy is really skipped; and it is not skipped when the batch shrinks or rows cross sentences."""
import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator

import test_pointer_generator as pg_tests
import test_seq2seq_model as s2s_tests
from fairseq_acvi.modules.seq2seq import beam_rows
from fairseq_acvi.modules.seq2seq.mc_dropout import set_rows_per_sentence, wrap_mc_dropout


def test_reordered_tells_reorders_within_sentences_apart():
    src = torch.tensor([0, 0, 0, 1, 1, 1])
    new, same = beam_rows.reordered(src, torch.tensor([2, 0, 0, 5, 3, 4]))
    assert same and torch.equal(new, src)
    new, same = beam_rows.reordered(src, torch.tensor([3, 4, 5]))          # sentence 0 finished
    assert not same and new.tolist() == [1, 1, 1]
    _, same = beam_rows.reordered(src, torch.tensor([3, 0, 0, 5, 3, 4]))   # a row crosses over
    assert not same


def test_first_of_source():
    assert beam_rows.first_of_source(torch.arange(4)) is None
    assert beam_rows.first_of_source(torch.tensor([2, 2, 5, 5, 5])).tolist() == [0, 0, 2, 2, 2]
    assert beam_rows.first_of_source(torch.tensor([1, 0, 1, 0])).tolist() == [0, 1, 0, 1]


def test_reorder_keeps_per_sentence_entries_only_within_sentences():
    cache = {"row_source": torch.tensor([0, 0, 1, 1]), "keys": torch.arange(4.0)[:, None],
             "h": torch.arange(8.0).view(2, 4)}
    per = lambda k: k == "keys"                                             # noqa: E731
    out = beam_rows.reorder(cache, torch.tensor([1, 1, 3, 2]), per, layer_first=("h",))
    assert out["keys"] is cache["keys"] and out["row_source"] is cache["row_source"]
    assert out["h"].tolist() == [[1, 1, 3, 2], [5, 5, 7, 6]]               # per row: reordered
    out = beam_rows.reorder(cache, torch.tensor([2, 3]), per, layer_first=("h",))
    assert out["keys"].view(-1).tolist() == [2.0, 3.0] and out["row_source"].tolist() == [1, 1]
    assert out["h"].tolist() == [[2, 3], [6, 7]]


def _always_copy(monkeypatch):
    """The reorders as they were before beam_rows: every tensor copied at every step."""
    real = beam_rows.reordered
    monkeypatch.setattr(beam_rows, "reordered", lambda s, o: (real(s, o)[0], False))
    monkeypatch.setattr(beam_rows, "share_within_sentences", lambda *a: False)


MODELS = {
    "soft": lambda: s2s_tests.build_model("soft", init_scale=1.0),
    "acvi K=3": lambda: s2s_tests.build_model("acvi", init_scale=1.0, mc_samples=3,
                                              acvi_logvar_init=0.0),
    "structured": lambda: s2s_tests.build_model("structured", init_scale=1.0),
    "pag (stateful)": lambda: s2s_tests.build_model("pag", init_scale=1.0),
    "soft, seed 003 (ii)+(iii)": lambda: s2s_tests.build_model(
        "soft", init_scale=1.0, attend_decoder_past=True, self_attention_heads=2),
    "csparsemax (stateful normaliser)": lambda: s2s_tests.build_model(
        "soft", init_scale=1.0, attention_normalizer="csparsemax"),
    "pointer-generator, coverage": lambda: pg_tests.build_model("soft", init_scale=1.0),
}


@pytest.mark.parametrize("name,mc_dropout", [(n, 0) for n in MODELS] + [("soft", 3)])
def test_beam_search_equals_copying_everything(name, mc_dropout, monkeypatch):
    torch.manual_seed(0)
    model, d = MODELS[name]()
    model.eval()
    if mc_dropout:                  # K chains a row: the encoder's rows are (sentence, chain)
        model = wrap_mc_dropout(model, mc_dropout, rate=0.3)
    if name.startswith("pointer"):
        src, lengths, _ = pg_tests._batch(d)
    else:
        src, lengths, _ = s2s_tests._batch(d)
    sample = {"id": torch.arange(3), "net_input": {"src_tokens": src, "src_lengths": lengths}}

    calls = []
    real = beam_rows.reordered

    def counting(s, o):
        new, same = real(s, o)
        calls.append(same)
        return new, same

    def generate():
        gen = SequenceGenerator([model], d, beam_size=4, max_len_a=0, max_len_b=6, min_len=1)
        if mc_dropout:
            set_rows_per_sentence([model], 4)
        torch.manual_seed(1)
        with torch.no_grad():
            return gen.generate([model], sample)

    monkeypatch.setattr(beam_rows, "reordered", counting)
    fast = generate()
    assert any(calls), "no reorder skipped its copies"
    assert not all(calls), "no reorder had to copy (a sentence finished before the others)"
    monkeypatch.undo()
    _always_copy(monkeypatch)
    slow = generate()
    for fs, ss in zip(fast, slow):
        assert len(fs) == len(ss)
        for f, s in zip(fs, ss):
            assert torch.equal(f["tokens"], s["tokens"])
            assert torch.equal(f["positional_scores"], s["positional_scores"])
            assert f["score"] == s["score"]
