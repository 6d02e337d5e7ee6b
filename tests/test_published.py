"""The published tables (fairseq_acvi/published.py) are complete, and the reports use them."""
from fairseq_acvi import published


def test_tables_are_complete():
    for table in (published.BABI_SINGLE, published.BABI_JOINT):
        assert sorted(table) == list(range(1, 21))
        assert all(len(row) == 3 and all(0 <= v <= 100 for v in row) for row in table.values())
    assert sorted(published.BABI_TASK_NAMES) == list(range(1, 21))
    assert published.BABI_SINGLE[6] == (92, 93, 97) and published.BABI_JOINT[19] == (10, 14, 17)
    assert len(published.GUESS_NUMBER) == 6
    for rows in published.GUESS_NUMBER.values():
        assert set(rows) == {"memn2n", "t_memn2n_S1", "t_memn2n_S10"}
    assert published.GUESS_NUMBER[(0, 100, 10000)]["t_memn2n_S10"] == (85, 97, 8.5)
    assert set(published.CAPTIONING_TABLE3) == {"SA", "Structured", "Variational", "VED", "ACVI"}
    assert all(len(v) == 4 for v in published.CAPTIONING_TABLE3.values())


def test_reports_read_the_one_module():
    from fairseq_acvi.babi_eval import render as babi_render    # babi_report's tables and charts
    from fairseq_acvi.metrics import captioning
    assert babi_render.BABI_SINGLE is published.BABI_SINGLE
    assert babi_render.BABI_JOINT is published.BABI_JOINT
    assert captioning.CAPTIONING_TABLE3 is published.CAPTIONING_TABLE3
