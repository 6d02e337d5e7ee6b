"""Control folders for issue 60 (written under OUT, default runs/hn60/controls):

* hn_verbatim: hn tasks 1-3 (whose answers are places) with each answer replaced by the form the
  stories use (gusalkhana -> gusalkhaney, bagicha -> bagichey, galiyara -> galiyarey; rasoi ghar,
  daftar and sayanakaksh unchanged): Hindi sentences, English-like answers.
* en_renamed: en task 1 with each answer replaced by a word that never occurs in a story
  (bathroom -> bathroom_a, ...): English sentences, answers not verbatim (as Hindi's four).

Usage: python make_controls.py BABI_ROOT [OUT]   (BABI_ROOT: the folder holding en/ and hn/)
"""
import os
import sys
from glob import glob

STORY_FORM = {"gusalkhana": "gusalkhaney", "bagicha": "bagichey", "galiyara": "galiyarey"}


def rewrite(src, dst, fn, tasks=(1,)):
    os.makedirs(dst, exist_ok=True)
    for path in [p for t in tasks for p in glob(os.path.join(src, f"qa{t}_*.txt"))]:
        out = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                if "\t" in line:
                    q, a, s = line.rstrip("\n").split("\t")
                    line = f"{q}\t{fn(a)}\t{s}\n"
                out.append(line)
        with open(os.path.join(dst, os.path.basename(path)), "w", encoding="utf-8") as f:
            f.writelines(out)


if __name__ == "__main__":
    root = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else "runs/hn60/controls"
    rewrite(os.path.join(root, "hn"), os.path.join(out, "hn_verbatim"), lambda a: STORY_FORM.get(a, a),
            tasks=(1, 2, 3))
    rewrite(os.path.join(root, "en"), os.path.join(out, "en_renamed"), lambda a: a + "_a")
