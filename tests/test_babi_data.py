"""bAbI parser, task and dataset (docs/method.md §4.1, §4.3): good files, malformed files, real data."""
import pytest

from fairseq_acvi.data.babi import (find_task_files, parse_babi_file, parse_task_list,
                                    split_train_valid, tokenize)
from fairseq_acvi.tasks.babi_qa import BabiQAConfig, BabiQATask

GOOD = """1 Mary moved to the bathroom.
2 John went to the hallway.
3 Where is Mary? \tbathroom\t1
4 Daniel went back to the hallway.
5 Sandra moved to the garden.
6 Where is Daniel?\thallway\t4
1 The office is east of the hallway.
2 The kitchen is north of the office.
3 How do you go from the kitchen to the hallway?\ts,w\t1 2
"""


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def test_tokenize():
    assert tokenize("Where is Mary? ") == ["where", "is", "mary"]
    assert tokenize("Mary went back to the hallway.") == ["mary", "went", "back", "to", "the", "hallway"]


def test_parse_good_file(tmp_path):
    exs = parse_babi_file(write(tmp_path, "qa1_x_train.txt", GOOD), task=1)
    assert len(exs) == 3
    a, b, c = exs
    assert a.story == [["mary", "moved", "to", "the", "bathroom"], ["john", "went", "to", "the", "hallway"]]
    assert a.query == ["where", "is", "mary"] and a.answer == "bathroom" and a.supports == [0]
    # questions are not memories: story of the 2nd question = 4 statements, support "4" -> index 2
    assert len(b.story) == 4 and b.story[2][0] == "daniel" and b.supports == [2]
    # a new story starts at id 1; the comma-joined answer is ONE token
    assert len(c.story) == 2 and c.answer == "s,w" and c.supports == [0, 1]
    assert a.task == 1 and a.source.endswith("qa1_x_train.txt:3")


@pytest.mark.parametrize("text,line,msg", [
    ("1 Mary moved.\n3 John went.\n", 2, "does not follow"),                   # skipped id
    ("2 Mary moved.\n", 1, "does not follow"),                                  # must start at 1
    ("x Mary moved.\n", 1, "expected 'ID text'"),                               # no id
    ("1 Mary moved.\n2 Where is Mary?\tbathroom\n", 2, "3 tab-separated"),      # missing field
    ("1 Mary moved.\n2 Where is Mary?\tbathroom\t1\textra\n", 2, "3 tab-separated"),
    ("1 Mary moved.\n2 Where is Mary?\tbathroom\t2\n", 2, "points forward"),    # itself
    ("1 Mary moved.\n2 Where is Mary?\tbathroom\t5\n", 2, "points forward"),    # nonexistent
    ("1 Mary moved.\n2 John left.\n3 Where is Mary?\tbathroom\t0\n", 3, "not a line of this story"),
    ("1 Mary moved.\n2 Where?\tb\t1\n3 Where is Mary?\tbathroom\t2\n", 3, "is a question"),
    ("1 Mary moved.\n2 Where is Mary?\t\t1\n", 2, "answer is empty"),
    ("1 Mary moved.\n2 Where is Mary?\t  \t1\n", 2, "answer is empty"),
    ("1 Mary moved.\n2 Where is Mary?\tn,,w\t1\n", 2, "empty item in its comma-separated list"),
    ("1 Mary moved.\n2 Where is Mary?\tthe\u2581room\t1\n", 2, "reserved"),
    ("1 Mary\u2581moved.\n", 1, "reserved"),
    ("1 Mary moved.\n2 Where is Mary?\tbathroom\tone\n", 2, "not a number"),
    ("1 Mary moved.\n\n2 John went.\n", 2, "empty line"),
])
def test_malformed_files_raise_with_file_and_line(tmp_path, text, line, msg):
    path = write(tmp_path, "qa1_bad_train.txt", text)
    with pytest.raises(ValueError, match=msg) as err:
        parse_babi_file(path)
    assert str(err.value).startswith(f"{path}:{line}: ")


def test_error_names_the_right_line(tmp_path):
    text = GOOD + "4 Where is John?\thallway\t9\n"
    path = write(tmp_path, "qa2_bad_test.txt", text)
    with pytest.raises(ValueError, match=r"qa2_bad_test.txt:10: supporting fact 9 points forward"):
        parse_babi_file(path)


