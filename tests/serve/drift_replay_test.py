#!/usr/bin/python3
"""bench/drift_replay on a synthetic journal (docs/calibration.md, "Choosing the rule's
parameters"): one tuple (1,1,1) of tests/mpi/emulated_profile.json (21 ms) served at 30 answers/s,
its service i.i.d. around 21 ms (sd 10 %) for 120 s, then around 27.3 ms (+30 %) for 120 s.
The replay must find the step and nothing before it, write a serf-run/1 file that plot_drift.py
reads (recalibrations with model_mean_ms, the journal linked beside it), and answer a bad journal
with one line and exit 2.

  drift_replay_test.py DRIFT_REPLAY PROFILE"""
import json
import os
import random
import subprocess
import sys
import tempfile

replay, profile = sys.argv[1], sys.argv[2]
STEP_S, MEAN0, MEAN1 = 120.0, 21.0, 27.3
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


with tempfile.TemporaryDirectory() as d:
    journal = os.path.join(d, "run.json.csv")
    rng = random.Random(7)
    with open(journal, "w") as f:
        f.write("id,arrival_s,dispatch_s,done_s,latency_ms,service_ms,unit,slot,running,service,"
                "inter,intra,batch,served_batch,outcome,answered\n")
        t = 1.0
        for n in range(int(2 * STEP_S * 30)):
            t += 1 / 30
            mean = MEAN0 if t < STEP_S else MEAN1
            s = max(1.0, rng.gauss(mean, 0.1 * mean)) / 1e3
            f.write(f"{n},{t:.6f},{t:.6f},{t + s:.6f},{1e3 * s:.4f},{1e3 * s:.4f},0,0,1,1,1,1,1,1,"
                    "answered,1\n")
        # A refused request (not answered) and a second row of a batch are not observations.
        f.write(f"{n + 1},{t:.6f},0,{t:.6f},0,0,0,0,0,1,1,1,1,1,rejected,0\n")
    out = os.path.join(d, "replay.json")
    r = subprocess.run([replay, "--profile", profile, "--journal", journal, "--out", out],
                       capture_output=True, text=True)
    print(r.stdout.strip())
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr.strip()}")
    if r.returncode == 0:
        doc = json.load(open(out))
        recs = doc["recalibrations"]
        check(doc["format"] == "serf-run/1", "format")
        check(len(recs) >= 1, "the +30 % step was not found")
        check(all(x["at_s"] > STEP_S for x in recs), "a recalibration before the step")
        if recs:
            first = recs[0]
            check(first["tuple"] == [1, 1, 1], f"tuple {first['tuple']}")
            check(first["at_s"] < STEP_S + 40, f"found {first['at_s'] - STEP_S:.1f} s late")
            check(abs(recs[-1]["new_mean_ms"] / MEAN1 - 1) < 0.03,
                  f"new mean {recs[-1]['new_mean_ms']:.2f} ms, truth {MEAN1}")
            model = {tuple(m[:4]): m[4] for m in first["model_mean_ms"]}
            check(abs(model[(1, 1, 1, 1)] - first["new_mean_ms"]) < 1e-9, "model_mean_ms")
            # (2,1,1) unobserved: scaled by its neighbour's drift.
            check(abs(model[(2, 1, 1, 1)] / 27.0 - first["new_mean_ms"] / MEAN0) < 1e-9,
                  "the unobserved neighbour was not scaled alike")
        check(os.path.realpath(out + ".csv") == os.path.realpath(journal), "journal link")
    # A stricter rule (a 40 % minimum change) leaves the 30 % step alone.
    r = subprocess.run([replay, "--profile", profile, "--journal", journal, "--min-change", "0.4"],
                       capture_output=True, text=True)
    check(r.returncode == 0 and "recalibrations 0" in r.stdout, f"--min-change 0.4: {r.stdout}")
    # Bad input: one line naming it, exit 2.
    bad = os.path.join(d, "bad.csv")
    with open(bad, "w") as f:
        f.write("id,arrival_s\n1,2\n")
    for args, needle in [(["--journal", bad], "no column 'dispatch_s'"),
                         (["--journal", os.path.join(d, "missing.csv")], "cannot open file"),
                         (["--journal", journal, "--min-change", "-1"], "--min-change")]:
        r = subprocess.run([replay, "--profile", profile] + args, capture_output=True, text=True)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 2 and len(lines) == 1 and needle in lines[0],
              f"{args}: exit {r.returncode}, {r.stderr.strip()!r}")
print("FAILED" if failures else "PASS")
sys.exit(1 if failures else 0)
