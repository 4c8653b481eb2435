// serf/io/profile_io.h: serf-profile/1 files read, checked and written.
#include "serf/io/profile_io.h"

#include <catch2/catch.hpp>

#include "serf/io/json_fields.h"

using nlohmann::json;

namespace {

json good_profile() {
  return json::parse(
      R"({"format":"serf-profile/1","model":"m","hardware":{"nodes":4,"cores_per_node":8},
    "tuples":[{"service":1,"inter":1,"intra":1,"mean_ms":10.0,"scv":0.01,"samples":5},
              {"service":2,"inter":1,"intra":1,"mean_ms":12.5,"scv":0.02,"samples":5}]})");
}

std::string error_of(const json& doc) {
  auto p = serf::io::profile_from_json(doc, "p.json");
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().exit_code() == 2);
  return p.status().message();
}

}  // namespace

TEST_CASE("a valid profile parses and round-trips", "[core][io]") {
  auto p = serf::io::profile_from_json(good_profile(), "p.json");
  REQUIRE(p.ok());
  CHECK(p->hardware.nodes == 4);
  CHECK(p->hardware.cores_per_node == 8);
  REQUIRE(p->find({2, 1, 1}) != nullptr);
  CHECK(p->find({2, 1, 1})->mean_ms == 12.5);
  CHECK(p->find({3, 1, 1}) == nullptr);
  auto again = serf::io::profile_from_json(serf::io::profile_to_json(*p), "again");
  REQUIRE(again.ok());
  CHECK(again->tuples.size() == 2);
  CHECK(again->tuples[1].scv == 0.02);
}

TEST_CASE("node_ms (the nodes' share of a measured service time) round-trips", "[core][io]") {
  json doc = good_profile();
  doc["tuples"][0]["node_ms"] = 9.5;
  auto p = serf::io::profile_from_json(doc, "p.json");
  REQUIRE(p.ok());
  CHECK(p->tuples[0].node_ms == 9.5);
  CHECK(p->tuples[1].node_ms == 0);
  auto again = serf::io::profile_from_json(serf::io::profile_to_json(*p), "again");
  REQUIRE(again.ok());
  CHECK(again->tuples[0].node_ms == 9.5);
  CHECK_FALSE(serf::io::profile_to_json(*p)["tuples"][1].contains("node_ms"));
  doc["tuples"][0]["node_ms"] = 10.5;  // more than mean_ms
  CHECK_THAT(error_of(doc), Catch::Contains("tuples[0].node_ms"));
}

TEST_CASE("passes and passes_kept round-trip and are checked", "[core][io]") {
  json doc = good_profile();
  doc["tuples"][0]["passes"] = 5;
  doc["tuples"][0]["passes_kept"] = 4;
  auto p = serf::io::profile_from_json(doc, "p.json");
  REQUIRE(p.ok());
  CHECK(p->tuples[0].passes == 5);
  CHECK(p->tuples[0].passes_kept == 4);
  CHECK(p->tuples[1].passes == 0);
  const json out = serf::io::profile_to_json(*p);
  CHECK(out["tuples"][0]["passes_kept"] == 4);
  CHECK_FALSE(out["tuples"][1].contains("passes"));
  doc["tuples"][0]["passes_kept"] = 6;  // more than passes
  CHECK_THAT(error_of(doc), Catch::Contains("tuples[0].passes_kept"));
  doc["tuples"][0].erase("passes_kept");
  CHECK_THAT(error_of(doc), Catch::Contains("passes_kept"));
}

