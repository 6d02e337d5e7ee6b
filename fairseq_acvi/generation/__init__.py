"""Decoding helpers that sit beside fairseq's beam search (docs/uncertainty.md)."""
