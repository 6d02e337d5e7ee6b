"""SIGKILL while a checkpoint is being written: the newest complete checkpoint
loads, and restarting the same command resumes and finishes exactly as an uninterrupted run.

A process kills itself inside a chosen file operation of a chosen save (a write or copy cut after
part of its bytes, a rename or removal just before or after it; ``reliability_zygote.py``), so
that every step of fairseq's save is hit on purpose; the full-size runs add kills by the fork
server at random moments of a save. After each kill every ``*.pt`` file left in the save folder
is loaded weights-only, and the newest complete one is resumed from. This test found that
fairseq's non-atomic copy to checkpoint_last.pt left a truncated file that stopped the restart
(fixed in fairseq_acvi/fairseq_patches.py: :func:`atomic_checkpoint_copies`).
"""
import pytest

import reliability_harness as H

SPEC = {"kind": "mt", "variant": "acvi"}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return H.env(tmp_path_factory.getbasetemp() / "reliability")


def test_kills_inside_checkpoint_copies_and_renames_resume_exactly(env, tmp_path):
    z, data = env
    total, every = 6, 2  # saves at updates 2, 4 and 6 (validation, best and last at 2)
    plan = H.reference_run(z, tmp_path / "ref", SPEC, data, total, every)
    # run 1 dies halfway through copying its 2nd save (update 4) to checkpoint_last.pt; the
    # restart resumes from update 2 and dies a third of the way into writing its 1st save; the
    # third run finishes
    i, op = H.find_op(plan, 2, "copy", "checkpoint_last.pt")
    j, op2 = H.find_op(plan, 2, "write", "checkpoint_1_4.pt")
    kills = [{"inject": {"save": 2, "op": i, "frac": 0.5, "bytes": op["bytes"]}},
             {"inject": {"save": 1, "op": j, "frac": 0.3, "bytes": op2["bytes"]}}]
    res = H.kill_case(z, tmp_path / "kill", SPEC, data, total, every, kills, plan["checkpoint"])
    assert [k["rc"] for k in res["kills"]] == [-9, -9], res
    assert all(k["during_save"] for k in res["kills"])
    assert all(not k["corrupt"] and k["last_ok"] for k in res["kills"]), res["kills"]
    assert [k["last_updates"] for k in res["kills"]] == [2, 2]
    assert [k["newest_complete"] for k in res["kills"]] == [4, 4]  # checkpoint_1_4.pt
    assert res["final_rc"] == 0, res["final_exc"]
    assert not any(res["state"].values()), res["state"]
    # the newest complete checkpoint (update 4, written before the copies) resumes as well
    res2 = H.resume_from(z, tmp_path / "newest", SPEC, data, total, every,
                         res["kills"][1]["newest_file"], plan["checkpoint"])
    assert res2["resumed_at"] == 4 and res2["ok"], res2


@pytest.mark.slow
def test_kill_campaign(env, tmp_path):
    z, data = env
    results = H.kill_campaign(z, tmp_path, data, H.FULL["injected_kills"],
                              H.FULL["timed_kills"])
    bad = [r for r in results if not r["ok"] or not r.get("newest", {"ok": True})["ok"]]
    assert not bad, bad[:3]
