"""``fairseq-interactive`` answers an empty input line and goes on.

fairseq's interactive loop (``fairseq_cli.interactive.buffered_read``) passes every line it reads
to the model; an empty one becomes a source of only ``</s>``, which the plugin's encoders refuse
(``modules/seq2seq/lstm_encoder.py``), and the whole session stopped on it. Importing this module (``import
fairseq_acvi`` does, and ``fairseq-interactive --user-dir fairseq_acvi`` imports the plugin before its
loop starts) wraps that reader: an empty (or whitespace-only) line is answered on stderr, "empty
input: nothing to translate", and skipped; every other line is read exactly as before.
"""
import logging
import sys

logger = logging.getLogger("fairseq_acvi.interactive")

MESSAGE = "empty input: nothing to translate (type a sentence; end the input to stop)"


def _skip_empty(original):
    def buffered_read(input, buffer_size):
        for buffer in original(input, buffer_size):
            kept = [line for line in buffer if line.strip()]
            for _ in range(len(buffer) - len(kept)):
                logger.warning(MESSAGE)
            if kept:
                yield kept

    buffered_read._acvi_skips_empty = True
    return buffered_read


def answer_empty_lines() -> None:
    """Wrap ``buffered_read`` of fairseq's interactive module — imported as ``fairseq_cli.interactive``
    (the ``fairseq-interactive`` command) or run as ``__main__`` (``python -m
    fairseq_cli.interactive``) — where it is loaded. Idempotent."""
    modules = [sys.modules.get("fairseq_cli.interactive")]
    main = sys.modules.get("__main__")
    if getattr(getattr(main, "__spec__", None), "name", None) == "fairseq_cli.interactive":
        modules.append(main)
    for module in modules:
        original = getattr(module, "buffered_read", None)
        if original is not None and not getattr(original, "_acvi_skips_empty", False):
            module.buffered_read = _skip_empty(original)


answer_empty_lines()
