"""Reading SERF's run files for the plotting and summary scripts beside it (they import it by name:
Python puts a script's own folder first on sys.path). Errors name the file and end the script with
exit code 2, prefixed by the script's name."""
import csv
import json
import math
import os
import sys


def fail(message):
    print(f"{os.path.basename(sys.argv[0])}: error: {message}", file=sys.stderr)
    sys.exit(2)


def read_json(path, fmt=None, made_by=None):
    """The JSON document at `path`; with `fmt`, its "format" must be `fmt` (written by `made_by`)."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        fail(f"{path}: cannot open file ({e.strerror})")
    except json.JSONDecodeError as e:
        fail(f"{path}: malformed JSON at line {e.lineno}")
    if fmt is not None and doc.get("format") != fmt:
        fail(f"{path}: format is {doc.get('format')!r}, expected {fmt!r} (from {made_by})")
    return doc


def read_csv_rows(path, hint=""):
    """The rows of the CSV at `path` as dicts; `hint` follows the error when it cannot be opened."""
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError as e:
        fail(f"{path}: cannot open file ({e.strerror}){hint}")


def quantile(values, q):
    """Type 7 (numpy's default, serf/core/statistics.h); NaN when there are no values."""
    v = sorted(values)
    if not v:
        return math.nan
    h = (len(v) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (h - lo) * (v[hi] - v[lo])
