"""The bAbI report command: train → select by validation → test → markdown/PNG.

A tiny budget (a few updates) on the real tasks 1-2: the numbers are not good, but the report's
bookkeeping is checked against the JSON it writes — best run by validation, passed/mean rows,
the β each setup used, resuming without retraining, and the per-hop attention section.
"""
import json
import math
import re

import pytest
import torch

from fairseq_acvi.babi_eval.build import make_model, make_task
from fairseq_acvi.babi_eval.checkpoint import args_from_state
from fairseq_acvi.babi_eval.evaluate import predict
from fairseq_acvi.babi_eval.render import collect, selection_table, table
from fairseq_acvi.babi_eval.results import data_variant, load_json
from fairseq_acvi.babi_eval.selection import merge_dirs, merge_results, merge_sources, selection_key
from fairseq_acvi.cli import babi_report


def _summary(md: str, setup_title: str):
    """(passed, mean) of the 'ours' columns in one setup's table of babi_report.md."""
    section = md.split(f"## {setup_title}")[1].split("\n## ")[0]
    passed = re.search(r"^\| \*\*passed.*$", section, re.M).group(0).split("|")[2:-1]
    mean = re.search(r"^\| \*\*mean\*\*.*$", section, re.M).group(0).split("|")[2:-1]
    ours = [1, 3, 5]                      # (pub., ours) pairs: MemN2N, S=1, S=10
    return [int(passed[i]) for i in ours], [float(mean[i]) for i in ours]


