"""A fork server for the tests: ``python -m fairseq_cli.<cli> ARGS`` without paying, at every run,
the ~4 s of CPU that importing torch and fairseq costs (the tests run well over a hundred of them).

How it stays equivalent to a fresh interpreter (the idea of tests/reliability/reliability_zygote.py):

* One *template* process per CLI module (``fairseq_cli.train``, ``.generate``, ``.interactive``,
  ``.validate``, ``.preprocess``), started with ``python forkserver.py serve``, imports that module
  and nothing else: the very top-level code ``python -m`` would run, in the same order (fairseq_cli
  configures logging before it imports fairseq), with the same environment variables (a template
  is keyed by every variable that can matter at import time, see :data:`IMPORT_ENV`, and by the
  working directory). What the import wrote to stdout / stderr is recorded and written again at
  the start of every run, as a fresh process would print it. The plugin (``--user-dir``) is *not*
  imported by the template: every run imports it itself, as the CLI does.
* The plugin's own commands (``python -m fairseq_acvi.cli.<name>``, :func:`served`) share one
  template that imports the plugin package (and with it torch and fairseq), as each of those
  commands does first; a run executes the command's module afresh as ``__main__`` (``runpy``,
  what ``python -m`` does), so only the already-imported libraries are shared.
* Each run is a process forked from the template, given the caller's own stdin / stdout / stderr
  (file descriptors passed over a Unix socket), its working directory, its full environment and
  ``sys.argv``; it calls the module's ``cli_main()`` (the whole ``if __name__ == "__main__":``
  block of these five modules) and ends as the interpreter would: the exit status of
  ``SystemExit``, 1 and a traceback on an exception, non-daemon threads joined, ``atexit``
  handlers run, streams flushed. A run killed by a signal is reported as that signal.
  numpy's global generator is reseeded from the OS (a fresh process seeds it so; Python's
  ``random`` reseeds itself on fork); torch's default generator is untouched by the template, as
  in a fresh process.
* The caller going away (a timeout) kills the run.

Clients: :func:`run` (``tests/conftest.py``'s ``run_cli``) and :func:`write_python_shim`, an
executable to give recipes as ``PYTHON``: ``$PYTHON -m fairseq_cli.<cli>`` goes through the server,
anything else is ``exec``'d by the real interpreter unchanged. Servers belong to the process named
by ``ACVI_FORKSERVER_OWNER`` (the pytest worker) and exit when it is gone or after
:data:`IDLE_S` seconds without a request (long enough for a template to serve every test file of a
worker that needs it: each start costs the ~3-4 s of imports it saves). Stdlib only at the top (the shim runs with ``python -S``).
"""
import array
import hashlib
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time

#: the modules served; each one's ``__main__`` block is exactly ``cli_main()``
CLIS = ("fairseq_cli.train", "fairseq_cli.generate", "fairseq_cli.interactive", "fairseq_cli.validate",
        "fairseq_cli.preprocess")
#: environment variables that can change what importing torch / fairseq does: they key the template
#: (``PYTHON`` itself, a recipe's choice of interpreter, is no interpreter variable: not keyed)
IMPORT_ENV = re.compile(r"^(PYTHON.|OMP_|MKL_|OPENBLAS|KMP_|GOMP|CUDA|NVIDIA|TORCH|PYTORCH|LOGLEVEL|HYDRA|"
                        r"FAIRSEQ|LD_|LC_|LANG|HOME$|TMPDIR$|PATH$|XDG_|NUMEXPR|TOKENIZERS|HF_|MPL)")
#: the plugin's commands: served by one template that has imported the plugin package
PLUGIN_CLI = "fairseq_acvi.cli."
PLUGIN_TEMPLATE = "fairseq_acvi"
IDLE_S = 300.0
OWNER = "ACVI_FORKSERVER_OWNER"
HERE = os.path.dirname(os.path.abspath(__file__))


def served(module: str) -> bool:
    """Whether ``python -m <module>`` can run through a template: fairseq's CLIs and the plugin's."""
    return module in CLIS or (module.startswith(PLUGIN_CLI) and module.count(".") == 2)


def _template(module: str) -> str:
    """The module a template imports to serve ``module``."""
    return module if module in CLIS else PLUGIN_TEMPLATE


def _key(module: str, env: dict, cwd: str) -> str:
    """The template that may serve ``module`` run with ``env`` in ``cwd``."""
    module = _template(module)
    keyed = sorted((k, v) for k, v in env.items() if IMPORT_ENV.match(k))
    blob = json.dumps([module, os.path.realpath(cwd), sys.executable, keyed])
    return f"{module.rsplit('.', 1)[-1]}-{hashlib.sha1(blob.encode()).hexdigest()[:16]}"


