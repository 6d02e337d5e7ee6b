"""``--optimizer torch_adam``: fairseq's ``adam`` maths on torch's own fused / multi-tensor kernels.

fairseq's ``adam`` runs apex's FusedAdam when apex is installed and CUDA is up, and otherwise a
Python loop over the parameters (one small kernel per tensor and per operation). apex is not on
the package registry, so without it every ``fairseq-train --optimizer adam`` takes that loop, on
CPU and GPU alike. ``torch_adam`` is the same update: Adam with *decoupled* weight decay, as
fairseq's ``adam`` (and ``torch.optim.AdamW``) applies it, the same options (``--adam-betas``,
``--adam-eps``, ``--weight-decay``, ``--amsgrad``) and the same checkpoint state names
(``step``, ``exp_avg``, ``exp_avg_sq``), run by ``torch.optim.AdamW`` with ``fused=True`` (one
kernel for all parameters; CPU and CUDA) or ``foreach=True`` (``--adam-impl``).

``--fp16`` (fp32 master weights) and ``--amp`` wrap it as they wrap ``adam``.
``--memory-efficient-fp16`` is refused by fairseq for this optimizer: torch would keep the Adam
moments in fp16, where the second moment underflows; use ``--optimizer adam`` for that mode.
"""
import ast
import logging
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, List

import torch
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.optim import FairseqOptimizer, register_optimizer
from omegaconf import II, OmegaConf

logger = logging.getLogger(__name__)

IMPLEMENTATIONS = ChoiceEnum(["auto", "fused", "foreach"])


@dataclass
class TorchAdamConfig(FairseqDataclass):
    adam_betas: Any = field(default="(0.9, 0.999)", metadata={"help": "betas for Adam"})
    adam_eps: float = field(default=1e-8, metadata={"help": "epsilon for Adam"})
    weight_decay: float = field(default=0.0, metadata={"help": "decoupled weight decay"})
    amsgrad: bool = field(default=False, metadata={"help": "the AMSGrad variant"})
    adam_impl: IMPLEMENTATIONS = field(default="auto", metadata={
        "help": "fused: one kernel for all parameters; foreach: multi-tensor ops; auto: fused "
                "where torch supports it for the parameters, else foreach"})
    lr: List[float] = II("optimization.lr")


def parse_betas(value) -> tuple:
    """--adam-betas "(0.9, 0.98)" (or a list from a config) -> (0.9, 0.98), without eval()."""
    if isinstance(value, str):
        try:
            betas = ast.literal_eval(value)
        except (ValueError, SyntaxError) as e:
            raise ValueError(f"--adam-betas: expected two numbers like '(0.9, 0.98)', got {value!r}") from e
    else:
        betas = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
    betas = tuple(betas) if isinstance(betas, (list, tuple)) else (betas,)
    if len(betas) != 2 or not all(isinstance(b, (int, float)) and 0 <= b < 1 for b in betas):
        raise ValueError(f"--adam-betas: expected two numbers in [0, 1), got {value!r}")
    return tuple(float(b) for b in betas)


@register_optimizer("torch_adam", dataclass=TorchAdamConfig)
class TorchAdam(FairseqOptimizer):
    """fairseq's Adam (decoupled weight decay) on ``torch.optim.AdamW(fused=True | foreach=True)``."""

    def __init__(self, cfg: TorchAdamConfig, params):
        super().__init__(cfg)
        params = list(params)
        impl = str(cfg.adam_impl)
        if impl in ("auto", "fused"):
            try:
                self._optimizer = torch.optim.AdamW(params, fused=True, **self.optimizer_config)
                impl = "fused"
            except RuntimeError as e:          # a parameter type / device torch cannot fuse
                if str(cfg.adam_impl) == "fused":
                    raise ValueError(f"--adam-impl fused: {e}") from e
                impl = "foreach"
        if impl == "foreach":
            self._optimizer = torch.optim.AdamW(params, foreach=True, **self.optimizer_config)
        self.implementation = impl
        logger.info(f"torch_adam: torch.optim.AdamW ({impl})")

    @property
    def optimizer_config(self):
        lr = self.cfg.lr[0] if isinstance(self.cfg.lr, Collection) else self.cfg.lr
        return {"lr": lr, "betas": parse_betas(self.cfg.adam_betas), "eps": self.cfg.adam_eps,
                "weight_decay": self.cfg.weight_decay, "amsgrad": bool(self.cfg.amsgrad)}

    @property
    def supports_flat_params(self):
        return True

    @property
    def supports_memory_efficient_fp16(self):
        return False                           # see the module docstring
