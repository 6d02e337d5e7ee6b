"""The published tables (fairseq_acvi/published.py) are complete, and the reports use them."""
from fairseq_acvi import published


def test_tables_are_complete():
    for table in (published.BABI_SINGLE, published.BABI_JOINT):
        assert sorted(table) == list(range(1, 21))
        assert all(len(row) == 3 and all(0 <= v <= 100 for v in row) for row in table.values())
    assert sorted(published.BABI_TASK_NAMES) == list(range(1, 21))
    # D Tables 11-15: every task of the five other folders; spot values and the passes that
    # docs/method.md §5 states (MemN2N / S = 1 / S = 10)
    passes = {"hn": (5, 5, 8), "shuffled": (5, 4, 8), "en-10k": (13, 13, 15), "hn-10k": (12, 13, 15),
              "shuffled-10k": (14, 14, 15)}
    assert set(published.BABI_SINGLE_OTHER) == set(passes)
    for variant, (source, table) in published.BABI_SINGLE_OTHER.items():
        assert sorted(table) == list(range(1, 21)) and source.startswith("D Table 1")
        assert tuple(sum(row[i] >= 95 for row in table.values()) for i in range(3)) == passes[variant]
    assert published.BABI_SINGLE_OTHER["en-10k"][1][19] == (33, 33, 36)
    assert published.BABI_SINGLE_OTHER["hn"][1][11] == (84, 90, 98)
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
    assert babi_render.babi_single_published is published.babi_single_published
    assert published.babi_single_published("en")[2] is published.BABI_SINGLE
    assert published.babi_single_published("en-10k")[:2] == ("D Table 13", "en-10k")
    assert published.babi_single_published("fixture")[1] == "en"     # not a release folder
    assert babi_render.BABI_JOINT is published.BABI_JOINT
    assert captioning.CAPTIONING_TABLE3 is published.CAPTIONING_TABLE3
