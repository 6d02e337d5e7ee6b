"""The pointer-generator's no-copy baseline (``--no-copy``; docs/method.md §3.1, See et al.'s
"baseline"): P(w) = P_vocab(w) over the real ids, probability 0 for the markers <unk-j>, gold
markers scored as <unk>; no copy switch. Unit tests on the toy dictionary of
test_pointer_generator, then train -> checkpoint -> fairseq-generate through the real CLIs."""
import math

import pytest
import torch

from conftest import USER_DIR, run_cli
from test_pointer_generator import (CONFIG_IDS, CONFIGS, _batch, build_model, marker_dictionary,
                                    toy_copy_batch)
from test_summarization_cli import cnndm_bin, train  # noqa: F401  (cnndm_bin: module fixture)

from fairseq_acvi.criterions.elbo import ELBOCriterion

# every variant and mode, with K = 4 samples where the variant samples (acvi; ved ignores it)
NC_CONFIGS = [(v, dict(o, mc_samples=4)) for v, o in CONFIGS]


def nocopy(variant, **opts):
    return build_model(variant, no_copy=True, **opts)


def _unk_mapped(ids, d):
    m = d.index("<unk-0>")
    return ids.masked_fill(ids >= m, d.unk())


def _inputs(model, d):
    """The toy batch with its target y_1..y_T (it holds markers: source OOVs in the summary)."""
    src, lengths, prev = _batch(d)
    target = model.decoder._targets(prev)
    assert (target >= d.index("<unk-0>")).sum() == 3
    return src, lengths, prev, target


# -- parameters -------------------------------------------------------------------------------------
def test_no_copy_model_is_the_copy_model_without_the_switch():
    copy, d = build_model("soft")
    base, _ = nocopy("soft")
    names_copy = {n for n, _ in copy.named_parameters()}
    names_base = {n for n, _ in base.named_parameters()}
    switch = {n for n in names_copy if n.startswith("decoder.head.switch.")}
    assert switch and not hasattr(base.decoder.head, "switch")
    assert names_base == names_copy - switch
    assert base.decoder.head.fc_out.out_features == d.index("<unk-0>")       # real ids only
    with pytest.raises(RuntimeError, match="switch"):                  # different models
        copy.load_state_dict(base.state_dict())


# -- the distribution used for decoding ---------------------------------------------------------------
@pytest.mark.parametrize("variant,opts", NC_CONFIGS, ids=CONFIG_IDS)
def test_distribution_is_p_vocab_over_real_ids_and_zero_on_markers(variant, opts):
    torch.manual_seed(0)
    model, d = nocopy(variant, **opts)
    model.eval()
    m = d.index("<unk-0>")
    src, lengths, prev, _ = _inputs(model, d)
    with torch.no_grad():
        lp, _ = model(src, lengths, prev)
    assert lp.dtype == torch.float32 and lp.shape == (3, 5, len(d))
    assert torch.isfinite(lp[..., :m]).all()
    torch.testing.assert_close(lp[..., :m].exp().sum(-1), torch.ones(3, 5))
    assert torch.equal(lp[..., m:], torch.full_like(lp[..., m:], -math.inf))   # P(marker) = 0
    assert torch.equal(model.get_normalized_probs((lp, {}), log_probs=False)[..., m:],
                       torch.zeros(3, 5, len(d) - m))
    # beam search's incremental path gives the same rows (the mean context: no sampling noise)
    torch.manual_seed(0)
    model, d = nocopy(variant, **dict(opts, mc_samples=0))
    model.eval()
    with torch.no_grad():
        full, _ = model(src, lengths, prev)
        enc = model.encoder(src, lengths)
        state, steps = {}, []
        for t in range(prev.size(1)):
            steps.append(model.decoder(prev[:, : t + 1], enc, incremental_state=state)[0])
    nonpad = prev.ne(d.pad())
    torch.testing.assert_close(torch.cat(steps, 1)[nonpad], full[nonpad], atol=1e-5, rtol=1e-5)
    assert torch.equal(full[..., m:], torch.full_like(full[..., m:], -math.inf))


def test_mean_context_distribution_is_the_vocabulary_softmax():
    """soft attention, one context: log P = log_softmax(V' f_t + b') on the real ids, by hand."""
    torch.manual_seed(0)
    model, d = nocopy("soft", coverage=False)
    model.eval()
    m = d.index("<unk-0>")
    src, lengths, prev, _ = _inputs(model, d)
    dec = model.decoder
    seen = {}
    fc = dec.head.fc_out.forward
    dec.head.fc_out.forward = lambda h: seen.setdefault("logits", fc(h))
    with torch.no_grad():
        lp, _ = model(src, lengths, prev)
    torch.testing.assert_close(lp[..., :m], torch.log_softmax(seen["logits"].squeeze(2), -1))


