#!/usr/bin/python3
"""Plot a serving run (serf-run/1 from `serf serve --out RUN.json`): per-request latency over time,
its rolling mean and p99, the measured arrival rate, and every configuration switch.

    /usr/bin/python3 scripts/plot_serve.py RUN.json RUN.png [--window SECONDS]
"""
import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from runfiles import fail, read_json  # noqa: E402


def load_run(path):
    run = read_json(path, "serf-run/1", "serf serve --out")
    if not isinstance(run.get("requests"), list) or not run["requests"]:
        fail(f"{path}: requests: expected a non-empty array")
    return run


def rolling(t, y, window_s, fn):
    """fn over the requests that arrived in (t_i - window_s, t_i], at each request's time."""
    out = np.empty_like(y)
    lo = 0
    for i in range(len(t)):
        while t[lo] <= t[i] - window_s:
            lo += 1
        out[i] = fn(y[lo : i + 1])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="serf-run/1 JSON written by serf serve --out")
    ap.add_argument("png", help="PNG to write")
    ap.add_argument("--window", type=float, default=0.5, help="rolling window, seconds (default 0.5)")
    args = ap.parse_args()
    if not args.window > 0:
        fail("--window must be > 0 seconds")

    run = load_run(args.run)
    answered = [r for r in run["requests"] if r.get("answered")]
    lost = len(run["requests"]) - len(answered)
    if not answered:
        fail(f"{args.run}: no request was answered")
    answered.sort(key=lambda r: r["arrival_s"])
    t = np.array([r["arrival_s"] for r in answered])
    lat = np.array([r["latency_ms"] for r in answered])

    mean = rolling(t, lat, args.window, np.mean)
    p99 = rolling(t, lat, args.window, lambda a: np.percentile(a, 99))
    edges = np.arange(0.0, t[-1] + args.window, args.window)
    counts, _ = np.histogram(t, bins=edges)

    fig, (ax, axr) = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    ax.scatter(t, lat, s=3, color="0.7", label="request latency (from scheduled arrival)")
    ax.plot(t, mean, color="C0", lw=1.8, label=f"rolling mean ({args.window:g} s)")
    ax.plot(t, p99, color="C3", lw=1.2, label=f"rolling p99 ({args.window:g} s)")
    ax.set_yscale("log")
    ax.set_ylabel("latency (ms)")
    axr.step(edges[:-1], counts / args.window, where="post", color="C2")
    axr.set_ylabel("arrivals/s")
    axr.set_xlabel("time since start (s)")

    first = answered[0]
    configs = [(0.0, (first["service"], first["inter"], first["intra"], first.get("batch", 1)))]
    for s in run.get("switches", []):
        to = list(s["to"]) + [1]  # runs written before batching have no b
        configs.append((s["at_s"], tuple(to[:4])))
        for a in (ax, axr):
            a.axvline(s["at_s"], color="k", lw=0.8, ls="--")
    # A switch right at the start replaces the initial configuration's label instead of overprinting it.
    if len(configs) > 1 and configs[1][0] < 0.03 * max(t[-1], 1e-9):
        configs.pop(0)
    for at, (c, k, th, b) in configs:
        ax.annotate(f"c={c} K={k} T={th}" + (f" b={b}" if b > 1 else ""), xy=(at, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(3, -12), textcoords="offset points", fontsize=8)
    ax.legend(loc="lower right", fontsize=8)
    title = f"{run.get('model', '?')}: {len(answered)} answered"
    title += f", {lost} not answered" if lost else ""
    title += f", mean {lat.mean():.2f} ms, p99 {np.percentile(lat, 99):.2f} ms"
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    axr.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