def test_task_list_and_split():
    assert parse_task_list("all", [3, 1, 2]) == [1, 2, 3]
    assert parse_task_list("1,3", [1, 2, 3]) == [1, 3]
    assert parse_task_list("1-3", [1, 2, 3]) == [1, 2, 3]
    with pytest.raises(ValueError, match="not found"):
        parse_task_list("4", [1, 2, 3])
    with pytest.raises(ValueError, match="cannot read"):
        parse_task_list("one", [1])
    tr, va = split_train_valid(1000, 0.1, seed=5)
    assert len(tr) == 900 and len(va) == 100 and not set(tr) & set(va)
    tr2, va2 = split_train_valid(1000, 0.1, seed=5)
    assert (va == va2).all()
    assert not (split_train_valid(1000, 0.1, seed=6)[1] == va).all()


def make_folder(tmp_path, train=GOOD, test=GOOD, name="guess"):
    folder = tmp_path / "babi"
    folder.mkdir(exist_ok=True)
    (folder / f"qa1_{name}_train.txt").write_text(train)
    (folder / f"qa1_{name}_test.txt").write_text(test)
    return str(folder)


def test_task_on_game_style_folder_and_build_net_input(tmp_path):
    folder = make_folder(tmp_path, train=GOOD * 1)
    task = BabiQATask.setup_task(BabiQAConfig(data=folder, babi_tasks="1", valid_fraction=0.34))
    assert task.train_size == 2
    for split in ("train", "valid", "test"):
        task.load_dataset(split)
    d = task.target_dictionary
    assert d.index("s,w") != d.unk() and d.index("bathroom") != d.unk()
    ds = task.datasets["test"]
    s = ds.collater([0, 1, 2])
    story, query = s["net_input"]["story"], s["net_input"]["query"]
    assert story.shape[:2] == (3, 4) and query.shape[0] == 3
    # slot 0 is the MOST RECENT statement
    assert d[story[1, 0, 0]] == "sandra" and d[story[1, 3, 0]] == "mary"
    assert [d[i] for i in s["target"]] == ["bathroom", "hallway", "s,w"]
    # build_net_input: plain strings, chronological; unknown words -> unk
    net = task.build_net_input([["Mary moved to the bathroom.", "Zorg went to the moon."]],
                               ["Where is Mary?"])
    assert net["story"].shape == (1, 2, 5)
    assert net["story"][0, 0, 0] == d.unk() and d[net["story"][0, 1, 0]] == "mary"
    assert [d[i] for i in net["query"][0]] == ["where", "is", "mary"]


def test_memory_size_keeps_most_recent(tmp_path):
    lines = "".join(f"{i} Fact number{i} here.\n" for i in range(1, 8)) + "8 Where?\tnumber7\t7\n"
    folder = make_folder(tmp_path, train=lines, test=lines)
    task = BabiQATask.setup_task(BabiQAConfig(data=folder, babi_tasks="1", memory_size=3,
                                              valid_fraction=0.0))
    task.load_dataset("test")
    s = task.datasets["test"].collater([0])
    d = task.dictionary
    assert s["net_input"]["story"].shape[1] == 3
    assert [d[s["net_input"]["story"][0, j, 1]] for j in range(3)] == ["number7", "number6", "number5"]


def test_task_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        BabiQATask.setup_task(BabiQAConfig(data=str(tmp_path / "nope")))
    folder = make_folder(tmp_path, train="1 Mary moved.\n2 Where?\tx\t3\n")
    with pytest.raises(ValueError, match="qa1_guess_train.txt:2"):
        BabiQATask.setup_task(BabiQAConfig(data=folder))


def test_real_babi_files(shared_data):
    folder = shared_data / "babi" / "tasks_1-20_v1-2" / "en"
    if not folder.is_dir():
        pytest.skip("bAbI en not present")
    files = find_task_files(str(folder))
    assert sorted(files) == list(range(1, 21))
    for t in (1, 8, 19):
        exs = parse_babi_file(files[t]["train"], task=t)
        assert len(exs) == 1000
    assert {e.answer for e in parse_babi_file(files[19]["test"])} >= {"n,w", "s,e"}
    task = BabiQATask.setup_task(BabiQAConfig(data=str(folder), babi_tasks="1,8"))
    assert task.train_size == 1800 and len(task.examples["valid"]) == 200
    assert len(task.examples["test"]) == 2000
