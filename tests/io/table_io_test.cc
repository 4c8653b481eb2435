#include "serf/io/table_io.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>

#include "serf/io/json_fields.h"

using namespace serf;

namespace {

ConfigurationTable example_table() {
  ConfigurationTable t;
  t.model = "toy";
  t.nodes = 4;
  t.cores_per_node = 8;
  t.queue = QueueKind::kMdInterf;  // not the default: the round trip must carry it
  TableEntry a;
  a.rate_per_s = 1.5;
  a.stable = true;
  a.config = {2, 1, 4};
  a.units = 4;
  a.unit_rate_per_s = 0.375;
  a.prediction = {true, 120.5, 20.25, 100.25, 0.4};
  a.score_ms = 120.5;
  TableEntry b;
  b.rate_per_s = 99.0;  // overloaded: no configuration is stable
  t.entries = {a, b};
  return t;
}

}  // namespace

TEST_CASE("tables round-trip through serf-table/1 JSON", "[io][table]") {
  const auto doc = io::table_to_json(example_table());
  CHECK(doc["format"] == "serf-table/1");
  CHECK(doc["queue"] == "md-interf");
  CHECK(doc["entries"][0]["service"] == 2);
  CHECK(doc["entries"][0]["latency_ms"] == 120.5);
  CHECK(doc["entries"][1]["stable"] == false);
  CHECK(doc["entries"][1]["service"].is_null());
  CHECK(doc["entries"][1]["latency_ms"].is_null());
  auto back = io::table_from_json(doc, "t.json");
  REQUIRE(back.ok());
  REQUIRE(back->entries.size() == 2);
  CHECK(back->queue == QueueKind::kMdInterf);
  CHECK(back->entries[0].config == Configuration{2, 1, 4});
  CHECK(back->entries[0].prediction.wait_ms == 20.25);
  CHECK_FALSE(back->entries[1].stable);
  CHECK(back->lookup(2.0).entry->rate_per_s == 99.0);
}

TEST_CASE("table entries carry the batch size b (absent: 1)", "[io][table]") {
  ConfigurationTable t = example_table();
  t.entries[0].config.batch = 8;
  auto doc = io::table_to_json(t);
  CHECK(doc["entries"][0]["batch"] == 8);
  CHECK(doc["entries"][1]["batch"].is_null());
  auto back = io::table_from_json(doc, "t.json");
  REQUIRE(back.ok());
  CHECK(back->entries[0].config == Configuration{2, 1, 4, 8});
  doc["entries"][0].erase("batch");  // a table written before batching
  back = io::table_from_json(doc, "t.json");
  REQUIRE(back.ok());
  CHECK(back->entries[0].config == Configuration{2, 1, 4, 1});
  doc["entries"][0]["batch"] = 0;
  CHECK_THAT(io::table_from_json(doc, "t.json").status().message(),
             Catch::Contains("t.json: entries[0]: configuration (c=2, K=1, T=4, b=0): the batch "
                             "size b must lie in [1, 4096] (got 0)"));
  CHECK_THAT(io::table_to_csv(t), Catch::Contains("1.5,true,2,1,4,8,4,0.375"));
}

TEST_CASE("bad tables name the field", "[io][table]") {
  auto doc = io::table_to_json(example_table());
  doc["entries"][0]["inter"] = "two";
  auto r = io::table_from_json(doc, "t.json");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("t.json: entries[0].inter"));
  doc = io::table_to_json(example_table());
  doc["entries"][1]["rate"] = 1.0;
  CHECK_THAT(io::table_from_json(doc, "t.json").status().message(), Catch::Contains("ascending"));
  doc = io::table_to_json(example_table());
  doc["queue"] = "mg1";
  CHECK_THAT(io::table_from_json(doc, "t.json").status().message(), Catch::Contains("queue"));
  // Every entry's configuration must run on the table's cluster (validate()): c*T = 12 > 8 cores.
  doc = io::table_to_json(example_table());
  doc["entries"][0]["service"] = 3;
  CHECK_THAT(io::table_from_json(doc, "t.json").status().message(),
             Catch::Contains("t.json: entries[0]: configuration (c=3, K=1, T=4) needs c*T = 12"));
  doc = io::table_to_json(example_table());
  doc["entries"][0]["inter"] = 8;
  CHECK_THAT(io::table_from_json(doc, "t.json").status().message(),
             Catch::Contains("needs K = 8 nodes per request but the cluster has 4"));
}

