"""Every seq2seq and context-inference option has exactly one default:
argparse leaves it None, and the model's SEQ2SEQ_DEFAULTS or the variant's DEFAULTS fill it."""
import argparse

import pytest

from fairseq_acvi.models.lstm_seq2seq import ACVILSTMModel, acvi_lstm_multi30k
from fairseq_acvi.models.pointer_generator import PointerGeneratorModel
from fairseq_acvi.models.seq2seq_base import SEQ2SEQ_DEFAULTS
from fairseq_acvi.modules.context import (CONTEXT_REGISTRY, ContextInference,
                                          fill_context_defaults)


def _parser_defaults(model_cls):
    parser = argparse.ArgumentParser()
    model_cls.add_args(parser)
    return {a.dest: a.default for a in parser._actions if a.dest != "help"}


@pytest.mark.parametrize("model_cls", [ACVILSTMModel, PointerGeneratorModel])
def test_argparse_sets_no_default_and_every_option_gets_exactly_one(model_cls):
    defaults = _parser_defaults(model_cls)
    store_true = {"share_decoder_input_output_embed", "coverage", "no_copy", "pag_force_replan"}
    assert {k: v for k, v in defaults.items() if v is not (False if k in store_true else None)} == {}
    owners = {}
    for source, table in [("SEQ2SEQ_DEFAULTS", SEQ2SEQ_DEFAULTS),
                          ("ContextInference", ContextInference.DEFAULTS),
                          *[(n, c.DEFAULTS) for n, c in CONTEXT_REGISTRY.items()
                            if c.DEFAULTS is not ContextInference.DEFAULTS]]:
        for key in table:
            owners.setdefault(key, set()).add(source)
    shared = {k: s for k, s in owners.items() if len(s) > 1 and s != {"pag", "rpag"}}
    assert shared == {}                                    # rpag inherits pag's DEFAULTS
    args = argparse.Namespace()
    model_cls.fill_defaults(args)
    unset = [k for k in defaults if getattr(args, k, None) is None
             and k not in ("variational_target_dim", "variational_inference_dim",
                           "encoder_dropout_in", "acvi_logvar_bound")]   # None: derived / off
    assert unset == []


def test_variants_built_without_options_equal_those_built_after_the_defaults_are_filled():
    filled = argparse.Namespace(decoder_embed_dim=8, attention_dim=6)
    fill_context_defaults(filled)
    assert filled.context_inference == "soft" and filled.mc_samples == 10
    for name, cls in CONTEXT_REGISTRY.items():
        bare = cls(argparse.Namespace(decoder_embed_dim=8, attention_dim=6), 12, 10, 12)
        full = cls(filled, 12, 10, 12)
        for key in cls.DEFAULTS:
            assert cls.option(argparse.Namespace(), key) == getattr(filled, key), (name, key)
        assert {k: v for k, v in vars(bare).items() if not k.startswith("_")} == \
            {k: v for k, v in vars(full).items() if not k.startswith("_")}, name


def test_an_architecture_override_wins_over_the_variant_default():
    from fairseq_acvi.models.lstm_seq2seq import acvi_lstm_paper
    assert CONTEXT_REGISTRY["acvi"].DEFAULTS["acvi_beta"] == 1e-4
    args = argparse.Namespace(context_inference="acvi")
    acvi_lstm_paper(args)
    assert (args.acvi_beta, args.acvi_kl_delay_updates, args.mc_sampling) == (1.0, 0, "iid")
    explicit = argparse.Namespace(context_inference="acvi", acvi_beta=0.5)
    acvi_lstm_paper(explicit)
    assert explicit.acvi_beta == 0.5