def _dir(owner: str) -> str:
    d = os.path.join(tempfile.gettempdir(), f"acvi-forkserver-{os.getuid()}-{owner}")
    os.makedirs(d, exist_ok=True)
    return d


def enabled() -> bool:
    """False when ``ACVI_TEST_FORKSERVER=0``: every run is then a fresh interpreter (to compare)."""
    return os.environ.get("ACVI_TEST_FORKSERVER", "1") != "0"


def cleanup(owner: str) -> None:
    """Remove the owner's folder of sockets, locks and logs (its servers exit on their own)."""
    import shutil
    shutil.rmtree(os.path.join(tempfile.gettempdir(), f"acvi-forkserver-{os.getuid()}-{owner}"),
                  ignore_errors=True)


# ------------------------------------------------------------------------------------------ client
def _connect(path: str):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return s
    except OSError:
        s.close()
        return None


def _server(module: str, env: dict, cwd: str, owner: str):
    """A connection to the template for (module, env, cwd), started first if there is none."""
    import fcntl
    base = os.path.join(_dir(owner), _key(module, env, cwd))
    s = _connect(base + ".sock")
    if s:
        return s
    with open(base + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        s = _connect(base + ".sock")
        if s:
            return s
        with open(base + ".log", "ab") as log:
            subprocess.Popen([sys.executable, os.path.join(HERE, "forkserver.py"), "serve", _template(module),
                              base + ".sock", owner], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                             stdout=log, stderr=log, start_new_session=True)
        deadline = time.time() + 300
        while time.time() < deadline:
            s = _connect(base + ".sock")
            if s:
                return s
            time.sleep(0.05)
    raise RuntimeError(f"the test fork server for {module} did not start; see {base}.log")


def run(module: str, args, env: dict, cwd: str, fds=(0, 1, 2), timeout=None) -> int:
    """Run ``python -m <module> <args>`` through the fork server with standard streams ``fds``;
    return its exit status as ``subprocess`` does (negative: killed by that signal). Raises
    ``subprocess.TimeoutExpired`` (the run is killed) after ``timeout`` seconds."""
    owner = env.get(OWNER) or str(os.getpid())
    env = dict(env, **{OWNER: owner})
    s = _server(module, env, cwd, owner)
    try:
        req = json.dumps({"module": module, "argv": [str(a) for a in args], "env": env,
                          "cwd": cwd}).encode()
        socket.send_fds(s, [len(req).to_bytes(8, "big") + req], list(fds))
        s.settimeout(timeout)
        try:
            reply = s.makefile("rb").readline()
        except socket.timeout:
            raise subprocess.TimeoutExpired([sys.executable, "-m", module, *args], timeout)
        if not reply:
            raise RuntimeError(f"the test fork server for {module} ended without a reply")
        return int(json.loads(reply)["rc"])
    finally:
        s.close()   # the run's monitor kills a run whose caller went away


PYTHON_SHIM = """#!{python} -S
import os, sys
sys.path.insert(0, {here!r})
argv = sys.argv[1:]
if len(argv) >= 2 and argv[0] == "-m" and os.environ.get({owner!r}) and \
        os.environ.get("ACVI_TEST_FORKSERVER", "1") != "0":
    import forkserver
    if forkserver.served(argv[1]):
        rc = forkserver.run(argv[1], argv[2:], dict(os.environ), os.getcwd())
        if rc < 0:
            signal = __import__("signal")
            signal.signal(-rc, signal.SIG_DFL)
            os.kill(os.getpid(), -rc)
        sys.exit(rc)
os.execv({python!r}, [{python!r}] + argv)
"""


def python_shim() -> str:
    """The shim of :func:`write_python_shim` for this process (written once into its folder)."""
    owner = os.environ.get(OWNER) or str(os.getpid())
    path = os.path.join(_dir(owner), "python")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}"
        write_python_shim(tmp)
        os.replace(tmp, path)
    return path


def write_python_shim(path: str) -> str:
    """Write at ``path`` an executable to use as a recipe's ``PYTHON``: ``-m fairseq_cli.<cli>``
    runs through the fork server (when ``ACVI_FORKSERVER_OWNER`` is set), anything else is the
    real interpreter, ``exec``'d with the same arguments."""
    with open(path, "w") as f:
        f.write(PYTHON_SHIM.format(python=sys.executable, here=HERE, owner=OWNER))
    os.chmod(path, 0o755)
    return path


