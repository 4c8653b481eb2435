#!/usr/bin/env python3
"""Keeps docs/queueing.md's table of the paper's equations true: every row names a file:line in
serf/core/ and quotes the code on that line; a row whose line no longer holds that code fails
(code moved or changed, so the table must be updated with it).

Usage: equation_table_check.py ROOT. Prints one line per stale row and exits 1 if any."""
import os
import re
import sys

root = sys.argv[1]
text = open(os.path.join(root, "docs/queueing.md"), encoding="utf-8").read()
start = text.index("### The paper's equations in the code")
rows = []
for line in text[start:].splitlines()[1:]:
    if line.startswith("#"):
        break
    m = re.match(r"\|(.*)\|\s*([a-z_]+\.(?:cc|h)):(\d+)\s*\|\s*`(.*)`\s*\|$", line)
    if m:
        rows.append((m.group(1).split("|")[0].strip(), m.group(2), int(m.group(3)),
                     m.group(4).replace("\\|", "|")))
problems = []
if len(rows) < 12:  # Eq. 1-12 cannot be covered by fewer rows: the table's shape changed
    problems.append("only %d rows read from the table" % len(rows))
for eq in ["Eq. 1-9", "Eq. 10", "Eq. 11", "Eq. 12"]:
    if not any(r[0].startswith(eq + ":") for r in rows):
        problems.append("no row for %s" % eq)
for paper, name, number, code in rows:
    lines = open(os.path.join(root, "serf/core", name), encoding="utf-8").read().splitlines()
    here = lines[number - 1] if 0 < number <= len(lines) else ""
    if code not in here:
        found = [i + 1 for i, l in enumerate(lines) if code in l]
        problems.append("%s: %s:%d does not hold `%s`%s" % (
            paper, name, number, code, " (it is on line %s now)" % found if found else ""))
for p in problems:
    print("stale: " + p)
print("%d rows checked, %d stale" % (len(rows), len(problems)))
sys.exit(1 if problems else 0)
