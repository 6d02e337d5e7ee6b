"""What the uncertainty study's page keeps (fairseq_acvi/generation/uncertainty_kept.py): the
measures computed from the kept files equal those from the study's own files, the kept files hold
only what the measures read, the ensemble's token arrays are kept once when every seed's are
equal, and a missing input is named before anything is written."""
import gzip
import json

import numpy as np
import pytest

from fairseq_acvi.generation import uncertainty_kept as uk
from fairseq_acvi.generation import uncertainty_measures as um
from test_calibration_measures import HYPS, LOGPROB, MEAN_MI, REFS, _generate_file

METHODS = ("acvi", "soft", "mcdrop")


def _tokens(path, rng, zero_mi=False):
    n = 12
    correct = rng.random(n) < 0.6
    mi = np.zeros(n) if zero_mi else rng.random(n).astype(np.float32)
    np.savez(path, sentence=np.repeat(np.arange(6), 2), confidence=rng.random(n).astype(np.float32),
             correct=correct, gold_logprob=-rng.random(n), entropy=rng.random(n).astype(np.float32),
             expected_entropy=rng.random(n), mutual_information=mi,
             members_mutual_information=np.zeros(n))


def _study(root, seeds=(1, 2), ensemble_equal=True):
    rng = np.random.default_rng(0)
    for s in seeds:
        d = root / f"seed{s}"
        (d / "calibration").mkdir(parents=True)
        for j, m in enumerate(METHODS):
            mi = [x * (1 + j + s) for x in MEAN_MI]
            _generate_file(d / f"{m}_test2016.txt", HYPS, mi, LOGPROB, seconds=2.0 + j)
            _generate_file(d / f"{m}_coco.txt", HYPS[:4], mi[:4], [-5.0, -1.0, -3.0, -0.2],
                           seconds=1.0)
            _tokens(d / "calibration" / f"tokens_{m}.npz", rng, zero_mi=(m == "soft"))
        _tokens(d / "calibration" / "tokens_ensemble.npz",
                np.random.default_rng(7 if ensemble_equal else s))
    _generate_file(root / "ensemble_test2016.txt", HYPS, MEAN_MI, LOGPROB, seconds=9.0)
    _generate_file(root / "ensemble_coco.txt", HYPS[:4], [0.3] * 4, [-5.0] * 4, seconds=4.0)


def _study_args(study, seed):
    """The measures' options on the study's own files (the recipe's measures stage)."""
    d = study / f"seed{seed}"
    args = []
    for m in METHODS + ("ensemble",):
        where = study if m == "ensemble" else d
        args += ["--decoded", f"{m}={where / f'{m}_test2016.txt'}", "--ood", f"{m}={where / f'{m}_coco.txt'}",
                 "--tokens", f"{m}={d / 'calibration' / f'tokens_{m}.npz'}"]
    return args


def _measures(args, refs, out):
    return um.main(args + ["--references", str(refs), "--bootstrap", "50", "--out-dir", str(out)])


def test_the_kept_files_give_the_same_measures(tmp_path):
    study, page = tmp_path / "study", tmp_path / "page"
    _study(study)
    refs = tmp_path / "ref.txt"
    refs.write_text("\n".join(REFS) + "\n")
    assert uk.main(["--study", str(study), "--seeds", "1", "2", "--ensemble", "ensemble",
                    "--out-dir", str(page)]) == 0
    kept = page / "outputs"
    for s in (1, 2):
        a = _measures(_study_args(study, s), refs, tmp_path / f"a{s}")
        b = _measures(uk.measures_args(str(kept), s, list(METHODS), "ensemble"), refs, tmp_path / f"b{s}")
        assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
        assert a["tokens"]["auroc_mutual_information"]["acvi"] is not None    # a real comparison
        assert a["cost"]["mcdrop"]["seconds"] == 4.0
    # only the lines the measures read, and the arrays they read; zeros and unread arrays dropped
    lines = gzip.decompress((kept / "seed1" / "acvi_test2016.txt.gz").read_bytes()).decode().splitlines()
    assert {line.split("-")[0] for line in lines if not line.startswith("20")} == {"H", "US"}
    assert sum("Translated 6 sentences" in line for line in lines) == 1
    with np.load(kept / "seed1" / "tokens_soft.npz") as z:
        assert sorted(z.files) == ["confidence", "correct", "entropy", "sentence"]
        assert z["sentence"].dtype == np.int32
    with np.load(kept / "seed1" / "tokens_acvi.npz") as z:
        assert "mutual_information" in z.files and "gold_logprob" not in z.files
    assert not (kept / "seed1" / "tokens_ensemble.npz").exists()   # one model: kept once


def test_an_ensemble_that_differs_between_seeds_is_kept_per_seed(tmp_path):
    _study(tmp_path / "study", ensemble_equal=False)
    written = uk.keep_study_outputs(str(tmp_path / "study"), [1, 2], list(METHODS),
                                    str(tmp_path / "page"), "ensemble")
    kept = tmp_path / "page" / "outputs"
    assert (kept / "seed1" / "tokens_ensemble.npz").is_file()
    assert (kept / "seed2" / "tokens_ensemble.npz").is_file()
    assert not (kept / "ensemble").exists()
    assert len(written) == 2 * (3 * 3) + 2 + 2      # per seed 3 methods × (2 decodes + tokens)
    args = uk.measures_args(str(kept), 2, list(METHODS), "ensemble")
    assert args[-1] == f"ensemble={kept / 'seed2' / 'tokens_ensemble.npz'}"


def test_a_missing_input_is_named_and_nothing_is_written(tmp_path, capsys):
    _study(tmp_path / "study")
    gone = tmp_path / "study" / "seed2" / "calibration" / "tokens_mcdrop.npz"
    gone.unlink()
    assert uk.main(["--study", str(tmp_path / "study"), "--seeds", "1", "2",
                    "--out-dir", str(tmp_path / "page")]) == 2
    assert str(gone) in capsys.readouterr().err
    assert not (tmp_path / "page").exists()
    with pytest.raises(FileNotFoundError, match="ensemble_coco.txt"):
        (tmp_path / "study" / "ensemble_coco.txt").unlink()
        uk.keep_study_outputs(str(tmp_path / "study"), [1], list(METHODS), str(tmp_path / "p2"),
                              "ensemble")
