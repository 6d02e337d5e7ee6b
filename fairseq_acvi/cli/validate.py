"""``fairseq-acvi-validate``: fairseq's own ``fairseq-validate`` (``fairseq_cli.validate``, not a
copy) with the plugin loaded: ``--user-dir`` naming the installed package is added when the
command line has none, so it works from any folder and loads the plugin's checkpoints
(docs/commands.md)::

    fairseq-acvi-validate data-bin/mine --path checkpoints/checkpoint_best.pt --valid-subset test
"""
import sys
from typing import Optional, Sequence

from fairseq_acvi.cli import run_fairseq_cli, with_user_dir


def main(argv: Optional[Sequence[str]] = None):
    """Run ``fairseq_cli.validate.cli_main`` on ``argv`` (default: the command line), plugin loaded."""
    import fairseq_cli.validate
    return run_fairseq_cli(fairseq_cli.validate.cli_main, with_user_dir(argv),
                           "fairseq-acvi-validate")


if __name__ == "__main__":
    main(sys.argv[1:])
