"""The reliability suite's machinery, shared by ``tests/reliability/test_*.py`` (small
sizes, CI) and ``experiments/reliability.py`` (full sizes, the figures of BENCHMARKS.md).

Training runs go through fairseq's own CLIs (``fairseq_cli.train.cli_main`` with its argv), each in
a separate process forked from one server that has imported torch and fairseq already
(``reliability_zygote.py``; a fresh interpreter would spend ~6 s of CPU on imports per run).
Every item returns plain dicts of counts and the differences found, so that a test asserts on
them and the benchmark prints them.

Items (the numbers follow the issue):

1. :func:`resume_case` N updates in one run against N/2, stop, resume from checkpoint_last.pt, N/2
   more: parameters, optimizer state, iterator state, per-update losses, sample ids, RNG digests
   and schedule counters compared bit for bit.
2. :func:`kill_case` SIGKILL during a checkpoint save (at a chosen file operation of the save, or
   by the server at a random delay after the save started), then restart the same command until
   it finishes; every checkpoint file left behind is loaded (weights-only) and the final state
   must equal an uninterrupted run's.
3. :func:`fp16_soak` ``--memory-efficient-fp16`` for many updates with a loss scale that keeps
   growing into overflows: counts of non-finite losses, skipped updates, recoveries, and any update
   applied on a non-finite loss or leaving a non-finite parameter.
4. :func:`ddp_vs_update_freq` gloo ``legacy_ddp`` with two processes against one process with
   ``--update-freq 2``.
6. :func:`generation_limits` edge values of fairseq-generate / fairseq-interactive.

Item 5 (fuzzed readers) lives in ``reliability_fuzz.py``.
"""
from __future__ import annotations

import atexit
import json
import math
import os
import random
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
USER_DIR = str(REPO / "fairseq_acvi")
ZYGOTE = HERE / "reliability_zygote.py"

#: the full-size runs (``experiments/reliability.py`` and the tests marked ``slow``)
FULL = {"resume_updates": 200, "resume_brief_updates": 20, "injected_kills": 60,
        "timed_kills": 40, "kill_updates": 10, "fp16_updates": 2000, "ddp_updates": 20,
        "fuzz_per_corruption": 250}  # = reliability_fuzz.FULL_PER_CORRUPTION
#: every context inference of the translation model (``--context-inference``)
VARIANTS = ["none", "soft", "acvi", "structured", "variational", "ved", "pag", "rpag"]
TINY_MT = ["--encoder-embed-dim", "16", "--decoder-embed-dim", "16", "--encoder-hidden-size", "16",
           "--decoder-hidden-size", "16", "--encoder-layers", "1", "--decoder-layers", "1",
           "--attention-dim", "16"]


