"""A result page keeps what its figures were computed from, so anyone can re-score them: the kept
test captions of the MSR-VTT captioning page (docs/results/captioning_msrvtt_2026-11-28/captions/),
scored again against the references rebuilt from the real data, give the CIDEr on the page."""
import json
import re
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "data_scripts"))
import prepare_msrvtt as pm  # noqa: E402

from fairseq_acvi.data.video_features import group_references, read_caption_file  # noqa: E402
from fairseq_acvi.metrics.captioning import score_captions  # noqa: E402

PAGE = REPO / "docs" / "results" / "captioning_msrvtt_2026-11-28"


def test_kept_captions_rescore_to_the_figure_on_their_page(shared_data, tmp_path):
    src = shared_data / "msrvtt_1k"
    if not (src / "captions.json").is_file():
        pytest.skip(f"{src} has no captions.json")
    pm.prepare(src, tmp_path / "bin", min_count=3)                 # the page's data: 800/100/100
    refs = group_references(read_caption_file(str(tmp_path / "bin" / "test.tsv")))
    lines = (PAGE / "captions" / "acvi_seed1_test.tsv").read_text(encoding="utf-8").splitlines()
    hyps = dict(line.split("\t", 1) for line in lines)
    assert sorted(hyps) == sorted(refs) and len(hyps) == 100
    cider = score_captions(hyps, refs, metrics=("CIDEr",))["CIDEr"]
    run = json.loads((PAGE / "runs" / "acvi_seed1.json").read_text(encoding="utf-8"))
    assert cider == pytest.approx(run["decodes"]["K10"]["scores"]["test"]["CIDEr"], abs=1e-9)
    page = (PAGE.parent / "captioning_msrvtt_2026-11-28.md").read_text(encoding="utf-8")
    row = re.search(r"^\| `acvi` \| K=10 \(standard decode\) \|.*$", page, re.M).group(0)
    assert f"| {cider:.3f} |" in row, (cider, row)