def test_report_end_to_end(tmp_path, shared_data):
    folder = shared_data / "babi" / "tasks_1-20_v1-2" / "en"
    out = tmp_path / "rep"
    argv = ["--data", str(folder), "--out-dir", str(out), "--tasks", "1,2",
            "--setups", "single,joint", "--seeds", "2", "--t-seeds", "1", "--joint-seeds", "1",
            "--epochs", "3",
            "--batches-per-epoch", "4", "--joint-epochs", "1", "--joint-batch-size", "300",
            "--tying", "adjacent", "--empty-memories", "attend", "--random-noise", "0",
            "--t-divergence", "tied", "--divergence-weight", "0.01",
            "--joint-divergence-weight", "0.5", "--embed-dim", "8", "--t-embed-dim", "10", "--joint-embed-dim", "12",
            "--attention", "1:0"]
    babi_report.main(argv)

    single = json.loads((out / "results_single.json").read_text())
    joint = json.loads((out / "results_joint.json").read_text())
    assert set(single) == {"memn2n|1", "t_memn2n|1", "memn2n|2", "t_memn2n|2"}
    assert set(joint) == {"memn2n|1,2", "t_memn2n|1,2"}
    assert [len(info["runs"]) for info in joint.values()] == [1, 1]          # --joint-seeds
    for key, info in single.items():
        runs = info["runs"]
        assert len(runs) == (2 if key.startswith("memn2n") else 1)
        # best of N by validation accuracy, then validation NLL, then the lower seed
        best = max(runs, key=lambda r: (r["valid"], -r["valid_nll"], -r["seed"]))
        assert info["seed"] == best["seed"] and info["valid"] == best["valid"]
        assert info["valid_nll"] == best["valid_nll"] > 0
        assert 1 <= info["best_epoch"] <= 3
        for accs in info["test"].values():
            assert all(0.0 <= a <= 100.0 for a in accs.values())
        # every run's test accuracy is recorded; the chosen run's is the report's
        assert all(set(r["test"]) == set(info["test"]) for r in runs)
        assert info["test"] == next(r["test"] for r in runs if r["seed"] == info["seed"])
    # each setup's t-MEM-NN trained with its own β
    assert single["t_memn2n|1"]["divergence_weight"] == 0.01
    assert joint["t_memn2n|1,2"]["divergence_weight"] == 0.5
    assert set(joint["t_memn2n|1,2"]["test"]["t_memn2n_S10"]) == {"1", "2"}
    assert set(single["t_memn2n|2"]["nu"]) == {"E0", "E1", "E2", "E3"}
    assert {single[f"memn2n|{t}"]["embed_dim"] for t in (1, 2)} == {8}
    assert {single[f"t_memn2n|{t}"]["embed_dim"] for t in (1, 2)} == {10}
    assert {i["embed_dim"] for i in joint.values()} == {12}
    # ... and the saved models have those sizes, and carry them with their other options (the
    # attention section below rebuilds them)
    ck = out / "ckpt"
    for name, param, dim in (("single_memn2n_1", "emb.E0", 8),
                             ("single_t_memn2n_1", "posterior.mu", 10),
                             ("joint_t_memn2n_1-2", "posterior.mu", 12)):
        saved = torch.load(ck / f"{name}.pt", weights_only=True)
        assert saved["model"][param].shape[-1] == dim
        assert saved["options"]["embed_dim"] == dim
        assert (saved["options"]["tying"], saved["options"]["random_noise"]) == ("adjacent", 0.0)

    md = (out / "babi_report.md").read_text()
    for title, res in [("Single-task training", single), ("Joint training", joint)]:
        cols = collect(res)
        passed, mean = _summary(md, title)
        for i, c in enumerate(["memn2n", "t_memn2n_S1", "t_memn2n_S10"]):
            accs = [cols[c][t] for t in (1, 2)]
            assert passed[i] == sum(a >= 95 for a in accs)
            assert mean[i] == pytest.approx(sum(accs) / 2, abs=0.051)
    # the published figures sit beside ours (task 2: 84 / 77 / 84 single, 86 / 61 / 79 joint)
    assert re.search(r"\| 2: two supporting facts \| 84 \| [\d.]+ \| 77 \| [\d.]+ \| 84 \|", md)
    assert re.search(r"\| 2: two supporting facts \| 86 \| [\d.]+ \| 61 \| [\d.]+ \| 79 \|", md)
    assert "β=0.01 (joint: 0.5)" in md
    # the selection table: chosen runs of the single setup (2 tasks) per column
    chosen = [single[f"memn2n|{t}"]["test"]["memn2n"][str(t)] for t in (1, 2)]
    assert re.search(r"^\| MemN2N \(2 tasks\) \| %d / %.1f \|" % (
        sum(a >= 95 for a in chosen), sum(chosen) / 2), md, re.M)
    # t-MEM-NN's uncertainty of its S = 10 answers over right and wrong ones (docs/uncertainty.md)
    for res in (single, joint):
        for key, info in res.items():
            if key.startswith("memn2n"):
                assert "test_uncertainty" not in info
                continue
            rows = info["test_uncertainty"]["t_memn2n_S10"]
            for t, acc in info["test"]["t_memn2n_S10"].items():
                r = rows[t]
                assert 100.0 * r["right"]["n"] / (r["right"]["n"] + r["wrong"]["n"]) == \
                    pytest.approx(acc)
                for part in ("right", "wrong"):
                    if r[part]["n"]:
                        assert r[part]["entropy"] >= r[part]["expected_entropy"] >= 0
                        assert r[part]["mutual_information"] >= 0
            assert sum(rows["all"][p]["n"] for p in ("right", "wrong")) == \
                sum(rows[t][p]["n"] for t in info["test"]["t_memn2n_S10"] for p in ("right", "wrong"))
    assert md.count("What the posterior draws know (t-MEM-NN, S = 10)") == 2
    assert len(re.findall(r"^\| \*\*all questions\*\* \| \d+ / \d+ \|", md, re.M)) == 2
    # per-hop attention for task 1, test question 0, with the data's supporting fact
    att = md.split("### Task 1, test question 0")[1]
    assert "supporting facts:" in att.split("\n\n")[2]
    assert len(re.findall(r"^\| (MemN2N|t-MEM-NN S=1|t-MEM-NN S=10) \|", att, re.M)) == 3
    for png in ("babi_accuracy_single.png", "babi_accuracy_joint.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # a second call resumes: nothing is retrained, the results are kept as they are
    ckpt = out / "ckpt" / "single_t_memn2n_1.pt"
    mtime = ckpt.stat().st_mtime_ns
    babi_report.main(argv)
    assert json.loads((out / "results_single.json").read_text()) == single
    assert ckpt.stat().st_mtime_ns == mtime


def test_more_seeds_then_merge_equals_one_best_of_n(tmp_path, shared_data):
    """--first-seed + --merge: seeds 1-2 and 3 trained apart, then merged, choose the run (and
    report the test accuracy and checkpoint) that one best-of-3 run chooses; training is
    deterministic per seed."""
    folder = shared_data / "babi" / "tasks_1-20_v1-2" / "en"
    common = ["--data", str(folder), "--tasks", "2", "--setups", "single", "--models", "memn2n",
              "--epochs", "2", "--batches-per-epoch", "3", "--embed-dim", "6",
              "--random-noise", "0", "--attention", ""]
    babi_report.main(common + ["--out-dir", str(tmp_path / "all"), "--seeds", "3"])
    babi_report.main(common + ["--out-dir", str(tmp_path / "a"), "--seeds", "2"])
    babi_report.main(common + ["--out-dir", str(tmp_path / "b"), "--seeds", "1", "--first-seed", "3"])
    assert [r["seed"] for r in json.loads((tmp_path / "b" / "results_single.json").read_text())
            ["memn2n|2"]["runs"]] == [3]
    babi_report.main(common + ["--out-dir", str(tmp_path / "m"),
                               "--merge", str(tmp_path / "a"), str(tmp_path / "b")])
    one = json.loads((tmp_path / "all" / "results_single.json").read_text())["memn2n|2"]
    merged = json.loads((tmp_path / "m" / "results_single.json").read_text())["memn2n|2"]
    assert [r["seed"] for r in merged["runs"]] == [1, 2, 3]
    assert [r["valid"] for r in merged["runs"]] == [r["valid"] for r in one["runs"]]
    assert (merged["seed"], merged["valid"], merged["test"]) == (one["seed"], one["valid"], one["test"])
    ck_one = torch.load(tmp_path / "all" / "ckpt" / "single_memn2n_2.pt", weights_only=True)
    ck_merged = torch.load(tmp_path / "m" / "ckpt" / "single_memn2n_2.pt", weights_only=True)
    assert all(torch.equal(ck_one["model"][k], ck_merged["model"][k]) for k in ck_one["model"])
    assert ck_one["options"] == ck_merged["options"]
    md = (tmp_path / "m" / "babi_report.md").read_text()
    assert "MemN2N: best of 3 runs per task by validation (seeds 1-3), δ 6" in md
    # the merging command's own --seeds (1 here) does not describe the merged runs
    assert "best of 1 seed(s)" not in md and "not trained by this command" in md
    assert "best of 2 seed(s)" in (tmp_path / "a" / "babi_report.md").read_text()
    # every run records its options, so the merged report states the runs' own, not the merge's
    assert "the options each section's runs were trained with are its first line" in md
    assert re.search(r"MemN2N: best of 3 runs per task .*; optimizer \w+, lr [\d.]+ halved every "
                     r"\d+ epochs, 2 epochs, clip [\d.]+, 3 hops, \w+ tying, empty memories `\w+`, "
                     r"random noise 0\.0, linear start \d+ epochs", md), md[:1500]


def test_runs_line_states_recorded_options_and_says_when_they_differ_or_are_missing():
    from fairseq_acvi.babi_eval.render import recorded_protocols, runs_line
    proto = {"optimizer": "adam", "lr": 0.01, "epochs": 100, "anneal_every": 25, "clip_norm": 40.0,
             "hops": 3, "tying": "adjacent", "empty_memories": "attend", "random_noise": 0.1,
             "linear_start_epochs": 20}
    run = {"seed": 1, "valid": 90.0, "embed_dim": 50, "protocol": proto}
    same = {"memn2n|1": {"runs": [run, dict(run, seed=2)]}}
    assert recorded_protocols(same, "memn2n") == [proto]
    assert ("optimizer adam, lr 0.01 halved every 25 epochs, 100 epochs, clip 40.0, 3 hops, "
            "adjacent tying, empty memories `attend`, random noise 0.1, linear start 20 epochs"
            in runs_line(same))
    other = {"memn2n|1": {"runs": [run, dict(run, seed=2, protocol=dict(proto, lr=0.02))]}}
    assert "the runs were trained with different options (lr)" in runs_line(other)
    old = {"memn2n|1": {"runs": [run, {"seed": 2, "valid": 80.0, "embed_dim": 50}]}}
    assert recorded_protocols(old, "memn2n") is None and "optimizer" not in runs_line(old)


def test_merge_takes_results_files_and_reproduces_the_published_best_of_20_table(tmp_path):
    """--merge also takes results_<setup>*.json files: the results files of the 2026-11-24
    random-noise protocol (seeds 1-10 and 11-20 of both models, and the joint runs; copies of
    docs/results/babi_2026-11-24_random-noise/ in tests/fixtures/) merge into the best-of-20 table
    of docs/results/babi.md; an entry that is neither a folder nor such a file is refused, and so is a
    folder without results files."""
    from conftest import REPO
    runs = REPO / "tests" / "fixtures" / "babi_2026-11-24_random-noise"
    files = [runs / f for f in ("results_single_rn0.1_seeds1-10.json",
                                "results_single_t_memn2n_rn0.1_seeds11-20.json",
                                "results_single_memn2n_rn0.1_seeds11-20.json",
                                "results_joint_rn0.1.json")]
    sources = merge_sources([str(f) for f in files])
    assert [len(sources["single"]), len(sources["joint"])] == [3, 1]
    out = tmp_path / "m"
    merge_dirs([str(f) for f in files], str(out))
    single = json.loads((out / "results_single.json").read_text())
    assert all(len(v["runs"]) == 20 for v in single.values()) and len(single) == 40
    for arch, col, passed, mean in (("t_memn2n", "t_memn2n_S10", 9, 86.3),
                                    ("memn2n", "memn2n", 9, 86.9)):
        acc = [single[f"{arch}|{t}"]["test"][col][str(t)] for t in range(1, 21)]
        assert sum(a >= 95 for a in acc) == passed and round(sum(acc) / 20, 1) == mean
    assert single["t_memn2n|4"]["seed"] == 20           # the 4-way validation tie, by NLL
    joint = json.loads((out / "results_joint.json").read_text())
    assert {k.split("|")[0] for k in joint} == {"memn2n", "t_memn2n"}
    with pytest.raises(ValueError, match="neither an --out-dir folder nor"):
        merge_sources([str(runs / "README.md")])
    (tmp_path / "empty").mkdir()                      # e.g. a run that never finished
    with pytest.raises(ValueError, match="folder .*empty.* holds neither results_single"):
        merge_sources([str(files[0]), str(tmp_path / "empty")])


def test_merge_results_picks_best_and_refuses_overlapping_seeds():
    def info(seeds_valid, test):
        runs = [{"seed": s, "valid": v} for s, v in seeds_valid]
        best = max(runs, key=lambda r: (r["valid"], -r["seed"]))
        return {**best, "test": test, "runs": runs}

    a = {"m|1": info([(1, 80.0), (2, 90.0)], "a"), "m|2": info([(1, 70.0)], "a2")}
    b = {"m|1": info([(3, 90.0), (4, 85.0)], "b"), "m|2": info([(2, 71.0)], "b2")}
    m = merge_results([a, b])
    assert (m["m|1"]["seed"], m["m|1"]["test"], m["m|1"]["from_part"]) == (2, "a", 0)  # tie: lower seed
    assert (m["m|2"]["seed"], m["m|2"]["test"], m["m|2"]["from_part"]) == (2, "b2", 1)
    assert [r["seed"] for r in m["m|1"]["runs"]] == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="seed\\(s\\) \\[2\\]"):
        merge_results([a, {"m|1": info([(2, 95.0)], "c")}])


