#!/usr/bin/env python3
"""configs/grafana/serf.json: valid Grafana dashboard JSON whose every panel queries metrics that
serve/metrics.cc exposes (a renamed metric would leave an empty panel)."""
import json, re, sys

dashboard, metrics_source = sys.argv[1], sys.argv[2]
doc = json.load(open(dashboard))
exposed = set(re.findall(r'"(serf_[a-z_]+)"', open(metrics_source).read()))
assert doc["title"] and doc["uid"] and isinstance(doc["schemaVersion"], int), "dashboard header"
assert doc["panels"], "no panels"
ids = set()
for p in doc["panels"]:
    assert p["title"].strip(), p
    assert p["id"] not in ids, "duplicate panel id %s" % p["id"]
    ids.add(p["id"])
    g = p["gridPos"]
    assert all(isinstance(g[k], int) for k in ("x", "y", "w", "h")) and g["x"] + g["w"] <= 24, p
    assert p["targets"], "panel without a query: " + p["title"]
    for t in p["targets"]:
        names = re.findall(r"serf_[a-z_]+", t["expr"])
        assert names, t
        for n in names:
            base = re.sub(r"_(bucket|sum|count)$", "", n)
            assert base in exposed, "%s (panel %r) is not in %s" % (n, p["title"], metrics_source)
print("ok: %d panels, every metric exposed" % len(doc["panels"]))
