#!/usr/bin/python3
"""Plot a load run (serf-load/1 from `serf load --out RUN.json`, with RUN.json.csv beside it): the
offered and answered rate, every answer's latency from its scheduled time with the per-second mean
and p99, the requests not answered, and the client's lateness (sent - scheduled).

    /usr/bin/python3 scripts/plot_load.py RUN.json RUN.png
"""
import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from runfiles import fail, read_json, read_csv_rows  # noqa: E402


def load_rows(path):
    rows = read_csv_rows(path, "; serf load --out writes it beside the JSON")
    if not rows:
        fail(f"{path}: no requests")
    return rows


def steps(times, values):
    """One-second bins as a step line that also draws the last bin to its end."""
    times = list(times)
    values = list(values)
    if times:
        times.append(times[-1] + 1)
        values.append(values[-1])
    return times, values


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="serf-load/1 JSON written by serf load --out")
    ap.add_argument("png", help="PNG to write")
    args = ap.parse_args()
    run = read_json(args.run, "serf-load/1", "serf load --out")
    rows = load_rows(args.run + ".csv")
    timeline = run.get("timeline", [])
    ok = [r for r in rows if r["status"] == "200"]
    t_ok = np.array([float(r["scheduled_s"]) for r in ok])
    lat = np.array([float(r["latency_ms"]) for r in ok])
    sent = [r for r in rows if r["lateness_ms"] != ""]
    t_sent = np.array([float(r["scheduled_s"]) for r in sent])
    late = np.array([float(r["lateness_ms"]) for r in sent])

    fig, (axr, ax, axl) = plt.subplots(3, 1, figsize=(10, 8), sharex=True,
                                       gridspec_kw={"height_ratios": [1.2, 3, 1.2]})
    tb = np.array([b["t_s"] for b in timeline])
    axr.step(*steps(tb, [b["offered"] for b in timeline]), where="post", color="C2", lw=3,
             alpha=0.6, label="offered/s")
    axr.step(*steps(tb, [b["answered"] for b in timeline]), where="post", color="C0",
             label="answered/s")
    rejected = np.array([b["rejected"] + b["other"] for b in timeline])
    if rejected.any():
        axr.step(*steps(tb, rejected), where="post", color="C3", label="not answered/s")
    axr.set_ylabel("requests/s")
    axr.legend(loc="upper right", fontsize=8)

    if len(lat):
        ax.scatter(t_ok, lat, s=2, color="0.75", label="latency of each answer (from scheduled time)")
        has = [b for b in timeline if b["answered"] > 0]
        ax.step(*steps([b["t_s"] for b in has], [b["mean_ms"] for b in has]), where="post",
                color="C0", lw=1.6, label="mean per second")
        ax.step(*steps([b["t_s"] for b in has], [b["p99_ms"] for b in has]), where="post",
                color="C3", lw=1.1, label="p99 per second")
        ax.set_yscale("log")
    ax.set_ylabel("latency (ms)")
    ax.legend(loc="upper left", fontsize=8)

    if len(late):
        axl.scatter(t_sent, np.maximum(late, 1e-3), s=2, color="C1")
        axl.set_yscale("log")
    axl.set_ylabel("lateness (ms)")
    axl.set_xlabel("scheduled time since start (s)")

    s = run["summary"]
    title = (f"{run['model']} over {run['protocol']}: {s['answered']} answered of {s['scheduled']}"
             f", offered {s['offered_per_s']:.1f}/s")
    if s["answered"]:
        title += f", mean {s['latency']['mean_ms']:.2f} ms, p99 {s['latency']['p99_ms']:.2f} ms"
    axr.set_title(title)
    for a in (axr, ax, axl):
        a.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
