// The status page (GET /): the snapshot's counts, p99, switches and recalibrations, and the HTML
// (escaped model name, ids the CLI test reads, no NaN, self-contained).
#include "serve/status_page.h"

#include <catch2/catch.hpp>

using namespace serf;
using namespace serf::serve;

namespace {

RequestRecord ended(Outcome outcome, double latency_s, int generation, Configuration config) {
  RequestRecord r;
  r.arrival_s = 1;
  r.dispatch_s = outcome == Outcome::kRejected ? 0 : 1.0 + 0.1 * generation;
  r.done_s = 1 + latency_s;
  r.generation = generation;
  r.config = config;
  r.answered = outcome == Outcome::kAnswered;
  r.outcome = outcome;
  return r;
}

}  // namespace

TEST_CASE("html_escape escapes the five characters HTML gives meaning", "[serve][status]") {
  REQUIRE(html_escape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&#39;");
  REQUIRE(html_escape("plain") == "plain");
}

TEST_CASE("the snapshot counts outcomes, takes the window's p99 and sees switches",
          "[serve][status]") {
  ServeMetrics metrics;
  const Configuration a{1, 1, 1, 1}, b{2, 1, 1, 1};
  // 100 answers of 1..100 ms in configuration a, then a rejection, then one answer in b.
  for (int i = 1; i <= 100; ++i) metrics.record(ended(Outcome::kAnswered, i * 1e-3, 1, a));
  metrics.record(ended(Outcome::kRejected, 0, 1, a));
  metrics.record(ended(Outcome::kTimedOut, 0.5, 1, a));
  metrics.record(ended(Outcome::kAnswered, 0.2, 2, b));
  Recalibration r;
  r.at_s = 3;
  r.tuple = {1, 1, 1};
  r.old_mean_ms = 10;
  r.new_mean_ms = 12;
  r.samples = 50;
  metrics.count_recalibration(r);
  LiveStatus live;
  live.config = b;
  live.ready = true;
  StatusSnapshot s = metrics.snapshot(live);
  REQUIRE(s.answered == 101);
  REQUIRE(s.rejected == 1);
  REQUIRE(s.timed_out == 1);
  REQUIRE(s.received == 103);
  REQUIRE(s.window_answered == 101);
  // serf::quantile at 0.99 of 101 sorted answers: h = 0.99 * 100 = 99, the 100th, 100 ms.
  REQUIRE(s.observed_p99_ms.value() == Approx(100.0));
  REQUIRE(s.observed_mean_ms.value() == Approx((5050.0 + 200.0) / 101.0));
  REQUIRE(!s.predicted_mean_ms);  // no profile or table
  REQUIRE(!s.predicted_p99_ms);
  REQUIRE(s.switches.size() == 1);
  REQUIRE(s.switches[0].from == a);
  REQUIRE(s.switches[0].to == b);
  REQUIRE(s.switches[0].at_s == Approx(1.2));
  REQUIRE(s.recalibrations_total == 1);
  REQUIRE(s.recalibrations.at(0).new_mean_ms == 12);
  REQUIRE(s.history.size() == ServeMetrics::kHistoryS / ServeMetrics::kHistoryBinS);
  REQUIRE(s.history.back().mean_ms.has_value());

  s.model = "m<script>alert(1)</script>&";
  const std::string page = status_page_html(s);
  REQUIRE(page.find("m&lt;script&gt;alert(1)&lt;/script&gt;&amp;") != std::string::npos);
  REQUIRE(page.find("<script") == std::string::npos);
  REQUIRE(page.find("<meta http-equiv=\"refresh\"") != std::string::npos);
  REQUIRE(page.find("id=\"config-c\">2<") != std::string::npos);
  REQUIRE(page.find("id=\"received\">103<") != std::string::npos);
  REQUIRE(page.find("id=\"timed-out\">1<") != std::string::npos);
  REQUIRE(page.find("id=\"recalibrations\">1<") != std::string::npos);
  REQUIRE(page.find("id=\"predicted-mean\">n/a<") != std::string::npos);
  REQUIRE(page.find("id=\"predicted-p99\">n/a<") != std::string::npos);
  REQUIRE(page.find("id=\"observed-p99\">100.00 ms<") != std::string::npos);
  REQUIRE(page.find("(c=1, K=1, T=1)") != std::string::npos);  // the switch's from
  REQUIRE(page.find("nan") == std::string::npos);
  REQUIRE(page.find("<svg") != std::string::npos);
}

TEST_CASE("the page keeps only the most recent switches", "[serve][status]") {
  ServeMetrics metrics;
  for (int g = 1; g <= 25; ++g) {
    metrics.record(ended(Outcome::kAnswered, 1e-3, g, Configuration{1 + g % 2, 1, 1, 1}));
  }
  StatusSnapshot s = metrics.snapshot(LiveStatus{});
  REQUIRE(s.switches.size() == ServeMetrics::kRecentEvents);
  REQUIRE(s.switches.back().at_s == Approx(1.0 + 2.5));
}

TEST_CASE("the page shows the predicted p99 next to the observed one", "[serve][status]") {
  StatusSnapshot s;
  s.window_s = 30;
  s.predicted_mean_ms = 12.5;
  s.predicted_p99_ms = 48.25;
  s.observed_mean_ms = 13;
  s.observed_p99_ms = 51.5;
  const std::string page = status_page_html(s);
  REQUIRE(page.find("id=\"predicted-p99\">48.25 ms<") != std::string::npos);
  REQUIRE(page.find("id=\"observed-p99\">51.50 ms<") != std::string::npos);
  REQUIRE(page.find("predicted-p99") < page.find("observed-p99"));
}