TEST_CASE("a table's numbers that no plan writes are refused, naming the field", "[io][table]") {
  // Edited by hand, each was read as it stood: "bacth" served b = 1, a negative latency or a
  // utilization of 1 fed the switch gate and /metrics, units that 4 nodes cannot make.
  const std::pair<std::function<void(nlohmann::json&)>, std::string> cases[] = {
      {[](nlohmann::json& d) { d["entries"][0]["bacth"] = 8; },
       "t.json: entries[0]: unknown field 'bacth'"},
      {[](nlohmann::json& d) { d["notes"] = "x"; }, "t.json: unknown field 'notes'"},
      {[](nlohmann::json& d) { d["entries"][0]["units"] = 3; },
       "t.json: entries[0].units: 3, but 4 nodes make 4 unit(s) of K = 1"},
      {[](nlohmann::json& d) { d["entries"][0]["unit_rate_per_s"] = 1.5; },
       "t.json: entries[0].unit_rate_per_s: 1.5, but the rate 1.5 over 4 unit(s) is 0.375"},
      {[](nlohmann::json& d) { d["entries"][0]["latency_ms"] = -120.5; },
       "t.json: entries[0].latency_ms: -120.5 must be > 0 ms"},
      {[](nlohmann::json& d) { d["entries"][0]["score_ms"] = 0; },
       "t.json: entries[0].score_ms: 0 must be > 0 ms"},
      {[](nlohmann::json& d) { d["entries"][0]["wait_ms"] = -1; },
       "t.json: entries[0].wait_ms: -1 must be >= 0 ms"},
      {[](nlohmann::json& d) { d["entries"][0]["utilization"] = 1; },
       "t.json: entries[0].utilization: 1 must lie in [0, 1) for a stable entry"}};
  for (const auto& [edit, want] : cases) {
    auto doc = io::table_to_json(example_table());
    edit(doc);
    const auto r = io::table_from_json(doc, "t.json");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains(want));
  }
  auto doc = io::table_to_json(example_table());
  doc["all"] = nlohmann::json::array();  // plan --all's predictions: known, not read
  CHECK(io::table_from_json(doc, "t.json").ok());
}

TEST_CASE("CSV beside the table", "[io][table]") {
  const std::string csv = io::table_to_csv(example_table());
  CHECK(csv ==
        "rate_per_s,stable,service,inter,intra,batch,units,unit_rate_per_s,latency_ms,wait_ms,"
        "service_ms,utilization\n"
        "1.5,true,2,1,4,1,4,0.375,120.5,20.25,100.25,0.4\n"
        "99,false,,,,,,,,,,\n");
  CHECK(io::csv_path_for("out/t.json") == "out/t.csv");
  CHECK(io::csv_path_for("out/t.json", ".all.csv") == "out/t.all.csv");
  CHECK(io::csv_path_for("table") == "table.csv");
  CHECK(io::all_predictions_to_csv(example_table()).empty());
}

TEST_CASE("a write that cannot be done is an error, at once", "[io][write]") {
  // A stream buffers: /dev/full's error showed only at the close, after the check (exit 0).
  const Status full = io::write_text_file("/dev/full", std::string(100, 'x'));
  REQUIRE_FALSE(full.ok());
  CHECK(full.message().find("/dev/full: write error") != std::string::npos);
  // A pipe no process reads: its open blocked for good; now refused at once.
  char dir[] = "/tmp/serf_io_fifo_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string fifo = std::string(dir) + "/fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  const Status pipe = io::write_text_file(fifo, "{}\n");
  REQUIRE_FALSE(pipe.ok());
  CHECK(pipe.message().find("no process reads it") != std::string::npos);
  std::remove(fifo.c_str());
  rmdir(dir);
}