# ------------------------------------------------------------------------------------ fork server
class Zygote:
    """Client of ``reliability_zygote.py``: :meth:`run` jobs concurrently, get their results."""

    def __init__(self, log_path: Path):
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep)
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen([sys.executable, str(ZYGOTE)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._log, text=True,
                                     cwd=str(REPO), env=env)
        self._lock = threading.Lock()
        hello = self.proc.stdout.readline()
        if not hello:
            raise RuntimeError(f"the reliability fork server did not start; see {log_path}")

    def run(self, jobs: Sequence[dict]) -> List[dict]:
        with self._lock:
            self.proc.stdin.write(json.dumps({"op": "run", "jobs": list(jobs)}) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the reliability fork server died")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"fork server: {reply['error']}\n{reply.get('traceback', '')}")
        return reply["results"]

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()  # our own server process
        self._log.close()


_ZYGOTE: Optional[Zygote] = None


def zygote(workdir: Path) -> Zygote:
    """The session's fork server (started on first use, closed at exit)."""
    global _ZYGOTE
    if _ZYGOTE is None or _ZYGOTE.proc.poll() is not None:
        Path(workdir).mkdir(parents=True, exist_ok=True)
        _ZYGOTE = Zygote(Path(workdir) / "zygote.log")
        atexit.register(_ZYGOTE.close)
    return _ZYGOTE


def job(cli: str, argv: Sequence, log: Path, **kw) -> dict:
    out = {"cli": cli, "argv": [str(a) for a in argv], "log": str(log), "timeout": 900}
    out.update({k: (str(v) if isinstance(v, Path) else v) for k, v in kw.items()})
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------------- data
def write_reversal(folder: Path, n_train=300, n_valid=30, n_test=12, vocab=12, seed=0,
                   max_len=7) -> None:
    """Toy translation data: the target is the source reversed."""
    rng = random.Random(seed)
    words = [f"t{i}" for i in range(vocab)]
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("valid", n_valid), ("test", n_test)):
        with open(folder / f"{split}.src", "w") as fs, open(folder / f"{split}.tgt", "w") as ft:
            for _ in range(n):
                s = [rng.choice(words) for _ in range(rng.randint(3, max_len))]
                fs.write(" ".join(s) + "\n")
                ft.write(" ".join(reversed(s)) + "\n")


def reversal_bin(z: Zygote, root: Path, **kw) -> Path:
    """Binarised toy translation data (fairseq-preprocess, joined dictionary) under ``root``."""
    raw, out = root / "raw", root / "bin"
    if (out / "train.src-tgt.src.bin").exists():
        return out
    write_reversal(raw, **kw)
    r = z.run([job("preprocess", ["--source-lang", "src", "--target-lang", "tgt",
                                  "--trainpref", raw / "train", "--validpref", raw / "valid",
                                  "--testpref", raw / "test", "--destdir", out,
                                  "--joined-dictionary", "--workers", "1"],
                  root / "preprocess.log")])
    assert r[0]["rc"] == 0, (root / "preprocess.log").read_text()[-3000:]
    return out


PEOPLE = ["mary", "john", "sandra", "daniel"]
PLACES = ["kitchen", "garden", "office", "hallway", "bathroom"]


def babi_lines(n_questions: int, seed: int) -> List[str]:
    """A bAbI task-1-like file: short stories of moves, a question after every second move."""
    rng = random.Random(seed)
    lines: List[str] = []
    asked = 0
    while asked < n_questions:
        where, lid, moves = {}, 0, 0
        for _ in range(rng.randint(1, 4)):
            for _ in range(2):
                p, q = rng.choice(PEOPLE), rng.choice(PLACES)
                lid += 1
                lines.append(f"{lid} {p.capitalize()} went to the {q}.")
                where[p] = (q, lid)
                moves += 1
            p = rng.choice(sorted(where))
            lid += 1
            lines.append(f"{lid} Where is {p.capitalize()}? \t{where[p][0]}\t{where[p][1]}")
            asked += 1
    return lines


def babi_folder(root: Path, n_train=60, n_test=20, seed=0) -> Path:
    folder = root / "babi"
    folder.mkdir(parents=True, exist_ok=True)
    for split, n, s in (("train", n_train, seed), ("test", n_test, seed + 1)):
        (folder / f"qa1_synthetic_{split}.txt").write_text(
            "\n".join(babi_lines(n, s)) + "\n", encoding="utf-8")
    return folder


# ---------------------------------------------------------------------------------- training args
def common_args(save_dir: Path, updates: int, seed: int = 1) -> list:
    return ["--user-dir", USER_DIR, "--save-dir", save_dir, "--max-update", updates,
            "--no-progress-bar", "--log-format", "json", "--log-interval", "1", "--seed", seed,
            "--num-workers", "0", "--cpu", "--no-epoch-checkpoints"]


def mt_args(data_bin: Path, variant: str, max_tokens: int = 400, schedules: bool = True,
            size: Sequence[str] = TINY_MT) -> list:
    """Translation LSTM with ``variant``; ``schedules`` adds an lr warm-up and the variant's
    update-counted schedules (ACVI KL delay + warm-up; VED's annealing is on by default)."""
    args = [data_bin, "--task", "translation", "--arch", "acvi_lstm", "--criterion", "elbo",
            "--context-inference", variant, "--optimizer", "adam", "--lr", "0.005",
            "--max-tokens", max_tokens, *size]
    if schedules:
        args += ["--lr-scheduler", "inverse_sqrt", "--warmup-updates", "4"]
        if variant == "acvi":
            args += ["--acvi-kl-delay-updates", "2", "--acvi-kl-warmup-updates", "4"]
    if variant in ("pag", "rpag"):
        args += ["--pag-plan-horizon", "3"]
    return args


def babi_args(folder: Path, arch: str, batch_size: int = 8, linear_start: int = 1) -> list:
    crit = ["--criterion", "t_divergence"] if arch == "t_memn2n" else ["--criterion",
                                                                       "qa_cross_entropy"]
    return [folder, "--task", "babi_qa", "--babi-tasks", "1", "--arch", arch, *crit,
            "--optimizer", "adam", "--lr", "0.01", "--clip-norm", "40",
            "--batch-size", batch_size, "--required-batch-size-multiple", "1",
            "--linear-start-epochs", linear_start]


def spec_args(spec: dict, data: Dict[str, Path]) -> list:
    """Training arguments (data and model, no save dir / update count) of a run ``spec``:
    {"kind": "mt", "variant": V, ...} or {"kind": "babi", "arch": A, ...}."""
    if spec["kind"] == "mt":
        return mt_args(data["mt"], spec["variant"], spec.get("max_tokens", 400),
                       spec.get("schedules", True), spec.get("size", TINY_MT)) + \
            list(spec.get("extra", []))
    return babi_args(data["babi"], spec["arch"], spec.get("batch_size", 8),
                     spec.get("linear_start", 1)) + list(spec.get("extra", []))


def spec_name(spec: dict) -> str:
    return spec.get("name") or (f"mt-{spec['variant']}" if spec["kind"] == "mt"
                                else f"babi-{spec['arch']}")


# ---------------------------------------------------------------------------------------- reading
def read_jsonl(path: Path) -> List[dict]:
    path = Path(path)
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:  # a line cut by a SIGKILL
                pass
    return out


def train_inner(log: Path) -> Dict[int, dict]:
    """fairseq's per-update training log (``--log-format json --log-interval 1``), by update."""
    out = {}
    for line in Path(log).read_text(errors="replace").splitlines():
        m = _TRAIN_INNER.search(line)
        if m:
            stats = json.loads(m.group(1))
            out[int(stats["num_updates"])] = stats
    return out


_TRAIN_INNER = re.compile(r"train_inner(?: \| |:)(\{.*\})\s*$")


def load_checkpoint(path: Path):
    """A checkpoint loaded as fairseq does it: weights-only (``torch.load``'s default)."""
    import torch
    import fairseq_acvi  # noqa: F401  (allow-lists argparse.Namespace for weights-only loading)
    return torch.load(str(path), map_location="cpu", weights_only=True)


def checkpoint_updates(state) -> int:
    return int(state["optimizer_history"][-1]["num_updates"])


def diff(a, b, path="") -> List[str]:
    """Where two checkpoint structures differ (tensors bit for bit, floats exactly)."""
    import torch
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        ok = (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype
              and a.shape == b.shape and torch.equal(a, b))
        return [] if ok else [path or "<tensor>"]
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}.{k}: only in one" for k in set(a) ^ set(b)]
        for k in sorted(set(a) & set(b), key=str):
            out += diff(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diff(x, y, f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return []
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def state_diff(a, b) -> Dict[str, List[str]]:
    """Differences of two training checkpoints in what a resumed run must reproduce: parameters,
    optimizer state, the data iterator's position, update count, lr schedule; not the wall-clock
    meters, nor ``best`` (the half run validated once more, at its stop) nor the cfg."""
    ea, eb = a.get("extra_state") or {}, b.get("extra_state") or {}
    ha, hb = a["optimizer_history"][-1], b["optimizer_history"][-1]
    return {"model": diff(a["model"], b["model"]),
            "optimizer": diff(a["last_optimizer_state"], b["last_optimizer_state"]),
            "iterator": diff(ea.get("train_iterator"), eb.get("train_iterator")),
            "schedule": diff({k: ha.get(k) for k in ("num_updates", "lr_scheduler_state")},
                             {k: hb.get(k) for k in ("num_updates", "lr_scheduler_state")})}


def probe_updates(records: List[dict]) -> Dict[int, dict]:
    """Applied updates of a probe file, by the update number they produced."""
    return {r["after"]: r for r in records if r.get("applied")}


def compare_updates(a: Dict[int, dict], b: Dict[int, dict], updates) -> Dict[str, List[int]]:
    """Updates where two runs differ: sample ids (data order), RNG digest at each batch (noise
    streams), per-batch and logged losses, schedule counters."""
    out = {"missing": [], "ids": [], "rng": [], "loss": [], "counters": []}
    for u in updates:
        if (u in a) != (u in b):  # one run made this update, the other did not
            out["missing"].append(u)
            continue
        if u not in a:  # neither did (an early stop)
            continue
        ra, rb = a[u], b[u]
        if [x["ids"] for x in ra["batches"]] != [x["ids"] for x in rb["batches"]]:
            out["ids"].append(u)
        if [x["rng"] for x in ra["batches"]] != [x["rng"] for x in rb["batches"]]:
            out["rng"].append(u)
        if ([x["loss"] for x in ra["batches"]] != [x["loss"] for x in rb["batches"]]
                or ra["logged_loss"] != rb["logged_loss"]):
            out["loss"].append(u)
        if ra["counters"] != rb["counters"]:
            out["counters"].append(u)
    return out


def env(workdir: Path, kinds=("mt", "babi")):
    """(fork server, training data) for a suite run in ``workdir``."""
    workdir = Path(workdir)
    z = zygote(workdir / "server")
    return z, train_data(z, workdir / "data", kinds)


def train_data(z: Zygote, root: Path, kinds=("mt", "babi")) -> Dict[str, Path]:
    data = {}
    if "mt" in kinds:
        data["mt"] = reversal_bin(z, root / "mt")
    if "babi" in kinds:
        data["babi"] = babi_folder(root)
    return data


# ------------------------------------------------------------------------------- item 1: resume
def resume_case(z: Zygote, root: Path, spec: dict, data: Dict[str, Path], total: int,
                stop: int, seed: int = 1) -> dict:
    """N = ``total`` updates in one run against ``stop`` updates, stop, resume from
    checkpoint_last.pt (the same command with the larger --max-update), the rest."""
    root = Path(root)
    full, part = root / "full", root / "part"
    base = spec_args(spec, data)
    jobs = [job("train", base + common_args(full, total, seed), full.with_suffix(".log"),
                probe=root / "full.probe"),
            job("train", base + common_args(part, stop, seed), root / "part1.log",
                probe=root / "part1.probe")]
    r1 = z.run(jobs)
    r2 = z.run([job("train", base + common_args(part, total, seed), root / "part2.log",
                    probe=root / "part2.probe")])
    res = {"name": spec_name(spec), "total": total, "stop": stop,
           "rc": [r1[0]["rc"], r1[1]["rc"], r2[0]["rc"]], "ok": False,
           "cpu": sum(r["cpu"] for r in r1 + r2)}
    if any(res["rc"]):
        res["error"] = [r.get("exc") for r in r1 + r2]
        return res
    a = probe_updates(read_jsonl(root / "full.probe"))
    b = probe_updates(read_jsonl(root / "part1.probe") + read_jsonl(root / "part2.probe"))
    res["updates"] = compare_updates(a, b, range(1, total + 1))
    res["resumed_at"] = min((r["before"] for r in read_jsonl(root / "part2.probe")), default=None)
    la, lb = train_inner(full.with_suffix(".log")), train_inner(root / "part2.log")
    keys = ("loss", "nll_loss", "kl", "ved_kl", "divergence", "accuracy", "lr", "loss_scale")
    res["logged"] = [u for u in range(stop + 1, total + 1)
                     if (u in la) != (u in lb)
                     or (u in la and any(la[u].get(k) != lb[u].get(k) for k in keys))]
    res["last_update"] = [max(a, default=0), max(b, default=0)]
    res["state"] = state_diff(load_checkpoint(full / "checkpoint_last.pt"),
                              load_checkpoint(part / "checkpoint_last.pt"))
    res["ok"] = (res["resumed_at"] == stop and not any(res["updates"].values())
                 and not res["logged"] and not any(res["state"].values()))
    return res


# --------------------------------------------------------------------------- item 2: kill / save
def scan_checkpoints(save_dir: Path) -> dict:
    """Every ``*.pt`` in ``save_dir``: loads (weights-only) or not, and its update count."""
    out = {}
    for p in sorted(Path(save_dir).glob("*.pt")):
        try:
            out[p.name] = {"ok": True, "updates": checkpoint_updates(load_checkpoint(p))}
        except Exception as e:  # noqa: BLE001 - a corrupt file is what we count
            out[p.name] = {"ok": False, "error": f"{type(e).__name__}: {str(e)[:200]}"}
    return out


def save_plan(trace: List[dict]) -> List[dict]:
    """The save_end events of a reference run: per save, its file operations."""
    return [e for e in trace if e.get("event") == "save_end"]


def kill_case(z: Zygote, root: Path, spec: dict, data: Dict[str, Path], total: int,
              save_every: int, kills: List[dict], reference: Path, seed: int = 1) -> dict:
    """Run the same training command until it completes; the i-th run is killed as ``kills[i]``
    says: {"inject": {"save": k, "op": i, "frac": f, "bytes": n}} (the process kills itself in
    that file operation of its k-th save) or {"kill": {"save": k, "delay": s}} (the server kills
    it s seconds after its k-th save started). After each kill every checkpoint file is loaded;
    the final checkpoint is compared with ``reference`` (an uninterrupted run's checkpoint_last.pt).
    """
    root = Path(root)
    save = root / "ck"
    argv = spec_args(spec, data) + common_args(save, total, seed) + \
        ["--save-interval-updates", save_every]
    res = {"name": spec_name(spec), "kills": [], "ok": False, "cpu": 0.0}
    for i, how in enumerate(kills + [None]):
        trace = root / f"run{i}.trace"
        r = z.run([job("train", argv, root / f"run{i}.log", save_trace=trace,
                       **(how or {}))])[0]
        res["cpu"] += r["cpu"]
        events = read_jsonl(trace)
        if how is None:
            res["final_rc"] = r["rc"]
            res["final_exc"] = r["exc"]
            break
        k = (how.get("inject") or how.get("kill"))["save"]
        ended = any(e.get("event") == "save_end" and e["save"] == k for e in events)
        started = any(e.get("event") == "save_start" and e["save"] == k for e in events)
        scan = scan_checkpoints(save)
        last = scan.get("checkpoint_last.pt")
        good = [v["updates"] for v in scan.values() if v["ok"]]
        newest_file = None
        if good:  # kept aside: the restart overwrites the folder
            import shutil
            name = max((n for n, v in scan.items() if v["ok"]), key=lambda n: scan[n]["updates"])
            newest_file = root / f"newest{i}.pt"
            shutil.copyfile(save / name, newest_file)
        res["kills"].append({
            "how": how, "rc": r["rc"], "killed": r["rc"] == -9,
            "during_save": started and not ended, "corrupt": sorted(n for n, v in scan.items()
                                                                   if not v["ok"]),
            "last_ok": last is None or last["ok"], "newest_complete": max(good, default=0),
            "last_updates": last["updates"] if last and last["ok"] else None,
            "newest_file": str(newest_file) if newest_file else None, "exc": r["exc"]})
        if r["rc"] == 0:  # the kill never came (the run had fewer saves): nothing to resume
            res["final_rc"] = 0
            break
    if res.get("final_rc") == 0:
        res["state"] = state_diff(load_checkpoint(reference), load_checkpoint(save /
                                                                              "checkpoint_last.pt"))
        res["ok"] = not any(res["state"].values()) and all(k["last_ok"] for k in res["kills"])
    return res


def resume_from(z: Zygote, root: Path, spec: dict, data: Dict[str, Path], total: int,
                save_every: int, checkpoint: Path, reference: Path, seed: int = 1) -> dict:
    """Restart the kill runs' command from ``checkpoint`` (copied as checkpoint_last.pt into a
    fresh save folder) and compare the finished run with ``reference``."""
    import shutil
    root = Path(root)
    save = root / "ck"
    save.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(checkpoint, save / "checkpoint_last.pt")
    argv = spec_args(spec, data) + common_args(save, total, seed) + \
        ["--save-interval-updates", save_every]
    r = z.run([job("train", argv, root / "resume.log", probe=root / "resume.probe")])[0]
    recs = read_jsonl(root / "resume.probe")
    out = {"rc": r["rc"], "exc": r["exc"], "cpu": r["cpu"],
           "resumed_at": recs[0]["before"] if recs else None}
    if r["rc"] == 0:
        out["state"] = state_diff(load_checkpoint(reference), load_checkpoint(save /
                                                                              "checkpoint_last.pt"))
    out["ok"] = r["rc"] == 0 and not any(out["state"].values())
    return out


def find_op(plan: dict, save: int, op: str, file_prefix: str) -> Tuple[int, dict]:
    """(index, operation) of the first ``op`` on a file starting with ``file_prefix`` in save
    number ``save`` of a reference plan."""
    ops = next(s for s in plan["saves"] if s["save"] == save)["ops"]
    for i, o in enumerate(ops):
        if o["op"] == op and o.get("dst", o.get("path", "")).startswith(file_prefix):
            return i, o
    raise KeyError(f"no {op} of {file_prefix}* in save {save}: {ops}")


def reference_run(z: Zygote, root: Path, spec: dict, data: Dict[str, Path], total: int,
                  save_every: int, seed: int = 1) -> dict:
    """An uninterrupted run with the kill runs' command; its save trace plans the kills."""
    root = Path(root)
    save = root / "ck"
    argv = spec_args(spec, data) + common_args(save, total, seed) + \
        ["--save-interval-updates", save_every]
    r = z.run([job("train", argv, root / "ref.log", save_trace=root / "ref.trace")])[0]
    assert r["rc"] == 0, (root / "ref.log").read_text()[-3000:]
    saves = save_plan(read_jsonl(root / "ref.trace"))
    starts = {e["save"]: e["t"] for e in read_jsonl(root / "ref.trace")
              if e.get("event") == "save_start"}
    return {"checkpoint": save / "checkpoint_last.pt", "saves": saves, "cpu": r["cpu"],
            "durations": {s["save"]: s["t"] - starts[s["save"]] for s in saves}}


def random_injection(rng: random.Random, plan: dict, first_save: int = 1) -> dict:
    """A kill inside a random file operation of a random save of the plan."""
    save = rng.choice([s for s in plan["saves"] if s["save"] >= first_save])
    i = rng.randrange(len(save["ops"]))
    op = save["ops"][i]
    return {"inject": {"save": save["save"], "op": i, "frac": rng.random(),
                       "bytes": op.get("bytes", 0), "what": op["op"],
                       "file": op.get("dst", op.get("path"))}}


def random_timed_kill(rng: random.Random, plan: dict, first_save: int = 1) -> dict:
    """The server's SIGKILL at a random delay within a save's duration (measured on the
    reference run) after the save began."""
    save = rng.choice([s for s in plan["saves"] if s["save"] >= first_save])
    return {"kill": {"save": save["save"],
                     "delay": rng.random() * plan["durations"][save["save"]]}}


def kill_campaign(z: Zygote, root: Path, data: Dict[str, Path], n_injected: int, n_timed: int,
                  total: Optional[int] = None, seed: int = 0) -> List[dict]:
    """Random kills, each followed by restarts until the run finishes: ``n_injected`` inside a
    random file operation of a random save, ``n_timed`` by the server at a random delay within a
    save; the translation ACVI model at 64 units (~0.8 MB checkpoints, saves of a few ms);
    after each, the newest complete checkpoint is resumed from as well."""
    rng = random.Random(seed)
    root = Path(root)
    total, every = total or FULL["kill_updates"], 2
    spec = {"kind": "mt", "variant": "acvi", "size": [a if a != "16" else "64" for a in TINY_MT]}
    plan = reference_run(z, root / "ref", spec, data, total, every)
    out = []
    for n in range(n_injected + n_timed):
        how = random_injection(rng, plan) if n < n_injected else random_timed_kill(rng, plan)
        case = root / f"case{n}"
        res = kill_case(z, case, spec, data, total, every, [how], plan["checkpoint"])
        k = res["kills"][0]
        if res.get("final_rc") == 0 and k.get("newest_file"):
            res["newest"] = resume_from(z, case / "newest", spec, data, total, every,
                                        Path(k["newest_file"]), plan["checkpoint"])
        out.append(res)
    return out


# ------------------------------------------------------------------------------- item 3: fp16
def fp16_soak(z: Zygote, root: Path, spec: dict, data: Dict[str, Path], updates: int,
              init_scale: int = 2 ** 16, scale_window: int = 32, seed: int = 1,
              timeout: int = 3600) -> dict:
    """``--memory-efficient-fp16`` for ``updates`` updates, the loss scale starting at
    ``init_scale`` and doubling after every ``scale_window`` overflow-free updates (so overflows
    keep coming back); counts from the probe of every train_step."""
    root = Path(root)
    argv = spec_args(spec, data) + common_args(root / "ck", updates, seed) + \
        ["--memory-efficient-fp16", "--fp16-init-scale", init_scale,
         "--fp16-scale-window", scale_window, "--no-save"]
    r = z.run([job("train", argv, root / "soak.log", probe=root / "soak.probe",
                   timeout=timeout)])[0]
    recs = read_jsonl(root / "soak.probe")
    nonfinite = [r_ for r_ in recs if any(not isinstance(b["loss"], float) for b in r_["batches"])]
    skipped = [i for i, r_ in enumerate(recs) if not r_["applied"]]
    out = {"name": spec_name(spec), "rc": r["rc"], "exc": r["exc"], "steps": len(recs),
           "cpu": r["cpu"],
           "applied": sum(r_["applied"] for r_ in recs),
           "nonfinite_losses": sum(not isinstance(b["loss"], float)
                                   for r_ in recs for b in r_["batches"]),
           "overflow_skips": len(skipped),
           "recovered": sum(any(r_["applied"] for r_ in recs[i + 1:]) for i in skipped),
           "applied_on_nonfinite": sum(r_["applied"] for r_ in nonfinite),
           "nonfinite_params": sum(not r_["params_finite"] for r_ in recs),
           "skipped_but_changed": sum(r_["params_changed"] for i, r_ in enumerate(recs)
                                      if not r_["applied"]),
           "scale_min": min((r_["loss_scale"] for r_ in recs if r_["loss_scale"]), default=None),
           "scale_max": max((r_["loss_scale"] for r_ in recs if r_["loss_scale"]), default=None),
           "final_update": recs[-1]["after"] if recs else 0}
    out["ok"] = (out["rc"] == 0 and out["final_update"] == updates
                 and out["applied_on_nonfinite"] == 0 and out["nonfinite_params"] == 0
                 and out["skipped_but_changed"] == 0 and out["recovered"] == out["overflow_skips"])
    return out


# ----------------------------------------------------------------------- item 4: two processes
def ddp_vs_update_freq(z: Zygote, root: Path, spec: dict, data: Dict[str, Path], updates: int,
                       seed: int = 1) -> dict:
    """Two gloo ``legacy_ddp`` processes against one process with ``--update-freq 2``."""
    root = Path(root)
    port = free_port()
    base = spec_args(spec, data)
    ddp = ["--ddp-backend", "legacy_ddp", "--distributed-backend", "gloo",
           "--distributed-no-spawn", "--distributed-init-method", f"tcp://127.0.0.1:{port}",
           "--distributed-world-size", "2"]
    jobs = [job("train", base + common_args(root / "one", updates, seed) + ["--update-freq", "2"],
                root / "one.log", probe=root / "one.probe", timeout=900)]
    jobs += [job("train", base + common_args(root / "two", updates, seed) + ddp +
                 ["--distributed-rank", r], root / f"rank{r}.log", probe=root / f"rank{r}.probe",
                 timeout=900) for r in (0, 1)]
    rs = z.run(jobs)
    out = {"name": spec_name(spec), "rc": [r["rc"] for r in rs], "updates": updates,
           "cpu": sum(r["cpu"] for r in rs)}
    if any(out["rc"]):
        out["ok"] = False
        out["exc"] = [r["exc"] for r in rs]
        return out
    one, two = probe_updates(read_jsonl(root / "one.probe")), \
        probe_updates(read_jsonl(root / "rank0.probe"))
    la, lb = train_inner(root / "one.log"), train_inner(root / "rank0.log")
    rel = []
    for u in range(1, updates + 1):
        x, y = one[u]["logged_loss"], two[u]["logged_loss"]
        rel.append(abs(x - y) / max(abs(x), 1e-12))
    out["loss_one"] = [one[u]["logged_loss"] for u in range(1, updates + 1)]
    out["loss_two"] = [two[u]["logged_loss"] for u in range(1, updates + 1)]
    out["max_rel_loss_diff"] = max(rel)
    out["final_rel_loss_diff"] = rel[-1]
    out["logged_equal"] = all(la[u]["loss"] == lb[u]["loss"] for u in range(1, updates + 1))
    ranks = [probe_updates(read_jsonl(root / f"{rk}.probe")) for rk in ("rank0", "rank1")]

    def ids(recs):  # the examples of one update (a rank's dummy batch, ignored by fairseq, not)
        return sorted(i for r in recs for b in r["batches"] if not b["dummy"]
                      for i in (b["ids"] or []))

    out["batches_equal"] = all(ids([one[u]]) == ids([rk[u] for rk in ranks])
                               for u in range(1, updates + 1))
    import torch
    a, b = load_checkpoint(root / "one" / "checkpoint_last.pt"), \
        load_checkpoint(root / "two" / "checkpoint_last.pt")
    out["max_abs_param_diff"] = max(float((a["model"][k].float() - b["model"][k].float())
                                          .abs().max()) for k in a["model"]
                                    if torch.is_tensor(a["model"][k]))
    return out


# ------------------------------------------------------------------------- item 6: generation
#: (name, command, arguments, expectation, hypotheses expected or None). Expectations: "ok" (exit
#: 0), "ok:PATTERN" (exit 0 and PATTERN in the output: a skip must be reported, not silent),
#: "error:WORD" (a non-zero exit whose exception message contains WORD), "ok|error:WORD" (either)
GEN_CASES = [
    ("mc_samples=0", "generate", "mt", ["--model-overrides", "{'mc_samples': 0}"], "ok", 12),
    ("mc_samples=-1", "generate", "mt", ["--model-overrides", "{'mc_samples': -1}"],
     "error:mc-samples", None),
    ("mc_samples=1000", "generate", "mt", ["--model-overrides", "{'mc_samples': 1000}"], "ok", 12),
    ("beam=1", "generate", "mt", ["--beam", "1"], "ok", 12),
    ("beam=50 (> vocabulary)", "generate", "mt", ["--beam", "50", "--nbest", "2"], "ok", 24),
    ("source > the model's 1024 positions", "generate", "long", [], "error:max_positions", None),
    ("source > --max-source-positions 6", "generate", "mt", ["--max-source-positions", "6"],
     "error:max_positions", None),
    ("... with --skip-invalid-size-inputs-valid-test", "generate", "mt",
     ["--max-source-positions", "6", "--skip-invalid-size-inputs-valid-test"],
     "ok:have invalid sizes and will be skipped", 3),
    ("fairseq-interactive", "interactive", "lines", [], "ok", 4),
    ("fairseq-interactive, an empty line", "interactive", "empty", [],
     "ok|error:empty source", None),
    ("fairseq-interactive, a source > 1024 tokens", "interactive", "long_line", [],
     "ok|error:max_positions", None),
    ("t_memn2n mc_samples=0", "validate", "babi", ["--model-overrides", "{'mc_samples': '0'}"],
     "ok", None),
    ("t_memn2n mc_samples=-1", "validate", "babi", ["--model-overrides", "{'mc_samples': '-1'}"],
     "error:mc-samples", None),
    ("t_memn2n mc_samples=1000", "validate", "babi",
     ["--model-overrides", "{'mc_samples': '1000'}"], "ok", None),
]


def generation_limits(z: Zygote, root: Path, data: Dict[str, Path], names=None,
                      seed: int = 1) -> List[dict]:
    """Decode a 3-update ACVI translation model and validate a t-MEM-NN one at the edge values
    of :data:`GEN_CASES` (``names``: a subset); each case must work or fail with an error whose
    message names the problem."""
    root = Path(root)
    cases = [c for c in GEN_CASES if names is None or c[0] in names]
    kinds = {c[2] for c in cases}
    mt_ck, babi_ck = root / "mt_ck", root / "babi_ck"
    jobs = []
    if kinds - {"babi"}:
        jobs.append(job("train", spec_args({"kind": "mt", "variant": "acvi"}, data) +
                        common_args(mt_ck, 3, seed), root / "mt_train.log"))
    if "babi" in kinds:
        jobs.append(job("train", spec_args({"kind": "babi", "arch": "t_memn2n"}, data) +
                        common_args(babi_ck, 3, seed), root / "babi_train.log"))
    if "long" in kinds:  # a test set whose second source is longer than the model's positions
        long_raw = root / "long"
        long_raw.mkdir(parents=True, exist_ok=True)
        (long_raw / "test.src").write_text("t1 t2 t3\n" + " ".join(["t4"] * 1100) + "\nt5 t6\n")
        (long_raw / "test.tgt").write_text("t3 t2 t1\nt4\nt6 t5\n")
        d = data["mt"] / "dict.src.txt"
        jobs.append(job("preprocess", ["--source-lang", "src", "--target-lang", "tgt",
                                       "--testpref", long_raw / "test", "--destdir",
                                       long_raw / "bin", "--srcdict", d, "--tgtdict", d,
                                       "--workers", "1"], root / "long_pre.log"))
    for r, j in zip(z.run(jobs), jobs):
        assert r["rc"] == 0, Path(j["log"]).read_text()[-3000:]
    inputs = {"lines": "t1 t2 t3\nt5 zzz t6\n" + " ".join(["t7"] * 300) + "\nt8\n",
              "empty": "t1 t2\n\nt3 t4\n", "long_line": " ".join(["t5"] * 1100) + "\n"}
    gen = ["--user-dir", USER_DIR, "--path", mt_ck / "checkpoint_last.pt", "--cpu",
           "--num-workers", "0"]
    jobs = []
    for i, (name, cli, kind, extra, _, _) in enumerate(cases):
        log = root / f"case{i}.log"
        if cli == "generate":
            dir_ = root / "long" / "bin" if kind == "long" else data["mt"]
            argv = [dir_, *gen, "--batch-size", "8", "--gen-subset", "test", "--beam", "3", *extra]
            # a later --beam wins: the cases that set one replace the default 3
        elif cli == "interactive":
            f = root / f"input{i}.txt"
            f.write_text(inputs[kind])
            argv = [data["mt"], *gen, "--beam", "3", "--source-lang", "src", "--target-lang",
                    "tgt", "--input", f, "--buffer-size", "2", *extra]
        else:
            argv = [data["babi"], "--user-dir", USER_DIR, "--task", "babi_qa", "--babi-tasks", "1",
                    "--path", babi_ck / "checkpoint_last.pt", "--valid-subset", "test",
                    "--batch-size", "250", "--cpu", "--num-workers", "0", *extra]
        jobs.append(job(cli, argv, log, timeout=600))
    out = []
    for (name, cli, kind, extra, expect, n_hyp), j, r in zip(cases, jobs, z.run(jobs)):
        text = Path(j["log"]).read_text(errors="replace")
        out.append(judge(name, r, expect, text, n_hyp))
    return out


def judge(name: str, r: dict, expect: str, text: str, n_hyp: Optional[int]) -> dict:
    """Whether one generation case met its expectation (see :data:`GEN_CASES`)."""
    hyps = len(re.findall(r"^H-\d+", text, re.M))
    res = {"case": name, "rc": r["rc"], "timed_out": r["timed_out"], "hyps": hyps,
           "exc": r["exc"], "expect": expect, "cpu": r.get("cpu")}
    ok = False
    for alt in expect.split("|"):
        if alt.startswith("ok"):
            pattern = alt.split(":", 1)[1] if ":" in alt else None
            ok = ok or (r["rc"] == 0 and (n_hyp is None or hyps == n_hyp)
                        and (pattern is None or pattern in text))
        else:
            word = alt.split(":", 1)[1]
            msg = (r["exc"] or {}).get("message", "")
            ok = ok or (r["rc"] not in (0, None) and not r["timed_out"] and word in msg)
    res["ok"] = ok
    return res
