"""A clear message when plain fairseq loads a fairseq-acvi checkpoint without the plugin.

``fairseq-generate`` / ``-validate`` / ``-interactive`` run without ``--user-dir`` never import the
plugin, so the checkpoint's classes are not allow-listed for torch's weights-only loading and
torch's error advises ``weights_only=False`` (unsafe). This module rewrites that one error, and
nothing else, into: add ``--user-dir <the plugin>`` or run the ``fairseq-acvi-*`` command.

How it runs without the plugin (docs/commands.md): the package installs a ``.pth`` file
(``fairseq_acvi_plugin_hint.pth``, written by setup.py) whose line loads *this file* on its own
(not the package: no torch, no fairseq) and calls :func:`install`. That only puts a finder on
``sys.meta_path`` which does nothing until ``fairseq.checkpoint_utils`` is imported; then it wraps
that module's ``load_checkpoint_to_cpu``. The wrapper never changes how a checkpoint loads (no
allow-listing, weights-only stays on): it only replaces torch's weights-only
``pickle.UnpicklingError`` by a message naming the file and the fix, when the checkpoint was
trained with the plugin (its pickle names the ``fairseq_acvi`` user dir) and the plugin is not
loaded. Everything here uses the standard library only.
"""
import os
import sys

TARGET = "fairseq.checkpoint_utils"
PLUGIN_DIR = os.path.dirname(os.path.abspath(__file__))
#: fairseq's commands that have a fairseq-acvi-* twin (fairseq_acvi/cli)
TWINS = ("generate", "validate", "interactive", "train")


def pickle_strings(path: str):
    """The string constants of the checkpoint's pickle (``data.pkl`` of torch's zip format), read
    with :mod:`pickletools` (opcodes only: nothing is unpickled, no code runs). Empty when the file
    is not a torch zip checkpoint."""
    import pickletools
    import zipfile
    try:
        with zipfile.ZipFile(path) as zf:
            name = next((n for n in zf.namelist() if n.endswith("/data.pkl")), None)
            if name is None:
                return []
            data = zf.read(name)
        return [arg for op, arg, _ in pickletools.genops(data) if isinstance(arg, str)]
    except Exception:  # not a zip, truncated pickle, ...: no hint, the original error stands
        return []


def trained_with_plugin(path: str) -> bool:
    """Whether the checkpoint's config names the plugin as its user dir (``--user-dir`` ending in
    ``fairseq_acvi``, as every command of the plugin and its recipes write)."""
    return any(os.path.basename(s.rstrip("/\\")) == "fairseq_acvi" for s in pickle_strings(path))


def hint(path: str) -> str:
    """The message for a plugin checkpoint loaded without the plugin."""
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    twin = next((f"fairseq-acvi-{t}" for t in TWINS if prog == f"fairseq-{t}"), None)
    command = f"`{twin}` with the same arguments" if twin else "the fairseq-acvi-* command"
    return (f"{path} was trained with the fairseq-acvi plugin, which this command has not loaded: "
            f"add `--user-dir {PLUGIN_DIR}` or run {command}. The plugin makes its checkpoints "
            f"load with torch's weights-only loading; do not turn weights-only loading off "
            f"(docs/commands.md).")


def _is_weights_only_error(err: BaseException) -> bool:
    import pickle
    return isinstance(err, pickle.UnpicklingError) and "weights_only" in str(err)


def wrap(checkpoint_utils) -> None:
    """Wrap ``checkpoint_utils.load_checkpoint_to_cpu`` (module object) as the module docstring
    says; idempotent."""
    original = checkpoint_utils.load_checkpoint_to_cpu
    if getattr(original, "_fairseq_acvi_hint", False):
        return

    def load_checkpoint_to_cpu(path, *args, **kwargs):
        try:
            return original(path, *args, **kwargs)
        except Exception as err:
            if ("fairseq_acvi" in sys.modules or not _is_weights_only_error(err)
                    or not trained_with_plugin(str(path))):
                raise
            raise type(err)(hint(str(path))) from None

    load_checkpoint_to_cpu._fairseq_acvi_hint = True
    load_checkpoint_to_cpu.__wrapped__ = original
    load_checkpoint_to_cpu.__doc__ = original.__doc__
    checkpoint_utils.load_checkpoint_to_cpu = load_checkpoint_to_cpu


class _Loader:
    """Delegates to the real loader, then wraps the loaded module."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        wrap(module)

    def __getattr__(self, name):
        return getattr(self.loader, name)


class Finder:
    """A ``sys.meta_path`` entry that answers only for ``fairseq.checkpoint_utils``: it asks the
    other finders for its spec and gives it a loader that wraps the module after loading."""

    _fairseq_acvi_hint = True

    def find_spec(self, name, path=None, target=None):
        if name != TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def install() -> None:
    """Put :class:`Finder` first on ``sys.meta_path`` (once); wrap at once if fairseq's
    checkpoint_utils is already imported."""
    if any(getattr(f, "_fairseq_acvi_hint", False) for f in sys.meta_path):
        return
    if TARGET in sys.modules:
        wrap(sys.modules[TARGET])
    sys.meta_path.insert(0, Finder())
