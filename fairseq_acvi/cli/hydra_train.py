"""``fairseq-acvi-hydra-train``: fairseq's own ``fairseq-hydra-train`` (``fairseq_cli.hydra_train``,
not a copy) with the plugin loaded: the plugin is imported before hydra composes the config (so
its criteria's and tasks' dataclass defaults are filled in) and the override
``common.user_dir=<the installed package>`` is appended when no override sets ``common.user_dir``.
The plugin's presets ship as hydra configs in ``fairseq_acvi/config``, searched when no
``--config-dir`` is given (docs/commands.md)::

    fairseq-acvi-hydra-train --config-name multi30k_acvi task.data=data-bin/mine \\
        checkpoint.save_dir=ckpt
"""
import os
import sys
from typing import Optional, Sequence

from fairseq_acvi.cli import plugin_dir, run_fairseq_cli, with_hydra_user_dir

CONFIG_DIR = os.path.join(plugin_dir(), "config")


def with_config_dir(argv: Sequence[str]) -> list:
    """``argv`` with ``--config-dir <the plugin's config folder>`` in front unless it names one
    (``--config-dir`` / ``-cd``, hydra takes one)."""
    argv = list(argv)
    if any(a in ("--config-dir", "-cd") or a.startswith("--config-dir=") for a in argv):
        return argv
    return ["--config-dir", CONFIG_DIR] + argv


def main(argv: Optional[Sequence[str]] = None):
    """Run ``fairseq_cli.hydra_train.cli_main`` on ``argv`` (hydra's arguments and overrides;
    default: the command line), plugin loaded."""
    import fairseq_cli.hydra_train
    return run_fairseq_cli(fairseq_cli.hydra_train.cli_main,
                           with_config_dir(with_hydra_user_dir(argv)), "fairseq-acvi-hydra-train")


if __name__ == "__main__":
    main(sys.argv[1:])
