#!/usr/bin/python3
"""The latency `serf load` measured in each step of its load against what the table predicted.

Usage: serving_summary.py TABLE.json LOAD.json [--settle S]

TABLE.json is `serf plan --out` (serf-table/1), LOAD.json is `serf load --out` (serf-load/1) with
its CSV beside it. For each step of the load (--load "SECONDS:RATE;..."), the answers scheduled
from S seconds after the step began (the rate monitor's window and the switch's dwell; default 3)
to its end are compared with the table's entry for that rate: the configuration it names and its
predicted mean latency. Quantiles are type 7 (numpy's default, serf/core/statistics.h).
"""
import argparse

from runfiles import quantile, read_csv_rows, read_json


def table_entry(table, rate):
    """The entry of the nearest load level at or above `rate` (how serve --table looks it up)."""
    entries = sorted(table["entries"], key=lambda e: e["rate"])
    for e in entries:
        if e["rate"] >= rate - 1e-9:
            return e
    return entries[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("table")
    ap.add_argument("load")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds skipped at each step's start")
    args = ap.parse_args()
    table = read_json(args.table, "serf-table/1", "serf plan --out")
    run = read_json(args.load, "serf-load/1", "serf load --out")
    rows = read_csv_rows(args.load + ".csv", "; serf load --out writes it")
    steps = run["load"]
    end_s = run["summary"]["span_s"]
    print(f"{'load step':<18} {'rate/s':>7}  {'table names':<16} {'predicted mean':>14}  "
          f"{'measured mean':>13} {'p99':>9} {'answers':>8}")
    for k, step in enumerate(steps):
        start = step["from_s"]
        stop = steps[k + 1]["from_s"] if k + 1 < len(steps) else end_s
        lat = [float(r["latency_ms"]) for r in rows
               if r["status"] == "200" and start + args.settle <= float(r["scheduled_s"]) < stop]
        e = table_entry(table, step["rate_per_s"])
        config = f"({e['service']},{e['inter']},{e['intra']})" if e.get("stable", True) else "none"
        predicted = f"{e['latency_ms']:.2f} ms" if e.get("stable", True) else "unstable"
        window = f"{start + args.settle:g}-{stop:g} s"
        if lat:
            measured = f"{sum(lat) / len(lat):.2f} ms"
            p99 = f"{quantile(lat, 0.99):.2f} ms"
        else:
            measured, p99 = "-", "-"
        print(f"{window:<18} {step['rate_per_s']:>7g}  {config:<16} {predicted:>14}  "
              f"{measured:>13} {p99:>9} {len(lat):>8}")
    s = run["summary"]
    lat = s["latency"]
    print(f"whole run: {s['answered']} answered of {s['scheduled']}, mean {lat['mean_ms']:.2f} ms, "
          f"p99 {lat['p99_ms']:.2f} ms (the steps' first {args.settle:g} s included: the "
          f"queue built before a switch); client lateness p99 {s['lateness']['p99_ms']:.2f} ms")


if __name__ == "__main__":
    main()
