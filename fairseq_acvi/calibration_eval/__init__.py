"""Token-level calibration and error detection (docs/uncertainty.md §4): the measurement
(``measure``) and the report (``render``) behind ``fairseq_acvi.cli.calibration``."""
