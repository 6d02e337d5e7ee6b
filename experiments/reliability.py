"""Training that survives: the reliability suite at full size, with its figures.

    python experiments/reliability.py                  # every item at full size (hours on 2 cores)
    python experiments/reliability.py --quick          # reduced sizes (about half an hour)
    python experiments/reliability.py --items 1,5 --json out.json

Items (machinery: tests/reliability/reliability_harness.py and reliability_fuzz.py; the fast
cases run in CI as ``pytest tests/reliability``):

1. resume equality: N updates in one run against N/2 + resume from checkpoint_last.pt + N/2
   (ACVI translation and t-MEM-NN at N = 200; every other context inference and MemN2N at
   N = 20): parameters, optimizer state, iterator, lr schedule, per-update losses, sample ids, RNG
   digests and schedule counters bit for bit;
2. kill during save: SIGKILL inside random file operations of random saves, and by the server at
   random moments of a save; the restart must finish exactly as an uninterrupted run, every
   checkpoint file left must load, the newest complete one must resume;
3. fp16 soak: ``--memory-efficient-fp16`` for 2,000 updates per context inference and memory
   network, the loss scale pushed into overflow again and again;
4. two processes (gloo legacy_ddp) against one with ``--update-freq 2``, 20 updates;
5. fuzzed inputs of every reader (a few thousand cases each);
6. generation limits.

Prints, per item, the cases tried and passed (and the CPU seconds the runs used); ``--json``
writes every result.
"""
import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "reliability"))

import reliability_fuzz as F  # noqa: E402
import reliability_harness as H  # noqa: E402

QUICK = {"resume_updates": 40, "resume_brief_updates": 10, "injected_kills": 12,
         "timed_kills": 8, "kill_updates": 10, "fp16_updates": 300, "ddp_updates": 20,
         "fuzz_per_corruption": 40}


