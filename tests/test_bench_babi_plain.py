"""The plain-PyTorch MemN2N of benchmarks/bench_babi.py computes what the plugin's memn2n computes.

The speed target "fairseq update / plain loop of the same model ≤ 1.5×" is only meaningful if the
plain model is the same model: with the plugin's weights copied in, both give the same answer
log-probabilities on real bAbI batches, for both tyings and both empty-memory treatments.
"""
import os
import sys

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
import bench_babi  # noqa: E402

from fairseq_acvi.models.memn2n import MemN2NConfig, MemN2NModel  # noqa: E402
from fairseq_acvi.tasks.babi_qa import BabiQAConfig, BabiQATask  # noqa: E402


@pytest.mark.parametrize("tying,empty", [("adjacent", "attend"), ("layerwise", "mask"),
                                         ("adjacent", "mask"), ("layerwise", "attend")])
def test_plain_model_matches_plugin(shared_data, tying, empty):
    folder = shared_data / "babi" / "tasks_1-20_v1-2" / "en"
    task = BabiQATask.setup_task(BabiQAConfig(data=str(folder), babi_tasks="2"))
    task.load_dataset("test")
    torch.manual_seed(0)
    model = MemN2NModel.build_model(MemN2NConfig(embed_dim=12, tying=tying, empty_memories=empty,
                                                 random_noise=0.0), task).eval()
    plain = bench_babi.plain_from_plugin(model)
    batch = task.datasets["test"].collater(list(range(0, 200, 5)))["net_input"]
    with torch.no_grad():
        ours, _ = model(**batch)
        theirs = plain(batch["story"], batch["query"])
    assert ours.shape == theirs.shape == (40, len(task.dictionary))
    torch.testing.assert_close(theirs, ours, atol=2e-5, rtol=1e-5)
    # and the check has teeth: a different hop count changes the answer distribution
    plain.hops = model.hops - 1
    with torch.no_grad():
        assert (plain(batch["story"], batch["query"]) - ours).abs().max() > 1e-3
