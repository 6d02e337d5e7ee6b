"""Fork server of the reliability suite: import torch, fairseq and the plugin once, then run each
job (one fairseq CLI: train, generate, interactive, validate, preprocess) in a forked child.

Why a fork server: a fresh ``python -m fairseq_cli.train`` spends ~6 s of CPU importing torch and
fairseq before it trains a tiny model for one. Each child here is still a separate process that
starts from the state right after those imports (it has trained nothing), so what one run hands to
the next (a resume) goes through the files on disk only, as between two real CLI invocations;
a SIGKILL ends exactly that child. ``tests/reliability/reliability_harness.py`` drives it.

Protocol: one JSON request per line on stdin, one JSON reply per line on the original stdout
(the server's own stdout is redirected to stderr so that fairseq's logging cannot corrupt it).

    {"op": "run", "jobs": [JOB, ...]}   run the jobs concurrently; reply {"results": [RESULT, ...]}
    {"op": "quit"}

JOB keys: ``cli`` (train | generate | interactive | validate | preprocess), ``argv`` (list of str),
``log`` (the child's stdout and stderr), and optionally ``probe`` (JSON lines: one per
``Trainer.train_step``, see :func:`install_probe`), ``save_trace`` (JSON lines: save start / end
and the file operations of every checkpoint save, :func:`install_save_hooks`), ``inject``
({"save": k, "op": i, "frac": f}: the child SIGKILLs itself during operation i of its k-th save,
a write or copy after ``frac`` of its bytes, a rename or removal before it), ``kill`` (the server
SIGKILLs the child: {"save": k, "delay": s} ``s`` seconds after its k-th save started, or
{"after": s} ``s`` seconds after the start), ``stdin`` (a file fed as standard input), ``env``
(variables set in the child), ``timeout`` (seconds; the child is killed and the result says
``timed_out``).

RESULT: ``rc`` (exit status, or -signal), ``timed_out``, ``killed`` (by the server), ``wall``
and ``cpu`` (seconds), ``exc`` ({"type", "message"} of an exception that ended the child, else
null).
"""
import builtins
import ctypes
import hashlib
import json
import math
import os
import shutil
import signal
import sys
import time
import traceback

CLIS = {"train": "fairseq_cli.train", "generate": "fairseq_cli.generate",
        "interactive": "fairseq_cli.interactive", "validate": "fairseq_cli.validate",
        "preprocess": "fairseq_cli.preprocess"}


def _jsonline(fd: int, obj) -> None:
    """One unbuffered JSON line (survives a SIGKILL right after the call)."""
    os.write(fd, (json.dumps(obj) + "\n").encode())


# ------------------------------------------------------------------------------------------ probe
def _rng_digest() -> str:
    import torch
    return hashlib.sha1(torch.random.get_rng_state().numpy().tobytes()).hexdigest()[:16]


def _param_stats(model):
    """(all finite, float64 checksum) over the model's parameters."""
    import torch
    finite, total = True, 0.0
    with torch.no_grad():
        for p in model.parameters():
            q = p.detach().double()
            finite = finite and bool(torch.isfinite(q).all())
            total += float(q.sum()) + 1e-3 * float(q.abs().sum())
    return finite, total


def _counters(model) -> dict:
    """The schedule state the modules hold: ``num_updates`` (KL delay / warm-up / annealing) and
    ``linear_start`` (MemN2N), by module name."""
    out = {}
    for name, m in model.named_modules():
        for attr in ("num_updates", "linear_start"):
            v = m.__dict__.get(attr)
            if isinstance(v, (bool, int, float)):
                out[f"{name or 'model'}.{attr}"] = v
    return out


