// serf profile --refresh's arithmetic (profiler/profile_refresh.h): which tuples a run names, and
// the refreshed profile (re-measured tuples new, the others scaled by their neighbours' drift).
#include "profiler/profile_refresh.h"

#include <catch2/catch.hpp>

namespace serf::profiler {
namespace {

Profile old_profile() {
  Profile p;
  p.model = "tiny";
  p.hardware = {2, 2};
  p.note = "measured";
  for (ParallelismTuple t : std::vector<ParallelismTuple>{
           {1, 1, 1, 1}, {2, 1, 1, 1}, {1, 1, 2, 1}, {1, 2, 1, 1}, {2, 2, 1, 1}, {1, 1, 1, 2}}) {
    TupleStats s;
    s.tuple = t;
    s.mean_ms = 10.0 * t.service * t.inter / t.intra * t.batch;
    s.scv = 0.05;
    s.samples = 20;
    s.node_ms = 0.9 * s.mean_ms;
    p.tuples.push_back(s);
  }
  p.reindex();
  return p;
}

nlohmann::json run(const std::string& model, const nlohmann::json& tuples) {
  nlohmann::json r{
      {"format", "serf-run/1"}, {"model", model}, {"recalibrations", nlohmann::json::array()}};
  for (const auto& t : tuples) r["recalibrations"].push_back({{"tuple", t}, {"at_s", 1.0}});
  return r;
}

TEST_CASE("drifted_tuples: the run's recalibrated tuples, each once; bad runs named") {
  const Profile p = old_profile();
  auto t = drifted_tuples(run("tiny", {{2, 1, 1}, {1, 1, 1, 2}, {2, 1, 1}}), "run.json", p);
  REQUIRE(t.ok());
  REQUIRE(t->size() == 2);
  CHECK((*t)[0] == ParallelismTuple{2, 1, 1, 1});
  CHECK((*t)[1] == ParallelismTuple{1, 1, 1, 2});
  CHECK(drifted_tuples(run("tiny", nlohmann::json::array()), "run.json", p)->empty());
  auto other = drifted_tuples(run("cifar10", {{2, 1, 1}}), "run.json", p);
  REQUIRE(!other.ok());
  CHECK_THAT(other.status().message(), Catch::Contains("run.json") && Catch::Contains("cifar10"));
  nlohmann::json off = run("tiny", {{2, 1, 1}});
  off.erase("recalibrations");
  CHECK_THAT(drifted_tuples(off, "run.json", p).status().message(),
             Catch::Contains("did not self-calibrate"));
  CHECK_THAT(drifted_tuples(run("tiny", {{3, 1, 1}}), "run.json", p).status().message(),
             Catch::Contains("(i=3, K=1, T=1)"));
  CHECK_THAT(drifted_tuples(run("tiny", {{0, 1, 1}}), "run.json", p).status().message(),
             Catch::Contains("recalibrations[0].tuple"));
  CHECK_THAT(drifted_tuples(run("tiny", {{1, 1}}), "run.json", p).status().message(),
             Catch::Contains("expected [i, K, T] or [i, K, T, b]"));
  nlohmann::json profile_doc{{"format", "serf-profile/1"}, {"model", "tiny"}};
  CHECK_THAT(drifted_tuples(profile_doc, "p.json", p).status().message(),
             Catch::Contains("expected \"serf-run/1\""));
}

TEST_CASE("select_tuples: K and b filters, empty lists select all") {
  const Profile p = old_profile();
  CHECK(select_tuples(p, {}, {}).size() == 6);
  CHECK(select_tuples(p, {2}, {}).size() == 2);
  CHECK(select_tuples(p, {1}, {2}) == std::vector<ParallelismTuple>{{1, 1, 1, 2}});
  CHECK(select_tuples(p, {4}, {}).empty());
}

TEST_CASE("merge_refresh: re-measured tuples new, the others scaled by neighbours' drift") {
  const Profile old = old_profile();
  Profile measured;
  measured.model = "tiny";
  measured.hardware = old.hardware;
  TupleStats m;
  m.tuple = {2, 1, 1, 1};
  m.mean_ms = 24.0;  // profiled 20: drift 1.2
  m.scv = 0.1;
  m.samples = 6;
  measured.tuples.push_back(m);
  measured.reindex();
  RefreshSummary sum;
  auto fresh =
      merge_refresh(old, measured, "2026-11-24T05:00:00Z", "the drift seen in r.json", &sum);
  REQUIRE(fresh.ok());
  CHECK(sum.remeasured == 1);
  CHECK(sum.scaled == 5);
  CHECK(sum.drift == Approx(1.2));
  const TupleStats* f = fresh->find({2, 1, 1, 1});
  REQUIRE(f != nullptr);
  CHECK(f->mean_ms == 24.0);
  CHECK(f->scv == 0.1);
  CHECK(f->samples == 6);
  CHECK(f->refreshed_at == "2026-11-24T05:00:00Z");
  CHECK(f->drift_scale == 0);
  // Same (K, T), same K, other K (all observations): one observation, so 1.2 everywhere.
  for (ParallelismTuple t :
       std::vector<ParallelismTuple>{{1, 1, 1, 1}, {1, 1, 2, 1}, {1, 2, 1, 1}}) {
    const TupleStats* s = fresh->find(t);
    REQUIRE(s != nullptr);
    CHECK(s->mean_ms == Approx(old.find(t)->mean_ms * 1.2));
    CHECK(s->node_ms == Approx(old.find(t)->node_ms * 1.2));
    CHECK(s->scv == 0.05);
    CHECK(s->samples == 20);
    CHECK(s->refreshed_at.empty());
    CHECK(s->drift_scale == Approx(1.2));
  }
  CHECK_THAT(fresh->note, Catch::StartsWith("measured; refreshed 2026-11-24T05:00:00Z (the drift "
                                            "seen in r.json): 1 tuple(s) re-measured"));
  // A second refresh compounds drift_scale on the tuples still not measured.
  measured.tuples[0].tuple = {1, 1, 2, 1};
  measured.tuples[0].mean_ms = fresh->find({1, 1, 2, 1})->mean_ms * 0.5;
  measured.reindex();
  auto again = merge_refresh(*fresh, measured, "2026-11-24T06:00:00Z", "all tuples", nullptr);
  REQUIRE(again.ok());
  CHECK(again->find({1, 1, 2, 1})->refreshed_at == "2026-11-24T06:00:00Z");
  CHECK(again->find({2, 1, 1, 1})->refreshed_at == "2026-11-24T05:00:00Z");
  CHECK(again->find({2, 1, 1, 1})->drift_scale == Approx(0.5));
  CHECK(again->find({1, 1, 1, 1})->drift_scale == Approx(0.6));
  CHECK(again->find({1, 1, 1, 1})->mean_ms == Approx(10 * 0.6));
}

}  // namespace
}  // namespace serf::profiler
