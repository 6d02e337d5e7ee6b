"""The probe of docs/results/gpu_checks_2026-11-29/README.md (run on the H200): does TorchInductor with
``fallback_random`` draw the same exponential numbers (the Gumbel noise of F.gumbel_softmax) as eager?"""
import torch, torch._inductor.config as ic
x = torch.zeros(4, 5, device="cuda")
f = lambda x: torch.empty_like(x).exponential_() + x
torch.manual_seed(0); e = f(x)
with ic.patch(fallback_random=True):
    g = torch.compile(f)
    torch.manual_seed(0); c = g(x)
print("exponential_ eager == compiled(fallback_random):", torch.allclose(e, c), (e - c).abs().max().item())
