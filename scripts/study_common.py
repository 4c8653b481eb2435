"""What the model-vs-simulator study scripts beside it share (they import it by name: Python puts a
script's own folder first on sys.path): the command line, the study's CSV under docs/study (made by
running the study executable, or copied from --csv), and its rows read as numbers."""
import argparse
import csv
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "study")


def study_csv(executable, csv_name, extra_args=()):
    """Parses --scale, --threads and --csv; returns the path of docs/study/CSV_NAME, which holds
    the study's rows: --csv's file copied there, else what build/bin/EXECUTABLE EXTRA_ARGS
    --scale S --threads N printed."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", default="1")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--csv", help="reuse this CSV instead of running the study")
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, csv_name)
    if args.csv:
        if os.path.abspath(args.csv) != os.path.abspath(path):
            shutil.copyfile(args.csv, path)
        return path
    exe = os.path.join(ROOT, "build", "bin", executable)
    if not os.path.exists(exe):
        sys.exit("study: build first (scripts/build); %s is missing" % exe)
    with open(path, "w") as f:
        subprocess.run([exe, *extra_args, "--scale", args.scale, "--threads", args.threads],
                       stdout=f, check=True)
    return path


def read_float_rows(path):
    """The CSV's rows, every field a float."""
    with open(path) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in r:
            r[k] = float(r[k])
    return rows
