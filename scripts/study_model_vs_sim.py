#!/usr/bin/python3
"""The analytic model against the simulator: runs build/bin/study_model_vs_sim, writes
docs/study/model_vs_sim.csv and PNG plots, and prints a summary (docs/simulation.md quotes it).

  /usr/bin/python3 scripts/study_model_vs_sim.py [--scale X] [--threads N] [--csv FILE (reuse)]
"""
import csv
import os

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from study_common import OUT, study_csv  # noqa: E402


def load(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k, v in r.items():
            if k != "semantics":
                r[k] = float(v)
        r["err_mean"] = (r["model_latency_ms"] - r["sim_latency_ms"]) / r["sim_latency_ms"]
        r["err_p99"] = (r["model_p99_ms"] - r["sim_p99_ms"]) / r["sim_p99_ms"]
        r["err_mm"] = (r["mm_interf_latency_ms"] - r["sim_latency_ms"]) / r["sim_latency_ms"]
        r["err_mdc"] = (r["mdc_latency_ms"] - r["sim_latency_ms"]) / r["sim_latency_ms"]
        r["err_tail_mean"] = (r["tail_mean_ms"] - r["sim_latency_ms"]) / r["sim_latency_ms"]
        r["noise"] = r["sim_ci95_ms"] / r["sim_latency_ms"]
    return rows


def worst(values):
    """The signed value of largest magnitude."""
    return max(values, key=abs) if values else float("nan")


def poisson_rows(rows, sem, profiles):
    return [r for r in rows if r["semantics"] == sem and r["arrival_scv"] == 1.0 and r["units"] == 1
            and int(r["profile"]) in profiles]


def grid(rows, key, cs, rhos):
    m = np.full((len(cs), len(rhos)), np.nan)
    for i, c in enumerate(cs):
        for j, rho in enumerate(rhos):
            v = [r[key] for r in rows if r["c"] == c and abs(r["rho"] - rho) < 1e-9]
            m[i, j] = worst(v)
    return m


def heatmaps(rows, profiles, title, path):
    cs = sorted({int(r["c"]) for r in rows})
    rhos = sorted({r["rho"] for r in rows})
    fig, axes = plt.subplots(2, 2, figsize=(14, 10), constrained_layout=True)
    for i, sem in enumerate(["start", "shared"]):
        sel = poisson_rows(rows, sem, profiles)
        for j, (key, what) in enumerate([("err_mean", "mean latency"), ("err_p99", "p99 latency")]):
            ax = axes[i][j]
            m = grid(sel, key, cs, rhos) * 100
            im = ax.imshow(m, cmap="RdBu_r", vmin=-30, vmax=30, aspect="auto", origin="lower")
            for a in range(len(cs)):
                for b in range(len(rhos)):
                    if not np.isnan(m[a, b]):
                        ax.text(b, a, "%.0f" % m[a, b], ha="center", va="center", fontsize=7,
                                color="white" if abs(m[a, b]) > 20 else "black")
            ax.set_xticks(range(len(rhos)))
            ax.set_xticklabels(["%.2f" % x for x in rhos])
            ax.set_yticks(range(len(cs)))
            ax.set_yticklabels([str(c) for c in cs])
            ax.set_xlabel("utilization rho = lambda / (c mu_c)")
            ax.set_ylabel("service parallelism c")
            ax.set_title("%s, %s semantics: model - sim (%%)" % (what, sem))
            fig.colorbar(im, ax=ax, label="relative error (%), worst over profiles")
    fig.suptitle(title)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def curves(rows, path):
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8), constrained_layout=True)
    rhos = sorted({r["rho"] for r in rows})
    sel = poisson_rows(rows, "start", [0, 2, 3, 4, 5, 6, 7])
    for key, label in [("err_mean", "md-interf (paper)"),
                       ("err_tail_mean", "md-interf x service-SCV factor (tail model)"), ("err_mm", "mm-interf (no D correction)"),
                       ("err_mdc", "M/D/c, interference-oblivious")]:
        y = [np.mean([abs(r[key]) for r in sel if abs(r["rho"] - x) < 1e-9]) * 100 for x in rhos]
        axes[0].plot(rhos, y, marker="o", label=label)
    axes[0].set_yscale("log")
    axes[0].set_xlabel("utilization rho")
    axes[0].set_ylabel("mean |model - sim| / sim (%)")
    axes[0].set_title("mean latency: models vs simulator (start)")
    axes[0].legend()
    for ax, key, what in [(axes[1], "err_mean", "mean"), (axes[2], "err_p99", "p99")]:
        for c in [1, 4, 16, 64]:
            y = [np.mean([r[key] for r in sel if r["c"] == c and abs(r["rho"] - x) < 1e-9]) * 100
                 for x in rhos]
            ax.plot(rhos, y, marker="o", label="c = %d" % c)
        ax.axhline(0, color="gray", lw=0.8)
        ax.set_xlabel("utilization rho")
        ax.set_ylabel("model - sim (%), mean over profiles")
        ax.set_title(("md-interf (paper) mean" if what == "mean" else "tail approximation p99")
                     + " error by c (start)")
        ax.legend()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def bursty(rows, path):
    sel = [r for r in rows if r["arrival_scv"] != 1.0]
    rhos = sorted({r["rho"] for r in sel})
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8), constrained_layout=True)
    for ax, key, what in [(axes[0], "err_mean", "mean"), (axes[1], "err_p99", "p99")]:
        for ca2 in [0.25, 4.0]:
            for units in [1, 4]:
                y = [np.mean([r[key] for r in sel if r["arrival_scv"] == ca2 and r["units"] == units
                              and abs(r["rho"] - x) < 1e-9]) * 100 for x in rhos]
                ax.plot(rhos, y, marker="o", label="ca2 = %g, %d unit%s" % (ca2, units,
                                                                           "s" if units > 1 else ""))
        ax.axhline(0, color="gray", lw=0.8)
        ax.set_xlabel("utilization rho")
        ax.set_ylabel("model - sim (%), mean over c and profiles")
        ax.set_title("Gamma arrivals, Allen-Cunneen correction: %s latency" % what)
        ax.legend()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summary(rows):
    def stats(sel, key):
        v = np.array([abs(r[key]) for r in sel]) * 100
        return "median %.1f%%, p90 %.1f%%, max %.1f%%" % (np.median(v), np.percentile(v, 90), v.max())

    interf = [0, 2, 3, 4, 5, 6, 7]
    print("rows: %d; simulated requests: %.3g" % (len(rows), sum(r["requests"] for r in rows)))
    print("median CI95 half-width of the simulated mean: %.2f%%" %
          (100 * np.median([r["noise"] for r in rows])))
    for sem in ["start", "shared"]:
        sel = poisson_rows(rows, sem, interf)
        print("\n%s semantics, Poisson, profiles with SCV <= 0.3 (%d points):" % (sem, len(sel)))
        print("  md-interf mean |error|: " + stats(sel, "err_mean"))
        print("  mm-interf mean |error|: " + stats(sel, "err_mm"))
        print("  M/D/c (oblivious) |error|: " + stats(sel, "err_mdc"))
        print("  tail model's mean (service-SCV corrected) |error|: " + stats(sel, "err_tail_mean"))
        print("  tail p99 |error|: " + stats(sel, "err_p99"))
        for lo, hi in [(0, 0.5), (0.5, 0.8), (0.8, 1)]:
            part = [r for r in sel if lo < r["rho"] <= hi]
            print("   rho in (%.1f, %.1f]: mean %s | p99 %s" % (lo, hi, stats(part, "err_mean"),
                                                            stats(part, "err_p99")))
        big = [r for r in sel if abs(r["err_p99"]) > 0.15]
        print("  p99 |error| > 15%%: %d of %d points; at c: %s, rho: %s" % (
            len(big), len(sel), sorted({int(r["c"]) for r in big}),
            sorted({r["rho"] for r in big})))
        big = [r for r in sel if abs(r["err_mean"]) > 0.10]
        print("  mean |error| > 10%%: %d points: %s" % (len(big), ", ".join(
            "p%d c=%d rho=%.2f %+.0f%%" % (r["profile"], r["c"], r["rho"], 100 * r["err_mean"])
            for r in big[:12])))
    sel = poisson_rows(rows, "start", [1])
    print("\nexponential service (profile 1, SCV 1), start: md-interf |error| " +
          stats(sel, "err_mean") + "; mm-interf " + stats(sel, "err_mm"))
    sel = [r for r in rows if r["arrival_scv"] != 1.0]
    for ca2 in [0.25, 4.0]:
        for units in [1, 4]:
            part = [r for r in sel if r["arrival_scv"] == ca2 and r["units"] == units]
            print("gamma arrivals ca2=%g units=%d: mean %s | p99 %s" % (
                ca2, units, stats(part, "err_mean"), stats(part, "err_p99")))


def main():
    rows = load(study_csv("study_model_vs_sim", "model_vs_sim.csv"))
    heatmaps(rows, [0, 2, 3, 4, 5, 6, 7],
             "mean: md-interf (paper) model; p99: tail approximation; vs simulator, Poisson "
             "arrivals, 7 profiles (SCV <= 0.3)",
             os.path.join(OUT, "error_heatmaps.png"))
    curves(rows, os.path.join(OUT, "error_curves.png"))
    bursty(rows, os.path.join(OUT, "bursty.png"))
    summary(rows)


if __name__ == "__main__":
    main()