def test_selection_breaks_accuracy_ties_by_validation_nll():
    """Equal validation accuracy (common on 100 questions): the lower NLL wins, then the lower
    seed; runs recorded without an NLL are not merged with runs that have one."""
    def info(seed, valid, nll=None):
        r = {"seed": seed, "valid": valid, "test": f"t{seed}"}
        if nll is not None:
            r["valid_nll"] = nll
        return {**r, "runs": [dict(r)]}

    key = selection_key
    assert max([info(1, 90.0, 0.30), info(2, 90.0, 0.20), info(3, 89.0, 0.01)], key=key)["seed"] == 2
    assert max([info(1, 90.0, 0.20), info(2, 90.0, 0.20)], key=key)["seed"] == 1
    assert max([info(1, 90.0, 0.30), info(2, 91.0, 0.90)], key=key)["seed"] == 2
    m = merge_results([{"m|1": info(1, 90.0, 0.3)}, {"m|1": info(2, 90.0, 0.1)}])
    assert (m["m|1"]["seed"], m["m|1"]["from_part"]) == (2, 1)
    with pytest.raises(ValueError, match="validation NLL"):
        merge_results([{"m|1": info(1, 90.0)}, {"m|1": info(2, 90.0, 0.1)}])


@pytest.mark.parametrize("arch", ["memn2n", "t_memn2n"])
@pytest.mark.parametrize("tying,noise", [("adjacent", 0.0), ("layerwise", 0.1), ("layerwise", 0.0)])
def test_saved_models_are_rebuilt_with_their_own_options(shared_data, arch, tying, noise):
    """Legacy checkpoints (plain state dicts, written before checkpoints carried their options):
    --render-only / --merge rebuild each chosen model from its weights even when the command
    line's --embed-dim / --tying / --random-noise differ from the run's."""
    import argparse
    folder = shared_data / "babi" / "tasks_1-20_v1-2" / "en"
    args = babi_report.build_parser().parse_args(["--data", str(folder)])
    task = make_task(str(folder), "1")
    trained = copy_args(args, embed_dim=7, tying=tying, random_noise=noise)
    model, _ = make_model(task, arch, trained)
    state = model.state_dict()
    other = copy_args(args, embed_dim=20, tying="adjacent" if tying == "layerwise" else "layerwise",
                      random_noise=0.1 if noise == 0 else 0.0)
    rebuilt = args_from_state(other, state, task.cfg.memory_size)
    assert (rebuilt.embed_dim, rebuilt.tying) == (7, tying)
    assert rebuilt.random_noise == pytest.approx(noise)
    make_model(task, arch, rebuilt)[0].load_state_dict(state)       # fits
    with pytest.raises(RuntimeError):
        make_model(task, arch, other)[0].load_state_dict(state)     # the trap it avoids
    assert isinstance(rebuilt, argparse.Namespace)


