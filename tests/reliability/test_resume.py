"""A run stopped and resumed from checkpoint_last.pt trains exactly as one that
was not (tests/reliability/reliability_harness.py: :func:`resume_case`).

N updates in one run against N/2, stop, resume (the same command with the larger --max-update),
N/2 more, the same seed: parameters, optimizer moments, the iterator's position and the lr
schedule of the final checkpoints bit for bit; for every update the sample ids (data order), a
digest of torch's RNG state as each batch's forward starts (the ACVI noise, the escort draws and
the CPU kernel's seed all come from it), each batch's loss, the logged loss, and the modules'
schedule counters (KL delay / warm-up, VED annealing, MemN2N's linear start); fairseq's own
per-update log lines as well. Fast cases: ACVI translation stopped at the end of an epoch,
t-MEM-NN stopped inside its second epoch, and --patience; every other variant briefly under
``slow``. These tests found three ways in which fairseq resumed differently, fixed in
fairseq_acvi/fairseq_patches.py: a run resumed in epoch 2 or later trained on other batches
(:func:`resume_with_the_same_batches`), one resumed from an end-of-epoch checkpoint skipped the
scheduler's end-of-epoch step (:func:`replay_epoch_end_lr_step`), and --patience forgot its count
(:func:`keep_patience_across_resumes`).
"""
import pytest

import reliability_harness as H


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return H.env(tmp_path_factory.getbasetemp() / "reliability")


def check(res):
    assert res["rc"] == [0, 0, 0], res.get("error")
    assert res["resumed_at"] == res["stop"], res
    assert not any(res["updates"].values()), res["updates"]
    assert not res["logged"], f"fairseq's logged losses differ at updates {res['logged']}"
    assert not any(res["state"].values()), res["state"]
    assert res["ok"]


@pytest.mark.parametrize("spec,total,stop", [
    # translation: 6 updates per epoch at --max-tokens 400; the stop is the end of epoch 1 and
    # the run ends inside epoch 2. A resume in a later epoch rebuilt fairseq's batches
    # (fairseq_patches.resume_with_the_same_batches); a resume from an end-of-epoch checkpoint skipped the
    # scheduler's end-of-epoch step (fairseq_patches.replay_epoch_end_lr_step). The lr warm-up and the
    # ACVI KL delay / warm-up are counted in updates.
    ({"kind": "mt", "variant": "acvi"}, 10, 6),
    # bAbI: 54 training questions in batches of 8 = 7 updates per epoch; linear start (softmax
    # off) for 2 epochs: the stop lies inside epoch 2, the resumed half crosses into epoch 3
    ({"kind": "babi", "arch": "t_memn2n", "linear_start": 2}, 16, 9),
])
def test_resume_equals_an_uninterrupted_run(env, tmp_path, spec, total, stop):
    z, data = env
    res = H.resume_case(z, tmp_path, spec, data, total, stop)
    check(res)
    # the comparison covered changing state: the schedule counters and the epoch move after the stop
    recs = H.probe_updates(H.read_jsonl(tmp_path / "part2.probe"))
    counters = [tuple(sorted(recs[u]["counters"].items())) for u in sorted(recs)]
    assert len(set(counters)) > 1, counters
    if spec["kind"] == "babi":
        ls = [v for u in sorted(recs) for k, v in recs[u]["counters"].items()
              if k.endswith("linear_start")]
        assert True in ls and False in ls, "the resumed half must cross the end of linear start"


def test_patience_counts_across_a_resume(env, tmp_path):
    """--patience 2 with a learning rate of 0 (every validation loss equal, none better): the
    uninterrupted run stops after epoch 3 (update 18); a run stopped at the end of epoch 1 and
    resumed must stop there too (it trained to update 24 before fairseq_patches.keep_patience_across_resumes:
    its count of validations without improvement started again from zero)."""
    z, data = env
    spec = {"kind": "mt", "variant": "soft", "schedules": False,
            "extra": ["--lr", "0", "--patience", "2", "--dropout", "0"]}
    res = H.resume_case(z, tmp_path, spec, data, 30, 6)
    assert res["last_update"] == [18, 18], res
    check(res)


def test_rerunning_a_finished_run_changes_nothing(env, tmp_path):
    """The same command again after the run reached --max-update: nothing is trained (fairseq
    trained one update more and overwrote checkpoint_last.pt before
    fairseq_patches.no_update_past_max_update)."""
    z, data = env
    argv = H.spec_args({"kind": "mt", "variant": "acvi"}, data) + H.common_args(tmp_path / "ck", 2)
    runs = [z.run([H.job("train", argv, tmp_path / f"run{i}.log",
                         probe=tmp_path / f"{i}.probe")])[0] for i in range(2)]
    assert [r["rc"] for r in runs] == [0, 0], runs
    assert len(H.read_jsonl(tmp_path / "0.probe")) == 2 and not H.read_jsonl(tmp_path / "1.probe")
    assert "training is complete, nothing to do" in (tmp_path / "run1.log").read_text()
    assert H.checkpoint_updates(H.load_checkpoint(tmp_path / "ck" / "checkpoint_last.pt")) == 2


@pytest.mark.slow
@pytest.mark.parametrize("variant", [v for v in H.VARIANTS if v != "acvi"] + ["memn2n"])
def test_resume_other_variants_briefly(env, tmp_path, variant):
    z, data = env
    spec = ({"kind": "babi", "arch": "memn2n"} if variant == "memn2n"
            else {"kind": "mt", "variant": variant})
    n = H.FULL["resume_brief_updates"]
    check(H.resume_case(z, tmp_path, spec, data, n, n // 2 + 1))


@pytest.mark.slow
@pytest.mark.parametrize("spec", [{"kind": "mt", "variant": "acvi"},
                                  {"kind": "babi", "arch": "t_memn2n"}])
def test_resume_full_size(env, tmp_path, spec):
    z, data = env
    n = H.FULL["resume_updates"]
    check(H.resume_case(z, tmp_path, spec, data, n, n // 2 + 3))
