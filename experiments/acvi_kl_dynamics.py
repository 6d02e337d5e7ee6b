"""How fast the ACVI posterior variance rises at the start of training, per KL schedule.

Trains the Multi30K preset for a few dozen updates per configuration (``fairseq-train``, one
thread each, two at a time), logging every ``--log-interval`` updates, and prints a table of
the mean posterior variance v = mean_d Σ_i a_i² σ²(h_i) (``ctx_var``), the KL's two parts and
the training NLL at each logged update. It is the evidence behind ``--acvi-kl-delay-updates``
(docs/acvi_kl_notes.md §5): under Adam the KL's gradient on the log σ² network is small but of
one sign, so v climbs from e⁻⁶ toward 1 within ~30 updates at β = 1 and β = 0.002 alike, and a
linear warm-up from 0 does not stop it; with the KL switched off (a delay) v stays small.

    python experiments/acvi_kl_dynamics.py data-bin/multi30k_en_de --updates 60 \\
        --out docs/results/acvi_kl_dynamics_$(date +%F).json

Configurations (``--configs``, default all): name=extra fairseq-train arguments, e.g.
``b1=--acvi-beta 1``.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

DEFAULT_CONFIGS = {
    "beta1": "--acvi-beta 1",
    "beta0.002": "--acvi-beta 0.002",
    "beta0.002-warmup234": "--acvi-beta 0.002 --acvi-kl-warmup-updates 234",
    "beta0.002-delay234": "--acvi-beta 0.002 --acvi-kl-delay-updates 234",
}
KEYS = ("nll_loss", "kl", "kl_mean_part", "kl_var_part", "ctx_norm2", "ctx_var", "gnorm", "clip")


def run_one(data, name, extra, updates, interval, src, tgt, workdir, python):
    log = os.path.join(workdir, f"{name}.log")
    cmd = [python, "-m", "fairseq_cli.train", data, "--user-dir", "fairseq_acvi",
           "--task", "translation", "-s", src, "-t", tgt, "--arch", "acvi_lstm_multi30k",
           "--context-inference", "acvi", "--criterion", "elbo", "--optimizer", "adam",
           "--lr", "0.001", "--clip-norm", "1.0", "--max-tokens", "4000", "--seed", "1",
           "--max-update", str(updates), "--no-save", "--disable-validation", "--cpu",
           "--log-format", "json", "--log-interval", str(interval), "--num-workers", "0",
           "--save-dir", os.path.join(workdir, name),
           # no schedule unless the configuration sets one (the preset carries its own)
           "--acvi-kl-delay-updates", "0", "--acvi-kl-warmup-updates", "0"] + extra.split()
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    with open(log, "w") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env).returncode
    if rc != 0:   # the log lives in a temporary folder: quote its end
        tail = "".join(open(log).readlines()[-15:])
        raise RuntimeError(f"{name}: fairseq-train failed (rc {rc}); its last lines:\n{tail}")
    rows = []
    for line in open(log):
        if "| train_inner |" in line:
            d = json.loads(line[line.index("{"):])
            rows.append({"update": int(d["num_updates"]),
                         **{k: float(d[k]) for k in KEYS if k in d}})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", help="fairseq data-bin of a Multi30K pair (data_scripts/prepare_multi30k.sh)")
    ap.add_argument("--pair", default="en_de")
    ap.add_argument("--updates", type=int, default=60)
    ap.add_argument("--log-interval", type=int, default=10)
    ap.add_argument("--configs", nargs="*", metavar="NAME=ARGS",
                    help="name=extra fairseq-train args (default: the four schedules above)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", help="write the trajectories as JSON here")
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args(argv)
    if not os.path.isfile(os.path.join(args.data, "dict.en.txt")):
        ap.error(f"{args.data}: no dict.en.txt; build it with data_scripts/prepare_multi30k.sh")
    configs = dict(c.split("=", 1) for c in args.configs) if args.configs else DEFAULT_CONFIGS
    src, tgt = args.pair.split("_")
    with tempfile.TemporaryDirectory() as work, ThreadPoolExecutor(args.jobs) as pool:
        futures = {n: pool.submit(run_one, args.data, n, e, args.updates, args.log_interval,
                                  src, tgt, work, args.python) for n, e in configs.items()}
        results = {n: f.result() for n, f in futures.items()}
    print("mean posterior variance v (ctx_var) | KL per target token (nats) | train NLL (bits)")
    updates = sorted({r["update"] for rows in results.values() for r in rows})
    print("| config | " + " | ".join(f"u{u}" for u in updates) + " |")
    print("|---|" + "---|" * len(updates))
    for n, rows in results.items():
        by = {r["update"]: r for r in rows}
        cell = lambda r: f"{r['ctx_var']:.3g} / {r['kl']:.0f} / {r['nll_loss']:.2f}" if r else "—"  # noqa: E731
        print(f"| {n} | " + " | ".join(cell(by.get(u)) for u in updates) + " |")
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        json.dump({"configs": configs, "updates": args.updates, "pair": args.pair,
                   "trajectories": results}, open(args.out, "w"), indent=1)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