def _trained_and_other_args(folder, arch):
    """The options a model was trained with, and a command line that differs in every model
    option (t-MEM-NN: also its sampler, prior and σ)."""
    args = babi_report.build_parser().parse_args(["--data", str(folder)])
    trained = copy_args(args, embed_dim=7, hops=2, tying="adjacent", random_noise=0.1,
                        empty_memories="attend", linear_start_epochs=3, prior_dof=5.0,
                        escort_sampler="gamma", sigma_init=0.05)
    other = copy_args(args, embed_dim=9, hops=3, tying="layerwise", random_noise=0.0,
                      empty_memories="mask", linear_start_epochs=0, prior_dof=10.0,
                      escort_sampler="polar", sigma_init=0.01)
    return trained, other


@pytest.mark.parametrize("arch", ["memn2n", "t_memn2n"])
def test_checkpoint_carries_its_options_and_round_trips(tmp_path, shared_data, arch):
    """A checkpoint is {"model": state dict, "options": plain values}: it loads with
    weights_only=True and rebuilds the model it saved, with the same predictions (t-MEM-NN: the
    same seeded draws, so the same escort sampler), whatever the command line says."""
    import dataclasses

    from fairseq_acvi.babi_eval.build import model_options
    from fairseq_acvi.babi_eval.checkpoint import load_model, save_checkpoint
    folder = shared_data / "babi" / "tasks_1-20_v1-2" / "en"
    task = make_task(str(folder), "1")
    trained, other = _trained_and_other_args(folder, arch)
    torch.manual_seed(5)
    model, _ = make_model(task, arch, trained)
    path = tmp_path / "single_x_1.pt"
    save_checkpoint(str(path), model, model_options(arch, trained))
    saved = torch.load(path, weights_only=True)
    assert set(saved) == {"model", "options"}
    assert json.loads(json.dumps(saved["options"])) == saved["options"]    # plain values only
    assert saved["options"]["arch"] == arch and saved["options"]["hops"] == 2
    torch.manual_seed(6)                                  # another initialisation, overwritten
    rebuilt = load_model(str(path), task, arch, other)
    fields = dataclasses.asdict(model.cfg)
    assert dataclasses.asdict(rebuilt.cfg) == fields
    va = task.datasets["valid"]
    samples = 3 if arch == "t_memn2n" else None
    p0, lp0 = predict(model, va, samples, with_log_probs=True)
    p1, lp1 = predict(rebuilt, va, samples, with_log_probs=True)
    assert torch.equal(p0, p1) and torch.equal(lp0, lp1)
    with pytest.raises(ValueError, match="holds a"):
        load_model(str(path), task, "t_memn2n" if arch == "memn2n" else "memn2n", other)