# -- gold-token scoring: markers are <unk> -----------------------------------------------------------
@pytest.mark.parametrize("variant,opts", NC_CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_target_scoring_is_the_full_distribution_at_the_gold_token_with_markers_as_unk(
        variant, opts, training):
    torch.manual_seed(0)
    model, d = nocopy(variant, **opts)
    model.train(training)
    src, lengths, prev, target = _inputs(model, d)
    mapped = _unk_mapped(target, d)
    with torch.no_grad():
        torch.manual_seed(7)
        full, extra_full = model(src, lengths, prev, target=mapped)
        torch.manual_seed(7)
        _, extra = model(src, lengths, prev, target=target, score_target=True)
    fast = extra["target_lprobs"]
    assert fast.dtype == torch.float32 and fast.shape == target.shape
    assert torch.isfinite(fast).all()
    torch.testing.assert_close(fast, full.gather(-1, mapped.unsqueeze(-1)).squeeze(-1),
                               rtol=1e-5, atol=1e-5)
    is_marker = target >= d.index("<unk-0>")
    torch.testing.assert_close(fast[is_marker], full[is_marker][:, d.unk()], rtol=1e-5, atol=1e-5)
    # the target-dependent terms (variational KL, REINFORCE) see the same mapped target
    assert extra.keys() >= {"losses"} and extra["losses"].keys() == extra_full["losses"].keys()
    for k, (v, _) in extra["losses"].items():
        torch.testing.assert_close(v, extra_full["losses"][k][0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant, opts", [("soft", {}), ("acvi", {"mc_samples": 4}),
                                           ("structured", {}), ("variational", {}),
                                           ("variational", {"variational_mode": "sample"}),
                                           ("ved", {})],
                         ids=["soft", "acvi-K4", "structured", "variational", "variational-sample",
                              "ved"])
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_criterion_scores_gold_markers_as_unk(variant, opts, training):
    """elbo with the summary's marker targets (the decoder's target scoring) = elbo on the full
    output with the targets mapped to <unk> by hand: loss, logged terms, gradients. The full
    output scored at an unmapped marker has probability 0: the criterion refuses the loss."""

    class _T:
        target_dictionary = None
    torch.manual_seed(0)
    model, d = nocopy(variant, **opts)
    _T.target_dictionary = d
    model.train(training)
    src, lengths, prev, target = _inputs(model, d)
    crit = ELBOCriterion(_T())

    def run(score, tgt):
        model.zero_grad()
        model.decoder.head.supports_target_scoring = score
        sample = {"net_input": {"src_tokens": src, "src_lengths": lengths,
                                "prev_output_tokens": prev},
                  "target": tgt, "ntokens": int(tgt.ne(d.pad()).sum()), "nsentences": 3}
        torch.manual_seed(7)
        loss, _, log = crit(model, sample)
        loss.backward()
        return loss.detach(), log, {n: p.grad.clone() for n, p in model.named_parameters()
                                    if p.grad is not None}

    try:
        loss_fast, log_fast, grads_fast = run(True, target)
        loss_full, log_full, grads_full = run(False, _unk_mapped(target, d))
        with pytest.raises(FloatingPointError, match="non-finite"):
            run(False, target)
    finally:
        del model.decoder.head.supports_target_scoring
    torch.testing.assert_close(loss_fast, loss_full, rtol=1e-5, atol=1e-5)
    assert log_fast.keys() == log_full.keys()
    for k in log_full:
        torch.testing.assert_close(torch.as_tensor(log_fast[k]).float(),
                                   torch.as_tensor(log_full[k]).float(), rtol=1e-5, atol=1e-5)
    assert grads_fast.keys() == grads_full.keys() and "decoder.head.fc_out.weight" in grads_fast
    for n in grads_full:
        torch.testing.assert_close(grads_fast[n], grads_full[n], rtol=1e-4, atol=1e-6, msg=n)
    # the gold <unk> gets gradient at the marker positions: the unk row of V' is trained
    assert grads_fast["decoder.head.fc_out.bias"][d.unk()].abs() > 0


# -- no dependence on source marker ids --------------------------------------------------------------
def _renumber(ids, d, shift):
    """Each marker <unk-j> -> <unk-((j + shift) mod N)>: other source positions' markers."""
    m = d.index("<unk-0>")
    n = len(d) - m
    return torch.where(ids >= m, m + (ids - m + shift) % n, ids)


@pytest.mark.parametrize("variant,opts", NC_CONFIGS, ids=CONFIG_IDS)
def test_output_does_not_depend_on_which_marker_a_source_position_holds(variant, opts):
    """Renumbering the markers of the source only (decoder input and gold summary unchanged)
    changes which source positions hold the summary's OOVs <unk-1>, <unk-3>, <unk-0>: the copy
    model's distribution and gold scores change (the check that the test sees a dependence),
    the no-copy model's stay the same."""
    outs = {}
    for no_copy in (True, False):
        torch.manual_seed(0)
        model, d = build_model(variant, no_copy=no_copy, **opts)
        model.eval()
        src, lengths, prev = _batch(d)
        target = model.decoder._targets(prev)
        res = []
        for shift in (0, 2, 3):
            s2 = _renumber(src, d, shift)
            assert shift == 0 or (s2.ne(src).sum() == 6 and s2.ne(d.pad()).equal(src.ne(d.pad())))
            with torch.no_grad():
                torch.manual_seed(3)
                lp, _ = model(s2, lengths, prev)
                torch.manual_seed(3)
                _, extra = model(s2, lengths, prev, target=target, score_target=True)
            res.append((lp, extra["target_lprobs"]))
        outs[no_copy] = res
    (lp0, tl0), *others = outs[True]
    for lp, tl in others:
        torch.testing.assert_close(lp, lp0, rtol=0, atol=1e-6)
        torch.testing.assert_close(tl, tl0, rtol=0, atol=1e-6)
    (clp0, ctl0), *cothers = outs[False]
    for lp, tl in cothers:
        assert not torch.allclose(lp, clp0, atol=1e-3)
        assert not torch.allclose(tl, ctl0, atol=1e-3)


def test_no_copy_learns_to_emit_unk_for_source_oovs():
    """The toy copy task of test_pointer_generator (target = source, mostly markers): the
    baseline cannot copy; it learns <unk> at the OOV positions and the words elsewhere."""
    torch.manual_seed(0)
    d = marker_dictionary(n_words=4, n_markers=6)
    m = d.index("<unk-0>")
    model, _ = nocopy("soft", coverage=False, d=d, encoder_hidden_size=16, decoder_hidden_size=24,
                      attention_dim=16, encoder_embed_dim=12, decoder_embed_dim=12, init_scale=0.0)
    g = torch.Generator().manual_seed(0)

    def batch(B=32):
        return toy_copy_batch(d, g, 0.5, B)

    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    crit = ELBOCriterion(type("T", (), {"target_dictionary": d})())
    model.train()
    for _ in range(120):
        src, lengths, prev, tgt = batch()
        loss, n, _ = crit(model, {"net_input": {"src_tokens": src, "src_lengths": lengths,
                                                "prev_output_tokens": prev},
                                  "target": tgt, "ntokens": tgt.numel(), "nsentences": 32})
        opt.zero_grad()
        (loss / n).backward()
        opt.step()
    model.eval()
    src, lengths, prev, tgt = batch(B=64)
    with torch.no_grad():
        lp, _ = model(src, lengths, prev)
    pred = lp.argmax(-1)
    assert (pred < m).all()                                            # never a marker
    oov = tgt >= m
    assert oov.float().mean() > 0.3
    assert (pred[oov] == d.unk()).float().mean() > 0.9
    assert (pred[~oov] == tgt[~oov]).float().mean() > 0.9


# -- train -> checkpoint -> fairseq-generate through the CLIs -----------------------------------------
def test_cli_no_copy_checkpoint_generates_unk_not_copies(cnndm_bin, tmp_path):
    res = train(cnndm_bin, tmp_path, "--context-inference", "acvi", "--coverage", "--no-copy",
                updates=25, src_pos=61, tgt_pos=21)
    text = res.stdout + res.stderr
    assert "no_copy=True" in text or "'no_copy': True" in text, text[-3000:]
    ckpt = tmp_path / "checkpoint_last.pt"
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    assert state["cfg"]["model"].no_copy is True                        # fairseq-generate reads it
    assert not any(k.startswith("decoder.head.switch.") for k in state["model"])

    gen = run_cli("fairseq_cli.generate", cnndm_bin, "--user-dir", USER_DIR, "--path", ckpt,
                  "--task", "pointer_summarization", "--source-lang", "src", "--target-lang", "tgt",
                  "--gen-subset", "test", "--beam", "5", "--batch-size", "4",
                  "--max-len-a", "0", "--max-len-b", "15", "--min-len", "3",
                  "--model-overrides", "{'mc_samples': 3}")
    hyps = [ln.split("\t")[2].split() for ln in gen.stdout.splitlines() if ln.startswith("H-")]
    refs = [ln.split("\t")[1].split() for ln in gen.stdout.splitlines() if ln.startswith("T-")]
    assert len(hyps) == 6, gen.stdout[-2000:]
    assert any(t.startswith("<unk-") for r in refs for t in r)         # copyable OOVs in the gold
    assert not any(t.startswith("<unk-") for h in hyps for t in h)      # never copied
    assert any(t == "<unk>" for h in hyps for t in h), hyps             # OOVs come out as <unk>
    (tmp_path / "gen.out").write_text(gen.stdout)
    run_cli("data_scripts.restore_oov", "--src", cnndm_bin / "test.article",
            "--hyp", tmp_path / "gen.out", "--out", tmp_path / "hyp.txt")
    vocab = {ln.split(" ")[0] for ln in (cnndm_bin / "dict.src.txt").read_text().splitlines()}
    for h in (tmp_path / "hyp.txt").read_text().splitlines():
        assert all(t in vocab or t == "<unk>" for t in h.split()), h   # no source-only word
