"""modules/seq2seq/segmented_lstm.py: the unpacked bidirectional LSTM equals PyTorch's packed one."""
import pytest
import torch
import torch.nn as nn

from fairseq_acvi.modules.seq2seq.segmented_lstm import (bilstm_by_segments, bilstm_packed, reverse_index,
                                                 reverse_within)

packed_reference = bilstm_packed     # PyTorch's packed call: the reference


def test_reverse_within_length_keeps_padding_in_place_and_is_its_own_inverse():
    lengths = torch.tensor([3, 1, 4])
    index = reverse_index(lengths, 4)
    assert index.tolist() == [[2, 1, 0, 3], [0, 1, 2, 3], [3, 2, 1, 0]]
    x = torch.arange(12.).view(3, 4, 1)
    assert reverse_within(reverse_within(x, index), index).equal(x)


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("lengths", [[7, 3, 7, 1, 5, 3], [6, 6, 6, 6, 6, 6], [2, 5, 4, 1, 3, 5]],
                         ids=["repeated", "equal", "shorter-than-N"])
def test_outputs_final_states_and_gradients_equal_the_packed_lstm(layers, bias, lengths):
    torch.manual_seed(0)
    lstm = nn.LSTM(5, 4, num_layers=layers, bias=bias, bidirectional=True, batch_first=True,
                   dropout=0.3 if layers > 1 else 0.0).double().eval()      # eval: no dropout
    lengths = torch.tensor(lengths)
    x = torch.randn(len(lengths), 7, 5, dtype=torch.float64)
    x[torch.arange(7).unsqueeze(0) >= lengths.unsqueeze(1)] = 3.0          # padding: not read
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ref = packed_reference(lstm, xa, lengths)
    got = bilstm_by_segments(lstm, xb, lengths)
    for r, g in zip(ref, got):
        assert g.shape == r.shape
        torch.testing.assert_close(g, r, rtol=1e-10, atol=1e-12)
    w = [torch.randn_like(r) for r in ref]
    params = list(lstm.parameters())
    g_ref = torch.autograd.grad(sum((a * b).sum() for a, b in zip(ref, w)), [xa] + params)
    g_got = torch.autograd.grad(sum((a * b).sum() for a, b in zip(got, w)), [xb] + params)
    for r, g in zip(g_ref, g_got):
        torch.testing.assert_close(g, r, rtol=1e-9, atol=1e-11)
    assert g_got[0][torch.arange(7).unsqueeze(0) >= lengths.unsqueeze(1)].abs().max() == 0


def test_training_dropout_between_layers_is_applied():
    torch.manual_seed(0)
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True, dropout=0.5).train()
    x, lengths = torch.randn(4, 6, 3), torch.tensor([6, 2, 4, 6])
    a = bilstm_by_segments(lstm, x, lengths)[0]
    b = bilstm_by_segments(lstm, x, lengths)[0]
    assert not torch.allclose(a, b)                                          # masks differ
    lstm.eval()
    torch.testing.assert_close(bilstm_by_segments(lstm, x, lengths)[0],
                               packed_reference(lstm, x, lengths)[0], rtol=1e-5, atol=1e-6)


def test_bad_lengths_and_unsupported_lstms_are_refused():
    lstm = nn.LSTM(3, 4, bidirectional=True, batch_first=True)
    with pytest.raises(ValueError, match="lengths must lie in"):
        bilstm_by_segments(lstm, torch.randn(2, 3, 3), torch.tensor([3, 4]))
    with pytest.raises(ValueError, match="bidirectional, batch-first"):
        bilstm_by_segments(nn.LSTM(3, 4, batch_first=True), torch.randn(2, 3, 3), torch.tensor([3, 2]))


@pytest.mark.parametrize("min_length", [1, 1000], ids=["unpacked", "packed"])
def test_the_encoder_matches_the_packed_lstm_on_either_path(monkeypatch, min_length):
    from fairseq.data import Dictionary
    from fairseq_acvi.modules.seq2seq import lstm_encoder
    from fairseq_acvi.modules.seq2seq.lstm_encoder import BiLSTMEncoder
    calls = []
    monkeypatch.setattr(lstm_encoder, "UNPACKED_MIN_LENGTH", min_length)
    monkeypatch.setattr(lstm_encoder, "bilstm_by_segments",
                        lambda *a: calls.append(1) or bilstm_by_segments(*a))
    d = Dictionary()
    for w in "abcdefgh":
        d.add_symbol(w)
    torch.manual_seed(1)
    enc = BiLSTMEncoder(d, 6, 5, 2, 0.0, 0.0, embed_tokens=nn.Embedding(len(d), 6, d.pad())).eval()
    src = torch.tensor([[4, 5, 6, 7, 2], [d.pad(), d.pad(), 8, 9, 2]])          # left-padded
    out = enc(src, torch.tensor([5, 3]))
    tokens = out["src_tokens"][0]
    x = enc.embed_tokens(tokens)
    ref, h, c = packed_reference(enc.lstm, x, torch.tensor([5, 3]))
    torch.testing.assert_close(out["encoder_out"][0], ref)
    def merge(state):                      # (2·L, B, H) -> (L, B, 2·H), as the encoder does
        return state.view(2, 2, 2, 5).transpose(1, 2).reshape(2, 2, 10)
    torch.testing.assert_close(out["encoder_final"][0], merge(h))
    torch.testing.assert_close(out["encoder_final_cell"][0], merge(c))
    assert len(calls) == (1 if min_length == 1 else 0)