@pytest.mark.parametrize("arch", ["memn2n", "t_memn2n"])
def test_legacy_plain_state_dict_checkpoint_still_loads(tmp_path, shared_data, arch):
    """An old-format checkpoint (a bare state dict, as ckpt/ held before 2026-11-26) loads
    through the legacy path: δ, tying and random noise from its weights, the rest from the
    command line; predictions as the saved model's. Options the weights cannot tell and the
    command line gets wrong (--hops) are refused with a message naming them."""
    from fairseq_acvi.babi_eval.checkpoint import load_model, read_checkpoint
    folder = shared_data / "babi" / "tasks_1-20_v1-2" / "en"
    task = make_task(str(folder), "1")
    trained, other = _trained_and_other_args(folder, arch)
    model, _ = make_model(task, arch, trained)
    path = tmp_path / "single_x_1.pt"
    torch.save(model.state_dict(), path)                             # the old format
    assert read_checkpoint(str(path))[1] is None
    # the command line agrees on what the weights cannot tell (hops, empty memories, sampler)
    cmdline = copy_args(other, hops=2, empty_memories="attend", escort_sampler="gamma",
                        prior_dof=5.0)
    rebuilt = load_model(str(path), task, arch, cmdline)
    assert (rebuilt.dim, rebuilt.tying, rebuilt.random_noise) == (7, "adjacent", 0.1)
    va = task.datasets["valid"]
    samples = 3 if arch == "t_memn2n" else None
    assert torch.equal(predict(model, va, samples, with_log_probs=True)[1],
                       predict(rebuilt, va, samples, with_log_probs=True)[1])
    with pytest.raises(ValueError, match="does not fit the model options given \\(--hops 3\\)"):
        load_model(str(path), task, arch, copy_args(cmdline, hops=3))


