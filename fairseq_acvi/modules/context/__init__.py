"""Context-vector inference variants (docs/method.md §2). Importing registers them."""
from fairseq_acvi.modules.context.base import (  # noqa: F401
    CONTEXT_REGISTRY, DEFAULT_MC_SAMPLES, ContextInference, StepOutput, add_context_args,
    build_context, check_options_apply, check_sample_count, context_class, fill_context_defaults,
    keep_predating_values, register_context, stack_steps,
)
from fairseq_acvi.modules.context import none, soft, acvi, structured, variational, ved  # noqa: F401,E401
from fairseq_acvi.modules.context import pag  # noqa: F401,E402  (pag, rpag: docs/method.md §3.4)
