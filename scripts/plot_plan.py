#!/usr/bin/python3
"""Plots a configuration table made with `serf plan --all` (paper Fig. 12 style): predicted mean
latency against cluster load for every configuration (grey), the configurations the planner chooses
somewhere (coloured), and the chosen one at each load (black markers).
Usage: /usr/bin/python3 scripts/plot_plan.py TABLE.json OUT.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def label(c):
    b = c.get("batch") or 1
    return f"c={c['service']}, K={c['inter']}, T={c['intra']}" + (f", b={b}" if b > 1 else "")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_plan.py TABLE.json OUT.png")
    with open(sys.argv[1]) as f:
        table = json.load(f)
    if table.get("format") != "serf-table/1":
        sys.exit(f"plot_plan.py: {sys.argv[1]}: not a serf-table/1 file")
    if "all" not in table:
        sys.exit(f"plot_plan.py: {sys.argv[1]}: no per-configuration predictions; plan with --all")
    rates = [e["rate"] for e in table["entries"]]
    chosen = [e for e in table["entries"] if e["stable"]]
    chosen_keys = {(e["service"], e["inter"], e["intra"], e.get("batch") or 1) for e in chosen}
    top = max(e["latency_ms"] for e in chosen) if chosen else 1.0
    low = min(e["latency_ms"] for e in chosen) if chosen else 1.0

    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=120)
    colors = plt.cm.tab10.colors
    k = 0
    for conf in table["all"]:
        key = (conf["service"], conf["inter"], conf["intra"], conf.get("batch") or 1)
        xs = [r for r, w in zip(rates, conf["latency_ms"]) if w is not None]
        ys = [w for w in conf["latency_ms"] if w is not None]
        if key in chosen_keys:
            ax.plot(xs, ys, color=colors[k % len(colors)], lw=1.6, label=label(conf))
            k += 1
        else:
            ax.plot(xs, ys, color="0.8", lw=0.7, zorder=0)
    ax.plot([e["rate"] for e in chosen], [e["latency_ms"] for e in chosen], "o", ms=3.5,
            color="black", label="chosen (lowest predicted mean)", zorder=5)
    ax.set_yscale("log")
    ax.set_ylim(low * 0.8, top * 3)
    ax.set_xlim(min(rates), max(rates))
    ax.set_xlabel("cluster arrival rate (requests/s)")
    ax.set_ylabel("predicted mean latency (ms)")
    title = (f"{table['model']}: {table['nodes']} nodes x {table['cores_per_node']} cores, "
             f"model {table['queue']}")
    if table.get("illustrative"):
        title += " (illustrative profile)"
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", title="configurations chosen somewhere (grey: others)",
              title_fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2])
    print(f"wrote {sys.argv[2]}")


if __name__ == "__main__":
    main()
