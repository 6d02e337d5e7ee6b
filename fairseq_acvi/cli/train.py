"""``fairseq-acvi-train``: fairseq's own ``fairseq-train`` (``fairseq_cli.train``, not a copy) with
the plugin loaded: ``--user-dir`` naming the installed package is added when the command line has
none, so it works from any folder. Every ``fairseq-train`` argument is accepted unchanged
(docs/commands.md)::

    fairseq-acvi-train data-bin/mine --task translation --arch acvi_lstm --criterion elbo ...
"""
import sys
from typing import Optional, Sequence

from fairseq_acvi.cli import run_fairseq_cli, with_user_dir


def main(argv: Optional[Sequence[str]] = None):
    """Run ``fairseq_cli.train.cli_main`` on ``argv`` (default: the command line), plugin loaded."""
    import fairseq_cli.train
    return run_fairseq_cli(fairseq_cli.train.cli_main, with_user_dir(argv), "fairseq-acvi-train")


if __name__ == "__main__":
    main(sys.argv[1:])