TEST_CASE("tuples carry the batch size b; files without it load as b = 1", "[core][io]") {
  json doc = good_profile();
  doc["tuples"].push_back(json::parse(
      R"({"service":1,"inter":1,"intra":1,"batch":4,"mean_ms":25.0,"scv":0.04,"samples":5})"));
  auto p = serf::io::profile_from_json(doc, "p.json");
  REQUIRE(p.ok());
  CHECK(p->tuples[0].tuple.batch == 1);
  CHECK(p->find({1, 1, 1})->mean_ms == 10.0);
  CHECK(p->find({1, 1, 1, 4})->mean_ms == 25.0);
  CHECK(p->find({2, 1, 1, 4}) == nullptr);
  CHECK(p->batch_sizes(1, 1) == std::vector<int>{1, 4});
  CHECK(p->batch_sizes(2, 1).empty());
  const json out = serf::io::profile_to_json(*p);
  CHECK(out["tuples"][0]["batch"] == 1);
  CHECK(out["tuples"][2]["batch"] == 4);
  auto again = serf::io::profile_from_json(out, "again");
  REQUIRE(again.ok());
  CHECK(again->find({1, 1, 1, 4})->scv == 0.04);

  doc["tuples"][2]["batch"] = 0;
  CHECK_THAT(error_of(doc), Catch::Contains("tuples[2].batch must lie in [1, 4096]"));
  doc["tuples"][2]["batch"] = "four";
  CHECK_THAT(error_of(doc), Catch::Contains("tuples[2].batch: expected an integer"));
  doc["tuples"][2]["batch"] = 1;  // the same tuple as tuples[0]
  CHECK_THAT(error_of(doc), Catch::Contains("duplicate tuple (i=1, K=1, T=1)"));
}

TEST_CASE("bad profiles give one clear message naming the field", "[core][io]") {
  json doc = good_profile();
  doc["format"] = "serf-profile/0";
  CHECK_THAT(error_of(doc), Catch::Contains("format"));

  doc = good_profile();
  doc["tuples"][1]["mean_ms"] = -1.0;
  CHECK_THAT(error_of(doc), Catch::Contains("tuples[1].mean_ms"));

  doc = good_profile();
  doc["tuples"][0]["scv"] = -0.5;
  CHECK_THAT(error_of(doc), Catch::Contains("tuples[0].scv"));

  doc = good_profile();
  doc["tuples"][0]["service"] = "one";
  CHECK_THAT(error_of(doc), Catch::Contains("tuples[0].service: expected an integer"));

  doc = good_profile();
  doc["hardware"]["nodes"] = 0;
  CHECK_THAT(error_of(doc), Catch::Contains("hardware.nodes"));

  doc = good_profile();
  doc["tuples"][1] = doc["tuples"][0];
  CHECK_THAT(error_of(doc), Catch::Contains("duplicate"));

  doc = good_profile();
  doc.erase("hardware");
  CHECK_THAT(error_of(doc), Catch::Contains("hardware: missing field"));

  // Tuples the profile's own hardware (4 nodes x 8 cores) cannot run were not measured on it.
  doc = good_profile();
  doc["tuples"][1]["intra"] = 9;
  CHECK_THAT(error_of(doc),
             Catch::Contains("p.json: tuples[1]: tuple (i=2, K=1, T=9) needs i*T = 18 threads per "
                             "node but a node has 8 cores (the profile's hardware: 4 nodes x 8 "
                             "cores)"));
  doc = good_profile();
  doc["tuples"][1]["intra"] = 5;  // T <= F, but i*T = 10 > 8
  CHECK_THAT(error_of(doc), Catch::Contains("tuples[1]: tuple (i=2, K=1, T=5) needs i*T = 10"));
  doc = good_profile();
  doc["tuples"][0]["inter"] = 5;
  CHECK_THAT(error_of(doc), Catch::Contains("tuples[0]: tuple (i=1, K=5, T=1) needs K = 5 nodes "
                                            "per request but the cluster has 4"));
  doc = good_profile();
  doc["tuples"][1]["intra"] = 4;  // i*T = 8 = F, K = 4 = N: the largest that fit
  doc["tuples"][1]["inter"] = 4;
  CHECK(serf::io::profile_from_json(doc, "p.json").ok());

  auto bad = serf::io::parse_json("{\"format\": ", "x.json");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("x.json: malformed JSON"));

  auto missing = serf::io::load_profile("/nonexistent/profile.json");
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.status().message(), Catch::Contains("/nonexistent/profile.json"));
}

