#!/usr/bin/python3
"""The two-moment model (mg-interf) against the simulator over service SCV 0..1.5, c 1..64 and
rho 0.05..0.95 (issue 17): runs build/bin/study_model_vs_sim --scv-sweep, writes
docs/study/mg_interf_vs_sim.csv and mg_interf_error.png, and prints the summary quoted in
docs/simulation.md.

  /usr/bin/python3 scripts/study_mg_interf.py [--scale X] [--threads N] [--csv FILE (reuse)]
"""
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from study_common import OUT, read_float_rows, study_csv  # noqa: E402
MODELS = [("md-interf", "md_interf_latency_ms"), ("mm-interf", "mm_interf_latency_ms"),
          ("mg-interf", "mg_interf_latency_ms")]


def load(path):
    rows = read_float_rows(path)
    for r in rows:
        for name, key in MODELS:
            r[name] = abs(r[key] - r["sim_latency_ms"]) / r["sim_latency_ms"] * 100
        r["noise"] = r["sim_ci95_ms"] / r["sim_latency_ms"] * 100
    return rows


def stats(values):
    v = np.asarray(values)
    return "median %.2f%%, p95 %.2f%%, max %.1f%%" % (np.median(v), np.percentile(v, 95), v.max())


def main():
    rows = load(study_csv("study_model_vs_sim", "mg_interf_vs_sim.csv", ["--scv-sweep"]))
    print("rows: %d; simulated requests: %.3g; CI95 half-width of the simulated mean: %s"
          % (len(rows), sum(r["requests"] for r in rows), stats([r["noise"] for r in rows])))
    print("mean latency |error| against the simulator, service SCV 0..1.5, c 1..64, rho 0.05..0.95:")
    for name, _ in MODELS:
        print("  %-10s %s" % (name, stats([r[name] for r in rows])))
    print("mg-interf by service SCV:")
    for scv in sorted({r["scv"] for r in rows}):
        sel = [r for r in rows if r["scv"] == scv]
        print("  SCV %.2f: %s (noise median %.2f%%)"
              % (scv, stats([r["mg-interf"] for r in sel]), np.median([r["noise"] for r in sel])))
    print("mg-interf by utilization:")
    for rho in sorted({r["rho"] for r in rows}):
        sel = [r for r in rows if r["rho"] == rho]
        print("  rho %.2f: %s" % (rho, stats([r["mg-interf"] for r in sel])))
    worst = sorted(rows, key=lambda r: -r["mg-interf"])[:8]
    print("mg-interf worst: " + ", ".join(
        "SCV %.2f c=%d rho=%.2f %+.1f%% (noise %.1f%%)"
        % (r["scv"], r["c"], r["rho"],
           (r["mg_interf_latency_ms"] / r["sim_latency_ms"] - 1) * 100, r["noise"]) for r in worst))
    beyond = [r for r in rows if r["mg-interf"] > r["noise"] + 1.0]
    print("points where mg-interf is off by more than the simulator's CI + 1%%: %d of %d"
          % (len(beyond), len(rows)))

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), sharey=True)
    scvs = sorted({r["scv"] for r in rows})
    for ax, (name, _) in zip(axes, MODELS):
        grid = np.zeros((len(scvs), 10))
        for i, scv in enumerate(scvs):
            for j in range(10):
                sel = [r[name] for r in rows if r["scv"] == scv and round(r["rho"] * 100) == 5 + 10 * j]
                grid[i, j] = np.max(sel) if sel else np.nan
        im = ax.imshow(grid, origin="lower", aspect="auto", cmap="magma_r", vmin=0, vmax=30,
                       extent=[0, 1, -0.125, 1.625])
        ax.set_title("%s (max over c, shapes)" % name)
        ax.set_xlabel("utilization rho")
    axes[0].set_ylabel("service SCV")
    fig.colorbar(im, ax=axes, label="|model - sim| / sim (%)")
    fig.savefig(os.path.join(OUT, "mg_interf_error.png"), dpi=90)
    return 0


if __name__ == "__main__":
    sys.exit(main())