def item1(z, root, data, size):
    rows = []
    for spec in ({"kind": "mt", "variant": "acvi"}, {"kind": "babi", "arch": "t_memn2n"}):
        n = size["resume_updates"]
        rows.append(H.resume_case(z, root / H.spec_name(spec), spec, data, n, n // 2 + 3))
    for v in [v for v in H.VARIANTS if v != "acvi"] + ["memn2n"]:
        spec = {"kind": "babi", "arch": v} if v == "memn2n" else {"kind": "mt", "variant": v}
        n = size["resume_brief_updates"]
        rows.append(H.resume_case(z, root / H.spec_name(spec), spec, data, n, n // 2 + 1))
    for r in rows:
        diffs = {k: v for k, v in r.get("updates", {}).items() if v}
        print(f"  {r['name']:<16} N={r['total']:<4} stop {r['stop']:<4} "
              f"{'equal' if r['ok'] else 'DIFFERENT'} {diffs or ''} "
              f"{ {k: v for k, v in r.get('state', {}).items() if v} or ''}")
    return rows, len(rows), sum(r["ok"] for r in rows)


def item2(z, root, data, size):
    rows = H.kill_campaign(z, root, data, size["injected_kills"], size["timed_kills"],
                           total=size["kill_updates"])
    inj = [r for r in rows if "inject" in r["kills"][0]["how"]]
    timed = [r for r in rows if "kill" in r["kills"][0]["how"]]
    for name, group in (("injected", inj), ("timed", timed)):
        kills = [r["kills"][0] for r in group]
        by_op = {}
        for k in kills:
            op = k["how"].get("inject", {}).get("what", "timed")
            by_op[op] = by_op.get(op, 0) + 1
        print(f"  {name}: kills {len(kills)}, killed {sum(k['killed'] for k in kills)}, "
              f"during a save {sum(k['during_save'] for k in kills)}, corrupt .pt left "
              f"{sum(bool(k['corrupt']) for k in kills)}, checkpoint_last.pt unreadable "
              f"{sum(not k['last_ok'] for k in kills)}; restart finished equal "
              f"{sum(r['ok'] for r in group)}/{len(group)}; newest complete resumed equal "
              f"{sum(r['newest']['ok'] for r in group if 'newest' in r)}/"
              f"{sum('newest' in r for r in group)}; by operation {by_op}")
    passed = sum(r["ok"] and r.get("newest", {"ok": True})["ok"] for r in rows)
    return rows, len(rows), passed


def item3(z, root, data, size):
    rows = []
    n = size["fp16_updates"]
    for name in H.VARIANTS + ["memn2n", "t_memn2n"]:
        spec = ({"kind": "babi", "arch": name} if name in ("memn2n", "t_memn2n")
                else {"kind": "mt", "variant": name})
        r = H.fp16_soak(z, root / name, spec, data, n)
        rows.append(r)
        print(f"  {r['name']:<16} updates {r['applied']}/{n}, steps {r['steps']}, non-finite "
              f"losses {r['nonfinite_losses']}, overflow skips {r['overflow_skips']} "
              f"(recovered {r['recovered']}), applied on non-finite {r['applied_on_nonfinite']}, "
              f"non-finite params {r['nonfinite_params']}, skipped but changed "
              f"{r['skipped_but_changed']}, scale {r['scale_min']}..{r['scale_max']}"
              f"{'' if r['ok'] else '  FAILED ' + str(r['exc'])}")
    return rows, len(rows), sum(r["ok"] for r in rows)


DDP = [({"kind": "mt", "variant": "soft", "extra": ["--dropout", "0"]}, 1e-6),
       ({"kind": "mt", "variant": "acvi", "extra": ["--dropout", "0"]}, 1e-2),
       ({"kind": "babi", "arch": "memn2n", "extra": ["--random-noise", "0"]}, 1e-6),
       ({"kind": "babi", "arch": "t_memn2n"}, 1e-2)]


def item4(z, root, data, size):
    rows = []
    for spec, tol in DDP:
        r = H.ddp_vs_update_freq(z, root / H.spec_name(spec), spec, data, size["ddp_updates"])
        r["tolerance"] = tol
        r["ok"] = (r.get("rc") == [0, 0, 0] and r.get("batches_equal", False)
                   and r.get("final_rel_loss_diff", 1.0) <= tol)
        rows.append(r)
        print(f"  {r['name']:<16} loss after {r['updates']} updates: one process "
              f"{r.get('loss_one', ['?'])[-1]}, two {r.get('loss_two', ['?'])[-1]}; max rel. "
              f"loss diff {r.get('max_rel_loss_diff', float('nan')):.2e} (tolerance {tol:g}), "
              f"max |param diff| {r.get('max_abs_param_diff', float('nan')):.2e}")
    return rows, len(rows), sum(r["ok"] for r in rows)


def item5(z, root, data, size):
    res = F.campaign(size["fuzz_per_corruption"], root)
    for key, r in res.items():
        kinds = {}
        for f in r["failures"]:
            kinds[f["outcome"]] = kinds.get(f["outcome"], 0) + 1
        print(f"  {r['reader']:<32} cases {r['cases']:>5}: loaded {r['loaded']:>5}, clear "
              f"errors {r['clear_error']:>5}, failures {len(r['failures'])} {kinds or ''}")
    tried = sum(r["cases"] for r in res.values())
    return res, tried, tried - sum(len(r["failures"]) for r in res.values())


def item6(z, root, data, size):
    rows = H.generation_limits(z, root, data)
    for r in rows:
        how = "ok" if r["rc"] == 0 else f"error: {(r['exc'] or {}).get('message', '')[:90]}"
        print(f"  {r['case']:<48} {'PASS' if r['ok'] else 'FAIL'}  {how}")
    return rows, len(rows), sum(r["ok"] for r in rows)


ITEMS = {1: ("resume equality", item1), 2: ("kill during save", item2), 3: ("fp16 soak", item3),
         4: ("two processes vs one", item4), 5: ("fuzzed inputs", item5),
         6: ("generation limits", item6)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="reduced sizes")
    p.add_argument("--items", default="1,2,3,4,5,6")
    p.add_argument("--workdir", default=None, help="default: a temporary folder")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    size = dict(QUICK if a.quick else H.FULL)
    work = Path(a.workdir or tempfile.mkdtemp(prefix="acvi-reliability-"))
    z, data = H.env(work)
    summary, results = [], {}
    for i in [int(x) for x in a.items.split(",")]:
        name, fn = ITEMS[i]
        print(f"{i}. {name}", flush=True)
        t0 = time.time()
        rows, tried, passed = fn(z, work / f"item{i}", data, size)
        results[i] = rows
        summary.append((i, name, tried, passed, time.time() - t0))
        print(f"  -> {passed}/{tried} passed ({time.time() - t0:.0f} s)", flush=True)
    print("\nitem                          cases   passed")
    for i, name, tried, passed, _ in summary:
        print(f"{i}. {name:<26} {tried:>6}   {passed:>6}")
    if a.json:
        Path(a.json).write_text(json.dumps({"sizes": size, "summary": summary,
                                            "results": results}, indent=1, default=str))
    return 0 if all(t == p_ for _, _, t, p_, _ in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