TEST_CASE("a field the format does not have is refused, not ignored", "[core][io]") {
  json doc = good_profile();
  doc["tuples"][1]["bacth"] = 4;  // a misspelt "batch": its default, 1, would have been used
  CHECK_THAT(error_of(doc), Catch::Contains("tuples[1]: unknown field 'bacth'") &&
                                Catch::Contains("known: service, inter, intra, batch"));
  doc = good_profile();
  doc["hardware"]["gpus"] = 2;
  CHECK_THAT(error_of(doc), Catch::Contains("hardware: unknown field 'gpus'"));
  doc = good_profile();
  doc["comment"] = "x";
  CHECK_THAT(error_of(doc), Catch::Contains("unknown field 'comment'"));
  // Every optional field the writer emits is known.
  doc = good_profile();
  doc["illustrative"] = true;
  doc["incomplete"] = false;
  doc["note"] = "n";
  doc["tuples"][0].update({{"batch", 1},
                           {"wall_s", 1.0},
                           {"node_ms", 9.0},
                           {"passes", 2},
                           {"passes_kept", 1},
                           {"refreshed_at", "t"},
                           {"drift_scale", 1.1}});
  CHECK(serf::io::profile_from_json(doc, "p.json").ok());
}

TEST_CASE("a tuple's idle-arrival points round-trip and bad ones are refused", "[core][io]") {
  json doc = good_profile();
  doc["tuples"][0]["idle"] = json::array({{{"gap_ms", 0.2}, {"delta_ms", 0.05}, {"samples", 9}},
                                          {{"gap_ms", 3.0}, {"delta_ms", 0.2}, {"samples", 8}}});
  auto p = serf::io::profile_from_json(doc, "p.json");
  REQUIRE(p.ok());
  REQUIRE(p->tuples[0].idle.size() == 2);
  CHECK(p->tuples[0].idle[1].gap_ms == 3.0);
  CHECK(p->tuples[0].idle[1].delta_ms == 0.2);
  CHECK(p->tuples[0].idle[1].samples == 8);
  CHECK(serf::io::profile_to_json(*p)["tuples"][0]["idle"] == doc["tuples"][0]["idle"]);
  CHECK_FALSE(serf::io::profile_to_json(*p)["tuples"][1].contains("idle"));

  json bad = doc;
  bad["tuples"][0]["idle"][1]["gap_ms"] = 0.1;
  CHECK_THAT(error_of(bad), Catch::Contains("tuples[0].idle[1].gap_ms: the gaps must increase"));
  bad = doc;
  bad["tuples"][0]["idle"][0]["delta_ms"] = -0.1;
  CHECK_THAT(error_of(bad), Catch::Contains("tuples[0].idle[0].delta_ms: must be a number"));
  bad = doc;
  bad["tuples"][0]["idle"][0]["gap_ms"] = 0;
  CHECK_THAT(error_of(bad), Catch::Contains("tuples[0].idle[0].gap_ms"));
  bad = doc;
  bad["tuples"][0]["idle"][0]["samples"] = 0;
  CHECK_THAT(error_of(bad), Catch::Contains("tuples[0].idle[0].samples: must be >= 1"));
  bad = doc;
  bad["tuples"][0]["idle"][0]["gap"] = 1;
  CHECK_THAT(error_of(bad), Catch::Contains("tuples[0].idle[0]: unknown field 'gap'"));
  bad = doc;
  bad["tuples"][0]["idle"] = 3;
  CHECK_FALSE(serf::io::profile_from_json(bad, "p.json").ok());
  bad = doc;
  bad["tuples"][0]["idle"][1]["busy_ms"] = -0.01;
  CHECK_THAT(error_of(bad), Catch::Contains("tuples[0].idle[1].busy_ms: must be a number"));
  bad = doc;
  bad["tuples"][0]["idle"][1]["busy_ms"] = "fast";
  CHECK_THAT(error_of(bad), Catch::Contains("tuples[0].idle[1].busy_ms"));

  // busy_ms (session 31) is optional: read when there, 0 when not, written back when > 0.
  json busy = doc;
  busy["tuples"][0]["idle"][1]["busy_ms"] = 0.04;
  auto b = serf::io::profile_from_json(busy, "p.json");
  REQUIRE(b.ok());
  CHECK(b->tuples[0].idle[0].busy_ms == 0.0);
  CHECK(b->tuples[0].idle[1].busy_ms == 0.04);
  CHECK(serf::io::profile_to_json(*b)["tuples"][0]["idle"] == busy["tuples"][0]["idle"]);
  bad = doc;
  bad["tuples"][0]["idle"][0] = 3;
  CHECK_THAT(error_of(bad), Catch::Contains("tuples[0].idle[0]: must be an object"));
}
