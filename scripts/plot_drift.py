"""The drift run's analysis (scripts/drift-run, docs/calibration.md): from a `serf serve
--recalibrate on --out RUN.json` run file and its journal RUN.json.csv, per window of W seconds

  - the observed mean latency of the requests that arrived in it, and their rate;
  - the recalibrated model's prediction at that rate: the controller's model at the window's start
    (the profile with the tuple means of the newest recalibration before it, "model_mean_ms");
  - the uncalibrated prediction: the profile as measured, at the same rate;
  - the queue model alone: the profile with the window's own mean service per state (the
    occupancy of the requests dispatched with i running), at the same rate: what is left when the
    service time is known exactly, i.e. the queue model's own error on this host;

both by `serf predict` (md-interf, the paper's model). Writes a CSV (one row per window), a PNG
(observed against both predictions over time with the slowdown marked, and each one's rolling
error) and prints the goal check: the recalibrated error back within 5 % within 2 minutes of the
slowdown while the uncalibrated one stays off.

  plot_drift.py --serf BIN --profile P.json --run RUN.json --config c,K,T --slowdown-s S
                [--window 20] [--hogs N] [--csv OUT.csv] [--png OUT.png]

--slowdown-s is seconds after the first request's arrival (the load client's start)."""
import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile

from runfiles import fail, read_json

GOAL_ERROR = 0.05  # the bound on the recalibrated rolling error
GOAL_RETURN_S = 120  # ... reached within this long after the slowdown


def predict(serf, profile_path, config, rate):
    """serf predict's (mean latency, mean service) in ms; inf when the load is unstable (exit 3)."""
    c, k, t = config
    r = subprocess.run([serf, "predict", "--profile", profile_path, "--service", str(c),
                        "--inter", str(k), "--intra", str(t), "--rate", "%.6g" % rate, "--json",
                        "--queue", "md-interf"],
                       capture_output=True, text=True)
    if r.returncode == 3:
        return math.inf, math.inf
    if r.returncode != 0:
        fail(f"serf predict at {rate:.1f}/s on {profile_path}: {r.stderr.strip()}")
    doc = json.loads(r.stdout)
    if "latency_ms" not in doc or "service_ms" not in doc:
        fail(f"serf predict --json gave no latency_ms/service_ms: {r.stdout.strip()[:200]}")
    return float(doc["latency_ms"]), float(doc["service_ms"])


def epoch_profiles(profile, recalibrations, folder):
    """[(from_s, path)]: the model as profiled from 0, then after each recalibration."""
    out = []
    base = os.path.join(folder, "model_0.json")
    with open(base, "w") as f:
        json.dump(profile, f)
    out.append((-math.inf, base))
    for n, rec in enumerate(recalibrations, 1):
        means = {tuple(m[:4]): m[4] for m in rec.get("model_mean_ms", [])}
        if not means:
            fail("the run file's recalibrations carry no model_mean_ms (a serf serve older than "
                 "the drift run's); run it again")
        p = json.loads(json.dumps(profile))
        for t in p["tuples"]:
            key = (t["service"], t["inter"], t["intra"], t.get("batch", 1))
            if key in means:
                # The nodes' share scales with the tuple (the profile keeps it <= mean_ms).
                if t.get("node_ms"):
                    t["node_ms"] = min(t["node_ms"] * means[key] / t["mean_ms"], means[key])
                t["mean_ms"] = means[key]
        path = os.path.join(folder, f"model_{n}.json")
        with open(path, "w") as f:
            json.dump(p, f)
        out.append((rec["at_s"], path))
    return out


