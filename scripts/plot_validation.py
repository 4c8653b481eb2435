#!/usr/bin/python3
"""Plot a serf-validation/1 report (from `serf validate`): predicted against measured mean latency.

usage: /usr/bin/python3 scripts/plot_validation.py REPORT.json OUT.png [--title TEXT]

Left: predicted vs measured mean latency of every point (log-log), with the measurement's 95% CI
as horizontal bars, the line y = x and a +-12% band (the paper's 95th-percentile error).
Middle: relative error against the utilization the model predicts, one series per queue model.
Right: the first model's error three ways: against the raw measurement, against the sample-path
estimate (the measurement with its arrival luck replayed out) and the queue model alone (the
prediction re-made at the measured service time) and, with serf profile --exhaustive
--fresh-tuples, the prediction from the tuples measured just before each point, where the
report has them.
Points a model calls unstable (utilization >= 1) have no prediction and are not drawn.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {
    "md-interf": ("tab:red", "o"),
    "mm-interf": ("tab:orange", "v"),
    "mdc": ("tab:blue", "s"),
    "mmc": ("tab:purple", "^"),
    "allen-cunneen": ("tab:green", "D"),
    "mdc-exact": ("tab:cyan", "x"),
    "mg-interf": ("black", "*"),
}


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    path, out = argv[1], argv[2]
    title = argv[argv.index("--title") + 1] if "--title" in argv else None
    try:
        with open(path) as f:
            doc = json.load(f)
        if doc.get("format") != "serf-validation/1":
            raise ValueError("format is %r, expected 'serf-validation/1'" % doc.get("format"))
        models = doc["models"]
    except (OSError, ValueError, KeyError) as e:
        sys.stderr.write("plot_validation: error: %s: %s\n" % (path, e))
        return 2

    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(17, 5.2))
    lo, hi = float("inf"), 0.0
    for m in models:
        q = m["queue"]
        color, marker = STYLE.get(q, ("black", "."))
        pts = [p for p in m["points"] if p["stable"]]
        if not pts:
            continue
        meas = [p["measured_ms"] for p in pts]
        pred = [p["predicted_ms"] for p in pts]
        lo, hi = min(lo, min(meas), min(pred)), max(hi, max(meas), max(pred))
        s = m["summary"]
        label = "%s: mean %.1f%%, p95 %.1f%%" % (q, 100 * s["mean_rel_error"], 100 * s["p95_rel_error"])
        primary = q == models[0]["queue"]
        if primary:
            xerr = [p["measured_ci95_ms"] or 0 for p in pts]
            ax1.errorbar(meas, pred, xerr=xerr, fmt=marker, color=color, ms=5, elinewidth=0.8,
                         capsize=2, label=label, zorder=3)
        else:
            ax1.plot(meas, pred, marker, color=color, ms=4, alpha=0.6, label=label,
                     markerfacecolor="none" if marker != "x" else color)
        order = sorted(range(len(pts)), key=lambda k: pts[k]["utilization"])
        ax2.plot([pts[k]["utilization"] for k in order],
                 [max(0.05, 100 * pts[k]["rel_error"]) for k in order], marker, color=color,
                 ms=5 if primary else 4, alpha=1 if primary else 0.6, label=q,
                 markerfacecolor=None if primary or marker == "x" else "none")
    first = models[0]
    pts = sorted((p for p in first["points"] if p["stable"]), key=lambda p: p["utilization"])
    summary = first["summary"]
    for key, summary_key, color, marker, what in (
            ("rel_error", None, "tab:red", "o", "vs measured"),
            ("adjusted_rel_error", "adjusted", "tab:green", "D", "vs sample-path estimate"),
            ("rescaled_rel_error", "rescaled", "tab:blue", "s", "queue model alone"),
            ("fresh_rel_error", "fresh", "tab:purple", "^", "from fresh tuples vs measured")):
        xs = [p["utilization"] for p in pts if p.get(key) is not None]
        ys = [max(0.05, 100 * p[key]) for p in pts if p.get(key) is not None]
        if not xs:
            continue
        s = summary if summary_key is None else summary.get(summary_key, {})
        label = "%s: mean %.1f%%, p95 %.1f%%" % (what, 100 * s.get("mean_rel_error", 0),
                                                100 * s.get("p95_rel_error", 0))
        ax3.plot(xs, ys, marker, color=color, ms=5, alpha=0.8, label=label,
                 markerfacecolor=color if key == "rel_error" else "none")
    ax3.axhline(12, color="grey", ls="--", lw=1)
    ax3.axhspan(2, 4, color="grey", alpha=0.15)
    ax3.set_xlabel("predicted utilization of the configuration")
    ax3.set_ylabel("relative error of the mean (%)")
    ax3.set_yscale("log")
    ax3.grid(True, which="both", alpha=0.3)
    ax3.legend(fontsize=7)
    ax3.set_title("%s: where the error comes from" % first["queue"], fontsize=9)
    if hi > 0:
        xs = [lo * 0.8, hi * 1.25]
        ax1.plot(xs, xs, "k-", lw=1, label="y = x")
        ax1.fill_between(xs, [x * 0.88 for x in xs], [x * 1.12 for x in xs], color="grey",
                         alpha=0.15, label="+-12%")
        ax1.set_xlim(xs)
        ax1.set_ylim(xs)
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    ax1.set_xlabel("measured mean latency (ms), bars: 95% CI")
    ax1.set_ylabel("predicted mean latency (ms)")
    ax1.legend(fontsize=7, loc="upper left")
    ax1.grid(True, which="both", alpha=0.3)
    ax2.axhline(12, color="grey", ls="--", lw=1)
    ax2.axhspan(2, 4, color="grey", alpha=0.15)
    ax2.set_xlabel("predicted utilization of the configuration")
    ax2.set_ylabel("relative error of the mean (%)")
    ax2.set_yscale("log")  # errors below 0.05% drawn at 0.05%
    ax2.grid(True, which="both", alpha=0.3)
    ax2.legend(fontsize=7)
    ax2.set_title("band: paper's mean 2-4%, dashed: paper's p95 12%", fontsize=8)
    fig.suptitle(title or "%s on %d nodes x %d cores: predicted vs measured"
                 % (doc.get("model"), doc.get("nodes"), doc.get("cores_per_node")))
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("wrote %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
