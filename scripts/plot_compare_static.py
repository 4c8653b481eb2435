#!/usr/bin/python3
"""SERF's table against fixed configurations on one load schedule (scripts/compare-static).

Usage: plot_compare_static.py [--title TEXT] DIR LABEL=NAME...

Reads DIR/NAME.load.json (+ .csv, `serf load --out`) and DIR/NAME.serve.json (`serf serve --out`)
per policy; writes DIR/compare.csv (mean/p50/p99/answered/rejected per policy) and DIR/compare.png
(the offered load, the mean and p99 latency per second by scheduled time, and the switches of the
policies that switched); prints the table. Quantiles are type 7 (serf/core/statistics.h).
"""
import csv
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from runfiles import fail, quantile, read_csv_rows, read_json  # noqa: E402


def switches_on_client_clock(serve, rows):
    """The server's switch times moved to the client's clock: the first request the server saw
    arrived (server clock) when the client sent its first request (client clock)."""
    arrivals = [r["arrival_s"] for r in serve.get("requests", []) if "arrival_s" in r]
    sent = [float(r["sent_s"]) for r in rows if r["sent_s"] not in ("", "-1")]
    if not arrivals or not sent:
        return []
    offset = min(arrivals) - min(sent)
    return [(s["at_s"] - offset, s["to"]) for s in serve.get("switches", [])]


def main():
    args = sys.argv[1:]
    title = "SERF's table against fixed configurations, one schedule (emulated nodes)"
    if args[:1] == ["--title"] and len(args) > 1:
        title, args = args[1], args[2:]
    if len(args) < 2:
        fail("usage: plot_compare_static.py [--title TEXT] DIR LABEL=NAME...")
    folder = args[0]
    policies = []
    for arg in args[1:]:
        label, _, name = arg.rpartition("=")
        if not label:
            fail(f"{arg}: expected LABEL=NAME")
        run = read_json(f"{folder}/{name}.load.json")
        if run.get("format") != "serf-load/1":
            fail(f"{folder}/{name}.load.json: not a serf load --out file")
        rows = read_csv_rows(f"{folder}/{name}.load.json.csv")
        serve = read_json(f"{folder}/{name}.serve.json")
        lat = [float(r["latency_ms"]) for r in rows if r["status"] == "200"]
        counts = run["summary"]["counts"]
        policies.append({
            "label": label, "run": run, "lat": lat,
            "rejected": counts.get("503", 0),
            "other": sum(n for s, n in counts.items() if s not in ("200", "503")),
            "switches": switches_on_client_clock(serve, rows),
        })

    header = ["policy", "mean_ms", "p50_ms", "p99_ms", "answered", "rejected_503", "other",
              "switches"]
    table = []
    for p in policies:
        lat = p["lat"]
        table.append([p["label"], sum(lat) / len(lat) if lat else math.nan, quantile(lat, 0.5),
                      quantile(lat, 0.99), len(lat), p["rejected"], p["other"],
                      len(p["switches"])])
    with open(f"{folder}/compare.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(table)
    print(f"{'policy':<24} {'mean ms':>9} {'p50 ms':>9} {'p99 ms':>9} {'answered':>9} "
          f"{'rejected':>9} {'other':>6} {'switches':>9}")
    for r in table:
        print(f"{r[0]:<24} {r[1]:>9.2f} {r[2]:>9.2f} {r[3]:>9.2f} {r[4]:>9} {r[5]:>9} {r[6]:>6} "
              f"{r[7]:>9}")
    serf_mean = table[0][1]
    # The fixed policies: SERF's other runs (compare-static --switch-cost both) are not baselines.
    others = [r[1] for r in table[1:] if r[0].startswith("Fixed")]
    verdict = "below" if all(serf_mean < m for m in others) else "NOT below"
    print(f"{table[0][0]}'s mean over the whole schedule is {verdict} every fixed configuration's "
          f"(mean of the answered requests; rejected ones are counted apart)")

    fig, (axr, axm, axp) = plt.subplots(3, 1, figsize=(10, 9), sharex=True,
                                        gridspec_kw={"height_ratios": [1, 2.2, 2.2]})
    tl = policies[0]["run"]["timeline"]
    t = [b["t_s"] for b in tl] + [tl[-1]["t_s"] + 1]
    axr.step(t, [b["offered"] for b in tl] + [tl[-1]["offered"]], where="post", color="0.3")
    axr.set_ylabel("offered (requests/s)")
    for k, p in enumerate(policies):
        bins = [b for b in p["run"]["timeline"] if b["answered"] > 0]
        x = [b["t_s"] + 0.5 for b in bins]
        axm.plot(x, [b["mean_ms"] for b in bins], color=f"C{k}", lw=1.8 if k == 0 else 1.1,
                 label=f"{p['label']}: mean {table[k][1]:.1f} ms, {p['rejected']} rejected")
        axp.plot(x, [b["p99_ms"] for b in bins], color=f"C{k}", lw=1.8 if k == 0 else 1.1,
                 label=p["label"])
        for at_s, to in p["switches"]:
            for a in (axr, axm, axp):
                a.axvline(at_s, color=f"C{k}", ls=":", lw=0.9)
            axr.text(at_s, axr.get_ylim()[1], f"({to[0]},{to[1]},{to[2]})", color=f"C{k}",
                     fontsize=7, rotation=90, va="top", ha="right")
    for a, name in ((axm, "mean latency per second (ms)"), (axp, "p99 latency per second (ms)")):
        a.set_yscale("log")
        a.set_ylabel(name)
    axm.legend(fontsize=8, loc="upper left")
    axp.set_xlabel("scheduled time (s); dotted: switches")
    axr.set_title(title)
    for a in (axr, axm, axp):
        a.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(f"{folder}/compare.png", dpi=110)
    print(f"wrote {folder}/compare.csv {folder}/compare.png")


if __name__ == "__main__":
    main()