def windows_of(rows, width):
    """[(start_s, arrivals, mean latency ms, mean service ms, {i: mean service ms})] per whole
    window from the first arrival; the service is the slot's occupancy (dispatch to answer), what
    the profile measures, also by the requests running at dispatch (i, the request included)."""
    t0 = min(r[0] for r in rows)
    end = max(r[0] for r in rows)
    n = max(1, int((end - t0) // width))
    sums = [[0, 0.0, 0.0, {}] for _ in range(n)]
    for at, lat, occupancy, running in rows:
        i = int((at - t0) // width)
        if i < n:
            sums[i][0] += 1
            sums[i][1] += lat
            sums[i][2] += occupancy
            by = sums[i][3].setdefault(running, [0, 0.0])
            by[0] += 1
            by[1] += occupancy
    return t0, [(t0 + i * width, c, s / c, o / c, {k: v[1] / v[0] for k, v in by.items()})
                for i, (c, s, o, by) in enumerate(sums) if c > 0]


def own_service_profile(profile, config, by_state, path):
    """The profile with the tuples (i, K, T) of `config` at the window's own mean service of the
    requests dispatched with i running (states the window did not see keep the profile's)."""
    p = json.loads(json.dumps(profile))
    _, k, t = config
    for tup in p["tuples"]:
        i = tup["service"]
        if tup["inter"] == k and tup["intra"] == t and tup.get("batch", 1) == 1 and i in by_state:
            if tup.get("node_ms"):
                tup["node_ms"] = min(tup["node_ms"] * by_state[i] / tup["mean_ms"], by_state[i])
            tup["mean_ms"] = by_state[i]
    with open(path, "w") as f:
        json.dump(p, f)
    return path


def rel(pred, obs):
    return (pred - obs) / obs if math.isfinite(pred) else math.inf


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--serf", required=True)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--run", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--slowdown-s", type=float, required=True)
    ap.add_argument("--window", type=float, default=20)
    ap.add_argument("--hogs", default="?")
    ap.add_argument("--csv")
    ap.add_argument("--png")
    a = ap.parse_args()
    if not a.window > 0:
        fail(f"--window {a.window}: give seconds > 0")
    try:
        config = tuple(int(x) for x in a.config.split(","))
        assert len(config) == 3 and min(config) >= 1
    except (ValueError, AssertionError):
        fail(f"--config {a.config}: give c,K,T (three counts >= 1)")
    profile = read_json(a.profile, "serf-profile/1", "serf profile")
    run = read_json(a.run, "serf-run/1", "serf serve --out")
    if "recalibrations" not in run:
        fail(f"{a.run}: no recalibrations (served with --recalibrate off?)")
    rows = []
    try:
        with open(a.run + ".csv", newline="") as f:
            for r in csv.DictReader(f):
                if r["answered"] == "1":
                    rows.append((float(r["arrival_s"]), float(r["latency_ms"]),
                                 1e3 * (float(r["done_s"]) - float(r["dispatch_s"])),
                                 int(r["running"])))
    except OSError as e:
        fail(f"{a.run}.csv: cannot open file ({e.strerror})")
    if len(rows) < 2:
        fail(f"{a.run}.csv: fewer than 2 answered requests")
    t0, wins = windows_of(rows, a.window)
    slow_s = t0 + a.slowdown_s  # on the controller's clock
    recs = sorted(run["recalibrations"], key=lambda r: r["at_s"])
    with tempfile.TemporaryDirectory() as folder:
        epochs = epoch_profiles(profile, recs, folder)
        table = []
        own_path = os.path.join(folder, "own_service.json")
        for start, count, obs, service, by_state in wins:
            rate = count / a.window
            model = [p for at, p in epochs if at <= start][-1]
            rec_ms, rec_service = predict(a.serf, model, config, rate)
            unc_ms, unc_service = predict(a.serf, epochs[0][1], config, rate)
            alone_ms, _ = predict(a.serf, own_service_profile(profile, config, by_state, own_path),
                                  config, rate)
            table.append({"t_s": start - t0, "rate_per_s": rate, "observed_ms": obs,
                          "recalibrated_ms": rec_ms, "uncalibrated_ms": unc_ms,
                          "queue_alone_ms": alone_ms,
                          "observed_service_ms": service, "recalibrated_service_ms": rec_service,
                          "uncalibrated_service_ms": unc_service,
                          "recalibrations_before": sum(1 for r in recs if r["at_s"] <= start)})
    for w in table:
        w["recalibrated_err"] = rel(w["recalibrated_ms"], w["observed_ms"])
        w["uncalibrated_err"] = rel(w["uncalibrated_ms"], w["observed_ms"])
        w["queue_alone_err"] = rel(w["queue_alone_ms"], w["observed_ms"])
        w["recalibrated_service_err"] = rel(w["recalibrated_service_ms"], w["observed_service_ms"])
        w["uncalibrated_service_err"] = rel(w["uncalibrated_service_ms"], w["observed_service_ms"])
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            out = csv.DictWriter(f, fieldnames=list(table[0].keys()))
            out.writeheader()
            out.writerows(table)
    report(table, recs, a, t0, config)
    if a.png:
        plot(table, recs, a, t0)


def median(xs):
    xs = sorted(xs)
    if not xs:
        return math.nan
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2


def report(table, recs, a, t0, config):
    s = a.slowdown_s
    before = [w for w in table if w["t_s"] + a.window <= s]
    # Windows wholly after the slowdown; "settled": starting at least 2 minutes after it.
    after = [w for w in table if w["t_s"] >= s]
    settled = [w for w in after if w["t_s"] >= s + GOAL_RETURN_S]
    print(f"drift run: config ({','.join(map(str, config))}), {len(table)} windows of "
          f"{a.window:g} s, background load ({a.hogs} busy loop(s)) from {s:.1f} s; "
          f"{len(recs)} recalibration(s)")
    for name, ws in (("before the slowdown", before), ("after it", after),
                     ("from 2 min after it", settled)):
        if not ws:
            continue
        print(f"  {name} ({len(ws)} windows): observed mean {median([w['observed_ms'] for w in ws]):.3f} ms "
              f"(median of windows), |error| median recalibrated "
              f"{100 * median([abs(w['recalibrated_err']) for w in ws]):.1f} %, uncalibrated "
              f"{100 * median([abs(w['uncalibrated_err']) for w in ws]):.1f} %; service "
              f"{median([w['observed_service_ms'] for w in ws]):.3f} ms, |error| recalibrated "
              f"{100 * median([abs(w['recalibrated_service_err']) for w in ws]):.1f} %, "
              f"uncalibrated {100 * median([abs(w['uncalibrated_service_err']) for w in ws]):.1f} %")
        print(f"    signed median error of the mean latency: recalibrated "
              f"{100 * median([w['recalibrated_err'] for w in ws]):+.1f} %; the queue model alone "
              f"(each window's own service per state) "
              f"{100 * median([w['queue_alone_err'] for w in ws]):+.1f} % "
              f"(|error| median {100 * median([abs(w['queue_alone_err']) for w in ws]):.1f} %)")
    if not after:
        print("goal check: not possible (no window after the slowdown)")
        return
    back = next((w for w in after if abs(w["recalibrated_err"]) <= GOAL_ERROR), None)
    back_s = back["t_s"] + a.window - s if back else math.inf
    within = sum(1 for w in settled if abs(w["recalibrated_err"]) <= GOAL_ERROR)
    unc_off = sum(1 for w in settled if abs(w["uncalibrated_err"]) > GOAL_ERROR)
    rec_med = median([abs(w["recalibrated_err"]) for w in settled])
    unc_med = median([abs(w["uncalibrated_err"]) for w in settled])
    print(f"  recalibrated error first within 5 % in the window ending {back_s:.0f} s after the "
          f"slowdown; from 2 min after it {within} of {len(settled)} windows within 5 % "
          f"(uncalibrated: {unc_off} of {len(settled)} off by more than 5 %)")
    met = (back_s <= GOAL_RETURN_S and bool(settled) and rec_med <= GOAL_ERROR
           and unc_med > GOAL_ERROR)
    print("goal check: " + ("MET" if met else "NOT MET") + ": the recalibrated rolling error "
          f"{'returns' if back_s <= GOAL_RETURN_S else 'does not return'} within 5 % within "
          f"2 minutes of the slowdown (median {100 * rec_med:.1f} % after), the uncalibrated "
          f"{'stays off' if unc_med > GOAL_ERROR else 'does not stay off'} "
          f"(median {100 * unc_med:.1f} %)")


def plot(table, recs, a, t0):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t = [(w["t_s"] + a.window / 2) / 60 for w in table]
    cap = lambda v: v if math.isfinite(v) else math.nan
    fig, (ax, ax3, ax2) = plt.subplots(3, 1, figsize=(10, 10), sharex=True)
    ax3.plot(t, [w["observed_service_ms"] for w in table], "k.-", label="observed")
    ax3.plot(t, [cap(w["recalibrated_service_ms"]) for w in table], "b.-",
             label="recalibrated model")
    ax3.plot(t, [cap(w["uncalibrated_service_ms"]) for w in table], "r.--",
             label="uncalibrated")
    ax3.set_ylabel("mean service (dispatch to answer, ms)")
    ax3.legend(loc="upper left", fontsize=8)
    ax.plot(t, [w["observed_ms"] for w in table], "k.-", label="observed mean")
    ax.plot(t, [cap(w["recalibrated_ms"]) for w in table], "b.-", label="recalibrated model")
    ax.plot(t, [cap(w["uncalibrated_ms"]) for w in table], "r.--", label="uncalibrated (as profiled)")
    ax.plot(t, [cap(w["queue_alone_ms"]) for w in table], "g:", label="queue model alone (window's own service)")
    ax.set_ylabel(f"mean latency per {a.window:g} s window (ms)")
    ax2.plot(t, [100 * cap(abs(w["recalibrated_err"])) for w in table], "b.-", label="recalibrated")
    ax2.plot(t, [100 * cap(abs(w["uncalibrated_err"])) for w in table], "r.--",
             label="uncalibrated")
    ax2.plot(t, [100 * cap(abs(w["queue_alone_err"])) for w in table], "g:",
             label="queue model alone")
    ax2.axhline(100 * GOAL_ERROR, color="g", lw=0.8, label="5 %")
    ax2.set_ylabel("|prediction - observed| / observed (%)")
    ax2.set_xlabel("minutes since the load started")
    for x in (ax, ax3, ax2):
        x.axvline(a.slowdown_s / 60, color="orange", lw=2, label=f"background load ({a.hogs} busy loop(s))")
        for r in recs:
            x.axvline((r["at_s"] - t0) / 60, color="b", lw=0.4, alpha=0.4)
        x.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    ax2.legend(loc="upper left", fontsize=8)
    ax2.set_yscale("symlog", linthresh=10)
    ax2.set_ylim(bottom=0)
    ax.set_yscale("log")
    ax.set_title("serf serve --recalibrate on through a slowdown (thin blue lines: recalibrations)")
    fig.tight_layout()
    fig.savefig(a.png, dpi=90)
    print(f"wrote {a.png}")


if __name__ == "__main__":
    main()
