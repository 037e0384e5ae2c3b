"""Write regex_tf.json: TensorFlow's own results for RE2 corner cases of StaticRegexReplace,
RegexReplace and RegexFullMatch (empty matches stepping over UTF-8 characters, malformed
rewrites, anchors and word boundaries in a global replace, bytes that are not UTF-8, the
patterns RE2 rejects), checked by tests/test_hostile_kernels.py.

Needs TensorFlow (a separate venv; never a dependency of dfg). Run from the repository root:

    /path/to/tfvenv/bin/python tests/data/hostile_kernels/regex_tf.py
"""

from __future__ import annotations

import json
from pathlib import Path

import tensorflow as tf

HERE = Path(__file__).resolve().parent

TEXTS = ["héllo wörld", "aaa", "", "a\xffb".encode("latin-1").decode("latin-1"),
         "one two  three", "ab12cd345"]
# (pattern, rewrite, replace_global)
REPLACES = [
    ("", "-", True), ("", "-", False), ("x*", "<\\0>", True), ("\\b", "|", True),
    ("^", ">", True), ("$", "<", True), ("(?i)A", "\\\\", True), ("[[:alpha:]]+", "w", True),
    ("(\\d)(\\d)?", "[\\2\\1]", True), ("o", "X\\yZ", True), ("o", "X\\yZ", False),
    ("o", "tail\\", True), ("(o)", "\\2", True), ("\\pL", ".", True), ("\\s+", " ", True),
    ("(a+)+$", "!", True), ("a|aa", "b", True), ("ö", "oe", True),
]
FULL = ["h.llo w.rld", "a+", "", "[a-z]+", "(?s).*", ".{3}", "\\w+ \\w+"]
BAD = ["(a)\\1", "(?=a)", "(?<=a)b", "a{1001}", "(", "[z-a]", "a**"]


def texts_bytes() -> list[bytes]:
    return [t.encode("latin-1") if "\xff" in t else t.encode() for t in TEXTS]


def main() -> None:
    data = texts_bytes()
    x = tf.constant(data)
    out = {"texts": [d.hex() for d in data], "replace": [], "full_match": [], "bad": []}
    for pattern, rewrite, glob in REPLACES:
        got = tf.raw_ops.StaticRegexReplace(input=x, pattern=pattern, rewrite=rewrite,
                                            replace_global=glob).numpy().tolist()
        dyn = tf.raw_ops.RegexReplace(input=x, pattern=pattern, rewrite=rewrite,
                                      replace_global=glob).numpy().tolist()
        assert got == dyn
        out["replace"].append({"pattern": pattern, "rewrite": rewrite, "global": glob,
                               "out": [g.hex() for g in got]})
    for pattern in FULL:
        got = tf.raw_ops.RegexFullMatch(input=x, pattern=pattern).numpy().tolist()
        out["full_match"].append({"pattern": pattern, "out": got})
    for pattern in BAD:
        try:
            tf.raw_ops.StaticRegexReplace(input=x, pattern=pattern, rewrite="-")
            msg = None
        except tf.errors.InvalidArgumentError as e:
            msg = e.message.split("Invalid pattern: ", 1)[1].split(" [Op:", 1)[0]
        out["bad"].append({"pattern": pattern, "error": msg})
    (HERE / "regex_tf.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
