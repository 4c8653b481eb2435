#!/usr/bin/python3
"""The batch (bulk-service) queue model against the simulator: runs build/bin/study_batch_vs_sim,
writes docs/study/batch_vs_sim.csv and batch_error_heatmap.png, and prints the summary quoted in
docs/queueing.md.

  /usr/bin/python3 scripts/study_batch_vs_sim.py [--scale X] [--threads N] [--csv FILE (reuse)]
"""
import os

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from study_common import OUT, read_float_rows, study_csv  # noqa: E402
# Where the planner simulates instead (serf/sim/fallback_objective.h, FallbackRegion).
FALLBACK_UTILIZATION = 0.7


def load(path):
    rows = read_float_rows(path)
    for r in rows:
        r["err"] = (r["model_latency_ms"] - r["sim_latency_ms"]) / r["sim_latency_ms"]
        r["err_md"] = (r["md_interf_latency_ms"] - r["sim_latency_ms"]) / r["sim_latency_ms"]
        r["noise"] = r["sim_ci95_ms"] / r["sim_latency_ms"]
        r["fallback"] = r["c"] > 1 and r["b"] > 1 and r["rho"] >= FALLBACK_UTILIZATION
    return rows


def stats(sel, key="err"):
    v = np.abs([r[key] for r in sel]) * 100
    if len(v) == 0:
        return "no points"
    return "median %.2f%%, p95 %.2f%%, max %.1f%% (%d points)" % (
        np.median(v), np.percentile(v, 95), v.max(), len(v))


def heatmap(rows, path):
    cs = sorted({int(r["c"]) for r in rows})
    rhos = sorted({r["rho"] for r in rows})
    bs = sorted({int(r["b"]) for r in rows})
    fig, axes = plt.subplots(1, 2, figsize=(15, 5.5), constrained_layout=True)
    for ax, key, what in [(axes[0], "c", "service parallelism c"), (axes[1], "b", "batch size b")]:
        ys = cs if key == "c" else bs
        m = np.full((len(ys), len(rhos)), np.nan)
        for i, y in enumerate(ys):
            for j, rho in enumerate(rhos):
                v = [abs(r["err"]) for r in rows if r[key] == y and abs(r["rho"] - rho) < 1e-9]
                m[i, j] = np.percentile(v, 95) * 100 if v else np.nan
        im = ax.imshow(m, cmap="magma_r", vmin=0, vmax=30, aspect="auto", origin="lower")
        for a in range(len(ys)):
            for b in range(len(rhos)):
                ax.text(b, a, "%.0f" % m[a, b], ha="center", va="center", fontsize=7,
                        color="white" if m[a, b] > 15 else "black")
        ax.axvline(rhos.index(FALLBACK_UTILIZATION + 0.05) - 0.5, color="cyan", lw=1.5)
        ax.set_xticks(range(len(rhos)))
        ax.set_xticklabels(["%.2f" % x for x in rhos])
        ax.set_yticks(range(len(ys)))
        ax.set_yticklabels([str(y) for y in ys])
        ax.set_xlabel("utilization of the full-batch capacity, rho = lambda m(c,b) / (c b)")
        ax.set_ylabel(what)
        ax.set_title("batch model mean latency: p95 of |model - sim| / sim (%%) by %s" % key)
        fig.colorbar(im, ax=ax, label="% (right of the cyan line the planner simulates if c, b > 1)")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summary(rows):
    print("rows: %d; simulated requests: %.3g; median CI95 half-width %.2f%% (p95 %.2f%%)" % (
        len(rows), sum(r["requests"] for r in rows), 100 * np.median([r["noise"] for r in rows]),
        100 * np.percentile([r["noise"] for r in rows], 95)))
    det = [r for r in rows if r["profile"] != 1]  # profile 1: exponential service, a stress case
    print("batch model (mg-interf kind), profiles with SCV <= 0.3:")
    print("  whole grid:                      " + stats(det))
    print("  b = 1 (mg-interf):               " + stats([r for r in det if r["b"] == 1]))
    print("  c = 1 (exact):                   " + stats([r for r in det if r["c"] == 1]))
    print("  outside the simulated region:    " + stats([r for r in det if not r["fallback"]]))
    print("  inside (c, b > 1, rho >= %.1f):   " % FALLBACK_UTILIZATION +
          stats([r for r in det if r["fallback"]]))
    print("  small batch cost (g <= 0.15):    " + stats([r for r in det if r["batch_g"] <= 0.15]))
    print("  large batch cost (g >= 0.75):    " + stats([r for r in det if r["batch_g"] >= 0.75]))
    for rho in sorted({r["rho"] for r in det}):
        print("   rho %.2f: %s" % (rho, stats([r for r in det if r["rho"] == rho])))
    print("exponential service (profile 1): " + stats([r for r in rows if r["profile"] == 1]))
    print("md-interf kind (deterministic assumption) on the same grid: " + stats(det, "err_md"))


def main():
    rows = load(study_csv("study_batch_vs_sim", "batch_vs_sim.csv"))
    heatmap([r for r in rows if r["profile"] != 1], os.path.join(OUT, "batch_error_heatmap.png"))
    summary(rows)


if __name__ == "__main__":
    main()
