"""``fairseq-acvi-interactive``: fairseq's own ``fairseq-interactive`` (``fairseq_cli.interactive``,
not a copy) with the plugin loaded: ``--user-dir`` naming the installed package is added when the
command line has none, so it works from any folder (docs/commands.md)::

    echo "ein Satz ." | fairseq-acvi-interactive data-bin/mine --path checkpoints/checkpoint_best.pt \\
        --source-lang de --target-lang en --beam 5
"""
import sys
from typing import Optional, Sequence

from fairseq_acvi.cli import run_fairseq_cli, with_user_dir


def main(argv: Optional[Sequence[str]] = None):
    """Run ``fairseq_cli.interactive.cli_main`` on ``argv`` (default: the command line), plugin
    loaded."""
    import fairseq_cli.interactive
    return run_fairseq_cli(fairseq_cli.interactive.cli_main, with_user_dir(argv),
                           "fairseq-acvi-interactive")


if __name__ == "__main__":
    main(sys.argv[1:])
