"""No attention: the context is the empty vector (docs/method.md §2, ``--context-inference none``).

c_t ∈ ℝ⁰ (B, 0): the decoder is otherwise unchanged — the attentional hidden state
tanh(W_c [s_t ; c_t]) = tanh(W_c s_t) is fed to the next step and read by the output layer — so
comparing ``none`` with ``soft`` removes exactly the attention. The encoder still initialises the
decoder (its final states); its annotations are never read. The scorer has no parameters
(:class:`fairseq_acvi.modules.context.scorers.NoScorer`) and no attention weights are reported
(``attn`` None); coverage, which is built on attention weights, is refused.
"""
from fairseq_acvi.modules.context.base import ContextInference, StepOutput, register_context
from fairseq_acvi.modules.context.scorers import NoScorer


@register_context("none")
class NoContext(ContextInference):
    #: no attention weights to normalise
    NORMALIZERS = ("softmax",)
    parallel = True

    def __init__(self, args, value_dim, query_dim, enc_final_dim):
        super().__init__(args, value_dim, query_dim, enc_final_dim)
        self.context_dim = 0

    @classmethod
    def build_scorer(cls, args, query_dim, key_dim, coverage=False):
        if coverage:
            raise ValueError("--context-inference none has no attention: coverage (built on the "
                             "attention weights) needs another context inference")
        return NoScorer(key_dim)

    def step(self, scores, query, mem, prepared, t):
        """query (B, H) -> StepOutput(mean (B, 0), attn None); (B, T, H) -> mean (B, T, 0)."""
        return StepOutput(mean=query.new_zeros(*query.shape[:-1], 0), attn=None)