def copy_args(args, **kw):
    import copy
    new = copy.copy(args)
    for k, v in kw.items():
        setattr(new, k, v)
    return new


def test_validation_leaves_the_training_random_stream_alone(shared_data):
    """Evaluating between epochs must not reseed the global RNG: it once did (manual_seed(0)
    in predict), so every epoch after the first validation replayed the same batch order and,
    for t-MEM-NN, the same escort draws. The draws themselves stay reproducible."""
    folder = shared_data / "babi" / "tasks_1-20_v1-2" / "en"
    args = babi_report.build_parser().parse_args(["--data", str(folder), "--embed-dim", "6"])
    task = make_task(str(folder), "1")
    model, _ = make_model(task, "t_memn2n", args)
    va = task.datasets["valid"]
    torch.manual_seed(123)
    state = torch.get_rng_state()
    first = predict(model, va, samples=3)
    assert torch.equal(torch.get_rng_state(), state)
    order_a = torch.randperm(900)
    predict(model, va, samples=3)
    order_b = torch.randperm(900)
    assert not torch.equal(order_a, order_b)                 # the stream moved on
    assert torch.equal(predict(model, va, samples=3), first)   # seeded draws


def test_recipe_script_runs_and_passes_its_options(tmp_path, shared_data):
    """recipes/babi.sh with a tiny budget through its environment variables: both models train,
    the report is written, and the options reach the runs (δ, seeds, the escort sampler)."""
    import os
    import subprocess
    import sys

    from conftest import REPO, fast_python
    folder = shared_data / "babi" / "tasks_1-20_v1-2" / "en"
    out = tmp_path / "recipe"
    env = dict(os.environ, BABI_DATA=str(folder), OUT_DIR=str(out), TASKS="3", SETUPS="single",
               SEEDS="2", T_SEEDS="1", EPOCHS="2", EMBED_DIM="7", ESCORT_SAMPLER="gamma",
               EXTRA="--batches-per-epoch 3 --attention 3:0", OMP_NUM_THREADS="1",
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
               PYTHON=fast_python())   # babi_report through the tests' fork server
    res = subprocess.run(["bash", "recipes/babi.sh"], cwd=str(REPO), env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    results = json.loads((out / "results_single.json").read_text())
    assert set(results) == {"memn2n|3", "t_memn2n|3"}
    assert [r["seed"] for r in results["memn2n|3"]["runs"]] == [1, 2]
    assert {v["embed_dim"] for v in results.values()} == {7}
    assert results["t_memn2n|3"]["escort_sampler"] == "gamma"           # not the default
    md = (out / "babi_report.md").read_text()
    assert "t-MEM-NN: best of 1 runs per task by validation (seeds 1-1), δ 7, escort sampler gamma" in md
    assert "random noise 0.1," in md                        # the protocol's default (since 2026-11-24)


def test_selection_table_compares_the_rules_and_the_mean_over_seeds():
    def run(seed, valid, acc, nll):
        return {"seed": seed, "valid": valid, "valid_nll": nll, "test": {"memn2n": {"3": acc}}}
    runs = [run(1, 90.0, 80.0, 0.2), run(2, 90.0, 96.0, 0.05), run(3, 50.0, 40.0, 0.9)]
    res = {"memn2n|3": {**runs[1], "runs": runs},
           "memn2n|1,2": {**runs[0], "runs": [runs[0]]}}        # joint keys are left out
    lines = selection_table(res)
    assert lines[-1] == "| MemN2N (1 tasks) | 1 / 96.0 | 0 / 80.0 | 0 / 72.0 |"
    # results from before runs recorded their test accuracy: no table
    assert selection_table({"memn2n|3": {**runs[1], "runs": [{"seed": 1, "valid": 9}]}}) == []


def test_sigma_init_reaches_the_t_memn2n_posterior(shared_data):
    folder = shared_data / "babi" / "tasks_1-20_v1-2" / "en"
    task = make_task(str(folder), "1")
    for value in (0.01, 0.05):
        args = babi_report.build_parser().parse_args(
            ["--data", str(folder), "--embed-dim", "6", "--sigma-init", str(value)])
        model, _ = make_model(task, "t_memn2n", args)
        assert model.posterior.sigma.median().item() == pytest.approx(value, rel=1e-3)


def test_report_on_a_hindi_multi_word_answer_folder_names_the_variant(tmp_path):
    """A report on the `hn` folder (generated here: Devanagari, answers of one to three words)
    names the variant, sets its single-task results beside the seed's Hindi table (D Table
    11), records the variant with every run, shows answers as written (no join character), and
    refuses to mix variants."""
    import shutil

    from babi_formats import where_is, write_task
    folder = tmp_path / "hn"
    write_task(folder, 1, where_is(120, seed=1), where_is(20, seed=2), newline_crlf=True)
    out = tmp_path / "rep"
    argv = ["--out-dir", str(out), "--tasks", "1", "--setups", "single", "--seeds", "1",
            "--epochs", "2", "--batches-per-epoch", "2", "--embed-dim", "8", "--attention", "1:0"]
    babi_report.main(["--data", str(folder)] + argv)
    results = json.loads((out / "results_single.json").read_text())
    assert {i["variant"] for i in results.values()} == {"hn"}
    assert {r["variant"] for i in results.values() for r in i["runs"]} == {"hn"}
    md = (out / "babi_report.md").read_text()
    assert md.startswith("# bAbI report: hn ")
    assert "Data: `hn`;" in md and "## Single-task training (D Table 11)" in md
    assert "| MemN2N (pub.) | MemN2N (ours) |" in md and "The published columns are" not in md
    assert re.search(r"^\| 1: [^|]*\| 99 \|", md, re.M)        # D Table 11, task 1, MemN2N: 99
    first = where_is(1, seed=2).splitlines()[2].split("\t")[1]       # test question 0's answer
    assert f"answer **{first}**" in md and "\u2581" not in md
    assert len(re.findall(r"^\| (MemN2N|t-MEM-NN S=1|t-MEM-NN S=10) \|", md, re.M)) == 3
    # --variant naming another release folder than --data's is refused
    with pytest.raises(SystemExit, match="--variant en but --data is the release's 'hn' folder"):
        babi_report.main(["--data", str(folder), "--variant", "en"] + argv)
    # the same out-dir with another variant's data is refused, not resumed or mixed
    other = tmp_path / "copy"
    shutil.copytree(folder, other)
    with pytest.raises(ValueError, match="holds results for variant hn, not shuffled"):
        babi_report.main(["--data", str(other), "--variant", "shuffled"] + argv)
    assert json.loads((out / "results_single.json").read_text()) == results
    # a label for a folder that is not a release folder is free; en's report keeps "(pub.)"
    assert data_variant(str(other), "hn") == "hn"
    assert data_variant(str(tmp_path / "en") + "/") == "en"
    assert "| MemN2N (pub.) |" in "\n".join(table("single", results, {}))


def test_merge_refuses_runs_of_two_variants():
    def info(seed, variant):
        r = {"seed": seed, "valid": 90.0, "valid_nll": 0.1, "variant": variant}
        return {**r, "runs": [dict(r)]}
    with pytest.raises(ValueError, match="variant hn and on shuffled"):
        merge_results([{"m|1": info(1, "hn")}, {"m|1": info(2, "shuffled")}])
    assert merge_results([{"m|1": info(1, "hn")}, {"m|1": info(2, "hn")}])["m|1"]["seed"] == 1
    # runs recorded before variants were (none) merge with any, and the result keeps the name
    old = info(1, None)
    del old["variant"], old["runs"][0]["variant"]
    assert merge_results([{"m|1": old}, {"m|1": info(2, "en")}])["m|1"]["variant"] == "en"


def test_recipe_takes_the_variant(tmp_path):
    """VARIANT=hn with no BABI_DATA: recipes/babi.sh gets the hn folder through get_babi.sh
    (here from a local copy of the release's layout) and the report names it."""
    import os
    import subprocess
    import sys

    from babi_formats import where_is, write_task
    from conftest import REPO, fast_python
    src = tmp_path / "src" / "tasks_1-20_v1-2"
    write_task(src / "en", 1, where_is(40, lang="en"), where_is(10, lang="en"))
    write_task(src / "hn", 1, where_is(40, lang="roman"), where_is(10, seed=1, lang="roman"))
    out = tmp_path / "recipe"
    env = dict(os.environ, VARIANT="hn", BABI_SRC=str(tmp_path / "src"), OUT_DIR=str(out),
               TASKS="1", SETUPS="single", MODELS="memn2n", SEEDS="1", EPOCHS="1",
               EXTRA="--batches-per-epoch 2 --attention=", OMP_NUM_THREADS="1",
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
               PYTHON=fast_python())   # babi_report through the tests' fork server
    env.pop("BABI_DATA", None)
    res = subprocess.run(["bash", "recipes/babi.sh"], cwd=str(REPO), env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert json.loads((out / "results_single.json").read_text())["memn2n|1"]["variant"] == "hn"
    assert (out / "babi_report.md").read_text().startswith("# bAbI report: hn ")


def test_single_task_minibatches_of_a_given_size(tmp_path):
    """--batch-size (single tasks): minibatches of that many questions, the updates per epoch
    following the training set's size (Sukhbaatar et al.'s batch 32 on a 10k folder) instead of a
    fixed --batches-per-epoch; every run records its batching and the report says it."""
    from babi_formats import where_is, write_task
    folder = tmp_path / "en"
    write_task(folder, 1, where_is(150, seed=3), where_is(20, seed=4))
    base = ["--data", str(folder), "--tasks", "1", "--setups", "single", "--seeds", "1",
            "--models", "memn2n", "--epochs", "1", "--embed-dim", "8", "--attention", "1:0"]
    babi_report.main(base + ["--out-dir", str(tmp_path / "by_size"), "--batch-size", "16"])
    babi_report.main(base + ["--out-dir", str(tmp_path / "by_count"), "--batches-per-epoch", "3"])
    by_size = json.loads((tmp_path / "by_size" / "results_single.json").read_text())["memn2n|1"]
    by_count = json.loads((tmp_path / "by_count" / "results_single.json").read_text())["memn2n|1"]
    n = by_size["runs"][0]["train_questions"]
    assert 100 < n < 150                                  # the training part of 150 questions
    assert by_size["runs"][0]["updates_per_epoch"] == math.ceil(n / 16)
    assert by_count["runs"][0]["updates_per_epoch"] == 3
    md = (tmp_path / "by_size" / "babi_report.md").read_text()
    assert f"{math.ceil(n / 16)} updates per epoch (≈ {round(n / math.ceil(n / 16))} questions each)" in md


def test_accuracy_from_counts_and_the_pass_threshold():
    """950 right of 1,000 is 95.0 % and passes; a float32 mean made it 94.9999988 and failed it
    (t-MEM-NN S = 10 on en-10k task 7, 2026-11-27). Stored float32 values still pass."""
    from fairseq_acvi.babi_eval.evaluate import accuracy_by_task
    from fairseq_acvi.babi_eval.render import passed
    ok = torch.zeros(1100, dtype=torch.bool)
    ok[:950] = True                                   # task 7: 950 of 1,000
    ok[1000:1049] = True                              # task 8: 49 of 100
    tasks = torch.tensor([7] * 1000 + [8] * 100)
    acc = accuracy_by_task(ok, tasks)
    assert acc == {7: 95.0, 8: 49.0}
    assert 100.0 * ok[:1000].float().mean().item() < 95.0          # what the float32 mean gave
    assert passed([94.99999880790710, 95.0, 94.9, 100.0]) == 3
    assert passed([94.999]) == 0


def test_merge_reads_the_gzipped_copies_kept_under_docs_results(tmp_path):
    """The results files under docs/results/ are kept gzipped (``.json.gz``): --merge takes them as
    files and inside a report folder, and merges them to what the plain files give (the fixtures
    are plain copies of the same files)."""
    from conftest import REPO
    kept = REPO / "docs" / "results" / "babi_2026-11-24_random-noise"
    plain = REPO / "tests" / "fixtures" / "babi_2026-11-24_random-noise"
    names = ("results_single_rn0.1_seeds1-10.json", "results_single_t_memn2n_rn0.1_seeds11-20.json",
             "results_single_memn2n_rn0.1_seeds11-20.json", "results_joint_rn0.1.json")
    for name in names:                                  # the kept copies are the fixtures' data
        assert load_json(str(kept / f"{name}.gz")) == json.loads((plain / name).read_text())
    merge_dirs([str(kept / f"{n}.gz") for n in names], str(tmp_path / "gz"))
    merge_dirs([str(plain / n) for n in names], str(tmp_path / "plain"))
    for setup in ("single", "joint"):
        assert (json.loads((tmp_path / "gz" / f"results_{setup}.json").read_text())
                == json.loads((tmp_path / "plain" / f"results_{setup}.json").read_text()))
    folder = tmp_path / "report"                        # a report folder kept gzipped
    folder.mkdir()
    (folder / "results_single.json.gz").write_bytes((kept / f"{names[0]}.gz").read_bytes())
    sources = merge_sources([str(folder)])
    assert [len(sources["single"]), len(sources["joint"])] == [1, 0]
    assert load_json(sources["single"][0][0]) == json.loads((plain / names[0]).read_text())
    with pytest.raises(ValueError, match="or its .gz"):
        merge_sources([str(tmp_path / "results_single_notes.txt.gz")])
    bad = tmp_path / "results_single_bad.json.gz"           # a damaged copy is named, not a traceback
    bad.write_bytes((kept / f"{names[0]}.gz").read_bytes()[:200])
    with pytest.raises(ValueError, match="results_single_bad.json.gz: not a readable results file"):
        merge_dirs([str(bad)], str(tmp_path / "bad_out"))