# ------------------------------------------------------------------------------------------- server
def _capture_import(module: str):
    """Import ``module`` with fds 1 and 2 redirected; return the bytes written to each."""
    import importlib
    saved = [os.dup(1), os.dup(2)]
    tmps = [tempfile.TemporaryFile(), tempfile.TemporaryFile()]
    sys.stdout.flush(), sys.stderr.flush()
    os.dup2(tmps[0].fileno(), 1), os.dup2(tmps[1].fileno(), 2)
    try:
        mod = importlib.import_module(module)
    finally:
        sys.stdout.flush(), sys.stderr.flush()
        os.dup2(saved[0], 1), os.dup2(saved[1], 2)
        os.close(saved[0]), os.close(saved[1])
    out = []
    for t in tmps:
        t.seek(0)
        out.append(t.read())
        t.close()
    return mod, out


def _exit_status(exc) -> int:
    """The exit status the interpreter gives an uncaught ``exc`` (None: a normal end)."""
    if exc is None:
        return 0
    if isinstance(exc, SystemExit):
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code & 0xFF
        print(code, file=sys.stderr)
        return 1
    import traceback
    traceback.print_exception(type(exc), exc, exc.__traceback__)
    return 1


def _job(mod, req: dict, fds, printed) -> None:
    """The forked run: never returns."""
    rc = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        sys.path[0] = os.getcwd()
        module = req.get("module", mod.__name__)
        plugin = module != mod.__name__
        sys.argv = [mod.__file__ if not plugin else module] + req["argv"]
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        for fd, data in zip((1, 2), printed):
            if data:
                os.write(fd, data)
        try:
            if plugin:   # the command's module afresh, as `python -m` runs it
                import runpy
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            else:
                mod.cli_main()
            exc = None
        except BaseException as e:  # noqa: BLE001 - ends the process as the interpreter would
            exc = e
        rc = _exit_status(exc)
        import atexit
        import threading
        try:
            threading._shutdown()
        except Exception:  # noqa: BLE001 - best effort, as at interpreter exit
            pass
        atexit._run_exitfuncs()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(rc)


def _monitor(conn, mod, req, fds, printed) -> None:
    """Fork the run, report its status on ``conn``; kill it if the caller hangs up. Never returns."""
    pid = os.fork()
    if pid == 0:
        conn.close()
        _job(mod, req, fds, printed)
    for fd in fds:
        os.close(fd)
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                conn.sendall((json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n").encode())
                break
            r, _, _ = select.select([conn], [], [], 0.05)
            if r and not conn.recv(1, socket.MSG_PEEK):   # the caller went away
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
    finally:
        os._exit(0)


def _recv(conn):
    head, fds, _, _ = socket.recv_fds(conn, 8, 3)
    n = int.from_bytes(head, "big")
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("short request")
        data += chunk
    return json.loads(data), fds


def serve(module: str, path: str, owner: int) -> None:
    """The template: import ``module``, then fork a run per request on the socket ``path``."""
    sys.path[0] = os.getcwd()  # as `python -m` has it
    mod, printed = _capture_import(module)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = f"{path}.{os.getpid()}"
    srv.bind(tmp)
    srv.listen(16)
    os.rename(tmp, path)  # clients connect only once the template is ready
    last, closing = time.time(), False
    try:
        while True:
            try:
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            except ChildProcessError:
                pass
            r, _, _ = select.select([srv], [], [], 0.0 if closing else 1.0)
            if not r:
                if closing:
                    return
                try:
                    os.kill(owner, 0)
                    gone = False
                except ProcessLookupError:
                    gone = True
                if gone or time.time() - last > IDLE_S:
                    os.remove(path)  # no new client; those already queued are served below
                    closing = True
                continue
            conn, _ = srv.accept()
            last = time.time()
            try:
                req, fds = _recv(conn)
            except (OSError, ValueError, ConnectionError):
                conn.close()
                continue
            if os.fork() == 0:
                srv.close()
                _monitor(conn, mod, req, fds, printed)
            conn.close()
            for fd in fds:
                os.close(fd)
    finally:
        if not closing:
            try:
                os.remove(path)
            except OSError:
                pass


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "serve" and sys.argv[2] in CLIS + (PLUGIN_TEMPLATE,):
        serve(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit("usage: forkserver.py serve fairseq_cli.<cli>|fairseq_acvi SOCKET OWNER_PID")
