"""Every ``python -m fairseq_acvi.cli.<tool> …`` command that the documentation shows in a code
block parses with that tool's own argument parser, and every ``fairseq-train`` / ``-generate`` /
``-validate`` command with fairseq's (the plugin's options included, through ``--user-dir``): no
missing required option, no misspelt or retired option, no bad choice. (Two recipe docs once gave
``mt_report`` without its required ``--out-dir``.) Only the parsing is checked: nothing is run, and
``$VARIABLES`` / placeholders stand as values. Commands in fenced blocks and in indented code blocks
count; a schematic one that elides arguments (``...``) is left out."""
import argparse
import importlib
import os
import re
import shlex

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMAND = re.compile(r"(?:python3? -m (fairseq_acvi\.cli\.[a-z_]+)"
                     r"|^(fairseq-(?:acvi-)?(?:train|generate|validate)))(.*)")
#: fairseq's own command-line tools and the parsers they use
FAIRSEQ_TOOLS = {"fairseq-train": "get_training_parser", "fairseq-generate": "get_generation_parser",
                 "fairseq-validate": "get_validation_parser"}
#: the plugin's commands that are fairseq's with the plugin loaded (fairseq_acvi/cli/): the tool
#: whose parser they use; they add --user-dir themselves
PLUGIN_TOOLS = {"fairseq-acvi-train": "fairseq-train", "fairseq-acvi-validate": "fairseq-validate",
                "fairseq-acvi-generate": "fairseq_acvi.cli.generate"}
#: where a shell command line ends for the tool: a pipe, a list, a redirection, a comment
SHELL_END = re.compile(r"\s(\||&&|;|>|2>|#)\s|\s(>|2>)\S")


def markdown_files():
    out = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "BENCHMARKS.md")]
    for d, _, files in os.walk(os.path.join(ROOT, "docs")):
        out += [os.path.join(d, f) for f in files if f.endswith(".md")]
    return sorted(out)


def doc_commands():
    """(file:line, module, argv) for every tool command in a fenced code block or on a line of an
    indented code block that starts with it; continuation lines (trailing backslash) joined."""
    found = []
    for path in markdown_files():
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        fenced, i = False, 0
        while i < len(lines):
            line, start = lines[i], i
            if line.lstrip().startswith("```"):
                fenced = not fenced
                i += 1
                continue
            code = fenced or (line.startswith("    ") and COMMAND.match(line.strip()) is not None)
            while code and line.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line.rstrip()[:-1] + " " + lines[i].strip()
            i += 1
            m = COMMAND.search(line.strip()) if code else None
            if m and not re.search(r"(^|\s)(\.\.\.|…)(\s|$)", m.group(3)):
                rest = SHELL_END.split(" " + m.group(3) + " ")[0]
                where = f"{os.path.relpath(path, ROOT)}:{start + 1}"
                found.append((where, m.group(1) or m.group(2), shlex.split(rest)))
    return found


class _Parsed(Exception):
    pass


def parse_only(module_name, argv):
    """Run the tool's argument parsing on ``argv`` and stop right after it (argparse's own errors
    raise SystemExit)."""
    if module_name in PLUGIN_TOOLS:
        from fairseq_acvi.cli import with_user_dir
        module_name, argv = PLUGIN_TOOLS[module_name], with_user_dir(argv)
    if module_name in FAIRSEQ_TOOLS or module_name == "fairseq_acvi.cli.generate":
        # fairseq's parsers (the plugin's generate extends one), parsed in two passes
        from fairseq import options
        parser = (getattr(options, FAIRSEQ_TOOLS[module_name])() if module_name in FAIRSEQ_TOOLS
                  else importlib.import_module(module_name).build_parser())
        options.parse_args_and_arch(parser, input_args=argv)
        return
    module = importlib.import_module(module_name)
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        original(self, args, namespace)
        raise _Parsed
    argparse.ArgumentParser.parse_args = parse_then_stop
    try:
        module.main(argv)
    except _Parsed:
        return
    finally:
        argparse.ArgumentParser.parse_args = original
    raise AssertionError(f"{module_name}.main never parsed its arguments")


COMMANDS = doc_commands()


def test_the_docs_show_tool_commands():
    tools = {m for _, m, _ in COMMANDS}
    assert len(COMMANDS) >= 30 and {"fairseq_acvi.cli.mt_report", "fairseq_acvi.cli.babi_report",
                                    "fairseq_acvi.cli.summ_report", "fairseq-train",
                                    "fairseq-generate"} <= tools, sorted(tools)


@pytest.mark.parametrize("where,module,argv", COMMANDS, ids=[w for w, _, _ in COMMANDS])
def test_documented_command_parses(where, module, argv, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)                 # --user-dir fairseq_acvi and relative paths as documented
    try:
        parse_only(module, argv)
    except SystemExit as e:
        if e.code not in (0, None):
            pytest.fail(f"{where}: python -m {module} {shlex.join(argv)}\n{capsys.readouterr().err}")


def test_a_missing_required_option_is_caught():
    with pytest.raises(SystemExit):
        parse_only("fairseq_acvi.cli.mt_report", ["runs/multi30k"])
    parse_only("fairseq_acvi.cli.mt_report", ["runs/multi30k", "--out-dir", "x"])


def test_a_misspelt_plugin_option_is_caught(monkeypatch):
    monkeypatch.chdir(ROOT)
    train = ["data-bin/x", "--user-dir", "fairseq_acvi", "--task", "translation", "--arch",
             "acvi_lstm_multi30k", "--context-inference", "acvi", "--criterion", "elbo"]
    parse_only("fairseq-train", train + ["--acvi-beta", "0.0001"])
    with pytest.raises(SystemExit):
        parse_only("fairseq-train", train + ["--acvi-betta", "0.0001"])