def _float(v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else repr(v)


def install_probe(path: str) -> None:
    """Record every ``Trainer.train_step``: the update counter before and after (applied or
    skipped), the sample ids of its batches (data order), a digest of torch's RNG state when each
    batch's forward starts (the ACVI noise, the escort draws and the C++ kernel's seed all come
    from it), each batch's loss, the logged loss, the loss scale, whether every parameter is finite
    and whether the parameters changed, and the modules' schedule counters."""
    from fairseq.trainer import Trainer
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    original = Trainer.train_step

    def train_step(self, samples, raise_oom=False):
        rec = {"before": self.get_num_updates(), "batches": []}
        task_step = self.task.train_step

        def probed_task_step(*args, **kwargs):
            sample = kwargs.get("sample", args[0] if args else None)
            ids = sample.get("id") if isinstance(sample, dict) else None
            entry = {"rng": _rng_digest(),
                     "ids": ids.tolist() if hasattr(ids, "tolist") else None,
                     "dummy": bool(kwargs.get("ignore_grad", False))}
            rec["batches"].append(entry)
            loss, sample_size, logging_output = task_step(*args, **kwargs)
            entry["loss"] = _float(logging_output.get("loss"))
            entry["sample_size"] = _float(sample_size)
            return loss, sample_size, logging_output

        finite_before, sum_before = _param_stats(self.model)
        self.task.train_step = probed_task_step
        try:
            out = original(self, samples, raise_oom)
        finally:
            del self.task.train_step
        finite_after, sum_after = _param_stats(self.model)
        scaler = getattr(self.optimizer, "scaler", None)
        rec.update(after=self.get_num_updates(), logged_loss=_float((out or {}).get("loss")),
                   logged_nll=_float((out or {}).get("nll_loss")),
                   loss_scale=_float(getattr(scaler, "loss_scale", None)) if scaler else None,
                   params_finite=finite_after, params_changed=sum_after != sum_before,
                   counters=_counters(self.model))
        rec["applied"] = rec["after"] > rec["before"]
        _jsonline(fd, rec)
        return out

    Trainer.train_step = train_step


# ----------------------------------------------------------------------------- save interception
class _Killer:
    """The file operations of one checkpoint save, with an optional self-SIGKILL inside one."""

    def __init__(self, save_dir: str, ops: list, target):
        self.save_dir = os.path.abspath(save_dir)
        self.ops = ops
        self.target = target  # {"op": i, "frac": f, "bytes": expected size of op i} or None

    def mine(self, path) -> bool:
        try:
            return os.path.abspath(os.fspath(path)).startswith(self.save_dir + os.sep)
        except TypeError:
            return False

    def begin(self, **op) -> int:
        self.ops.append(op)
        i = len(self.ops) - 1
        t = self.target
        if t is not None and t["op"] == i and op["op"] in ("rename", "remove") and t["frac"] < 0.5:
            self.die()
        return i

    def end(self, i: int) -> None:
        t = self.target
        if t is not None and t["op"] == i and self.ops[i]["op"] in ("rename", "remove"):
            self.die()  # frac >= 0.5: right after the rename / removal

    def limit(self, i: int):
        """Bytes of op ``i`` to write before dying (None: no kill in this op)."""
        t = self.target
        if t is None or t["op"] != i:
            return None
        return int(t["frac"] * max(1, t.get("bytes") or 1))

    @staticmethod
    def die():
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # never reached


class _CountingFile:
    """A binary file opened for writing whose bytes are counted (and cut short by the killer)."""

    def __init__(self, f, killer: _Killer, i: int):
        self._f, self._k, self._i = f, killer, i
        self._limit = killer.limit(i)

    def write(self, data):
        op = self._k.ops[self._i]
        n = len(data) if isinstance(data, (bytes, bytearray)) else len(memoryview(data).cast("B"))
        if self._limit is not None and op["bytes"] + n > self._limit:
            keep = self._limit - op["bytes"]
            self._f.write(bytes(memoryview(data).cast("B")[:keep]))
            self._f.flush()
            self._k.die()
        op["bytes"] += n
        return self._f.write(data)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()
        return False

    def __getattr__(self, name):
        return getattr(self._f, name)


def install_save_hooks(path, inject) -> None:
    """Wrap ``checkpoint_utils.save_checkpoint``: write ``save_start`` / ``save_end`` events (the
    latter with every file operation in the save folder: writes and copies with their sizes,
    renames, removals) to ``path``, and SIGKILL the process inside the save ``inject`` names."""
    from fairseq import checkpoint_utils
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if path else None
    original = checkpoint_utils.save_checkpoint
    state = {"k": 0}

    def save_checkpoint(cfg, trainer, epoch_itr, val_loss):
        state["k"] += 1
        k = state["k"]
        if fd is not None:
            _jsonline(fd, {"event": "save_start", "save": k, "t": time.time(),
                           "num_updates": trainer.get_num_updates()})
        ops = []
        target = inject if inject and inject["save"] == k else None
        killer = _Killer(cfg.save_dir, ops, target)
        real = {"open": builtins.open, "rename": os.rename, "replace": os.replace,
                "remove": os.remove, "unlink": os.unlink, "copyfile": shutil.copyfile}

        def open_(file, mode="r", *args, **kwargs):
            f = real["open"](file, mode, *args, **kwargs)
            if ("w" in mode or "a" in mode) and "b" in mode and killer.mine(file):
                i = killer.begin(op="write", path=os.path.basename(file), bytes=0)
                return _CountingFile(f, killer, i)
            return f

        def mover(kind):
            def move(src, dst, *args, **kwargs):
                if not killer.mine(dst):
                    return real[kind](src, dst, *args, **kwargs)
                i = killer.begin(op="rename", src=os.path.basename(src), dst=os.path.basename(dst))
                out = real[kind](src, dst, *args, **kwargs)
                killer.end(i)
                return out
            return move

        def remover(kind):
            def remove(p, *args, **kwargs):
                if not killer.mine(p):
                    return real[kind](p, *args, **kwargs)
                i = killer.begin(op="remove", path=os.path.basename(p))
                out = real[kind](p, *args, **kwargs)
                killer.end(i)
                return out
            return remove

        def copyfile(src, dst, *args, **kwargs):
            if not killer.mine(dst):
                return real["copyfile"](src, dst, *args, **kwargs)
            i = killer.begin(op="copy", src=os.path.basename(src), dst=os.path.basename(dst),
                             bytes=0)
            with real["open"](src, "rb") as fin, real["open"](dst, "wb") as fout:
                out = _CountingFile(fout, killer, i)
                while True:
                    chunk = fin.read(1 << 16)
                    if not chunk:
                        break
                    out.write(chunk)
            return dst

        builtins.open, os.rename, os.replace = open_, mover("rename"), mover("replace")
        os.remove, os.unlink, shutil.copyfile = remover("remove"), remover("unlink"), copyfile
        try:
            result = original(cfg, trainer, epoch_itr, val_loss)
        finally:
            builtins.open, os.rename, os.replace = real["open"], real["rename"], real["replace"]
            os.remove, os.unlink, shutil.copyfile = real["remove"], real["unlink"], real["copyfile"]
        if fd is not None:
            _jsonline(fd, {"event": "save_end", "save": k, "t": time.time(), "ops": ops,
                           "num_updates": trainer.get_num_updates()})
        return result

    checkpoint_utils.save_checkpoint = save_checkpoint


# ------------------------------------------------------------------------------------------ child
def _die_with_parent() -> None:
    try:  # Linux: SIGKILL this child if the server dies
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort, not on every platform
        pass


def run_child(job: dict) -> None:
    """Run one job in this (forked) process; never returns."""
    rc = 1
    try:
        _die_with_parent()
        fd = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        if job.get("stdin"):
            os.dup2(os.open(job["stdin"], os.O_RDONLY), 0)
        os.environ.update({k: str(v) for k, v in (job.get("env") or {}).items()})
        import importlib
        module = importlib.import_module(CLIS[job["cli"]])
        if job.get("probe"):
            install_probe(job["probe"])
        if job.get("save_trace") or job.get("inject"):
            install_save_hooks(job.get("save_trace"), job.get("inject"))
        sys.argv = [f"fairseq-{job['cli']}"] + [str(a) for a in job["argv"]]
        try:
            module.cli_main()
            rc = 0
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if rc:
                _write_exc(job, e)
        except BaseException as e:  # noqa: BLE001 - reported to the server, as a CLI would print it
            traceback.print_exc()
            _write_exc(job, e)
            rc = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(rc)


def _write_exc(job, e) -> None:
    with open(job["log"] + ".exc.json", "w") as f:
        json.dump({"type": type(e).__name__, "message": str(e)}, f)


# ----------------------------------------------------------------------------------------- server
def _save_started(job, k) -> bool:
    try:
        with open(job["save_trace"]) as f:
            return any(json.loads(line).get("event") == "save_start" and
                       json.loads(line).get("save") == k for line in f if line.strip())
    except (FileNotFoundError, ValueError):
        return False


def run_jobs(jobs) -> list:
    live = {}
    results = [None] * len(jobs)
    for n, job in enumerate(jobs):
        os.makedirs(os.path.dirname(os.path.abspath(job["log"])), exist_ok=True)
        if os.path.exists(job["log"] + ".exc.json"):
            os.remove(job["log"] + ".exc.json")
        pid = os.fork()
        if pid == 0:
            run_child(job)
        live[pid] = {"n": n, "start": time.time(), "kill_at": None, "killed": False,
                     "timed_out": False}
    while live:
        now = time.time()
        busy = False
        for pid, st in list(live.items()):
            job = jobs[st["n"]]
            kill = job.get("kill")
            if kill and not st["killed"]:
                busy = True
                if st["kill_at"] is None:
                    if "after" in kill:
                        st["kill_at"] = st["start"] + kill["after"]
                    elif _save_started(job, kill["save"]):
                        st["kill_at"] = time.time() + kill.get("delay", 0.0)
                if st["kill_at"] is not None and time.time() >= st["kill_at"]:
                    os.kill(pid, signal.SIGKILL)
                    st["killed"] = True
            if not st["timed_out"] and now - st["start"] > job.get("timeout", 600):
                os.kill(pid, signal.SIGKILL)
                st["timed_out"] = True
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                rc = os.waitstatus_to_exitcode(status)
                exc = None
                if os.path.exists(job["log"] + ".exc.json"):
                    with open(job["log"] + ".exc.json") as f:
                        exc = json.load(f)
                results[st["n"]] = {"rc": rc, "timed_out": st["timed_out"],
                                    "killed": st["killed"], "wall": time.time() - st["start"],
                                    "cpu": usage.ru_utime + usage.ru_stime, "exc": exc}
                del live[pid]
        time.sleep(0.0005 if busy else 0.01)
    return results


def _warm_up() -> None:
    """Pay once, here, the first-use costs every training child would pay again (~2.5 s of CPU
    each): torch's optimizer constructor imports torch._dynamo, and fairseq's first conversion of
    the command line to its hydra config loads hydra's config store and plugins."""
    import torch._dynamo  # noqa: F401
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, ["-", "--task", "translation", "--arch", "lstm",
                                                "--optimizer", "adam"])
    convert_namespace_to_omegaconf(args)


def main() -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    # fairseq_cli.train first: it sets up logging (fairseq's line format) before importing fairseq,
    # as `python -m fairseq_cli.train` does
    import fairseq_cli.train  # noqa: F401
    import torch
    torch.set_num_threads(1)
    import fairseq_acvi  # noqa: F401  (the plugin and its fairseq fixes)
    import fairseq_cli.generate  # noqa: F401
    import fairseq_cli.interactive  # noqa: F401
    import fairseq_cli.preprocess  # noqa: F401
    import fairseq_cli.validate  # noqa: F401
    from fairseq_acvi.modules.student_t import cpu_kernel
    cpu_kernel.load()  # compile / load t-MEM-NN's kernel once, not in every child
    _warm_up()
    proto.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        if req.get("op") == "quit":
            break
        try:
            reply = {"results": run_jobs(req["jobs"])}
        except Exception as e:  # noqa: BLE001 - a server error is reported, not fatal
            reply = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        proto.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    main()
