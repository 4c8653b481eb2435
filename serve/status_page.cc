#include "serve/status_page.h"

#include <algorithm>
#include <cstdio>
#include <optional>

namespace serf::serve {

namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string ms(const std::optional<double>& v) { return v ? fixed(*v, 2) + " ms" : "n/a"; }

std::string cell(const std::string& id, const std::string& value) {
  return "<td id=\"" + id + "\">" + value + "</td>";
}

std::string count(uint64_t n) { return std::to_string(n); }

const char* kStyle =
    "body{font-family:sans-serif;margin:1.5em;color:#222;background:#fafafa}"
    "h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.2em 0 .4em}"
    "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:.25em .7em;"
    "text-align:right}th{background:#e4ecf4}.state{font-weight:bold}"
    ".ready{color:#17702a}.draining{color:#b35c00}.starting{color:#888}"
    ".note{color:#666;font-size:.85em}";

// Mean latency per bin (a line; gaps where nothing was answered), the prediction for the running
// configuration now (dashed), and the rate per bin (bars).
std::string sparkline(const StatusSnapshot& s) {
  const double w = 600, h = 140, bar_h = 40;
  double top_ms = s.predicted_mean_ms.value_or(0);
  double top_rate = 0;
  for (const auto& b : s.history) {
    top_ms = std::max(top_ms, b.mean_ms.value_or(0));
    top_rate = std::max(top_rate, b.rate_per_s);
  }
  const size_t n = std::max<size_t>(s.history.size(), 1);
  const double step = w / static_cast<double>(n);
  auto y_of = [&](double v) { return fixed(h - bar_h - 8 - (h - bar_h - 16) * v / top_ms, 1); };
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fixed(w, 0) +
                    "\" height=\"" + fixed(h, 0) + "\" viewBox=\"0 0 " + fixed(w, 0) + " " +
                    fixed(h, 0) + "\" style=\"background:#fff;border:1px solid #bbb\">";
  for (size_t i = 0; i < s.history.size() && top_rate > 0; ++i) {
    const double bh = bar_h * s.history[i].rate_per_s / top_rate;
    svg += "<rect x=\"" + fixed(step * static_cast<double>(i), 1) + "\" y=\"" + fixed(h - bh, 1) +
           "\" width=\"" + fixed(std::max(step - 1, 1.0), 1) + "\" height=\"" + fixed(bh, 1) +
           "\" fill=\"#9ecae1\"/>";
  }
  if (top_ms > 0) {
    std::string path;
    bool pen_down = false;
    for (size_t i = 0; i < s.history.size(); ++i) {
      if (!s.history[i].mean_ms) {
        pen_down = false;
        continue;
      }
      path += (pen_down ? " L" : " M") + fixed(step * (static_cast<double>(i) + 0.5), 1) + " " +
              y_of(*s.history[i].mean_ms);
      pen_down = true;
    }
    if (!path.empty()) {
      svg += "<path d=\"" + path + "\" fill=\"none\" stroke=\"#c0392b\" stroke-width=\"2\"/>";
    }
    if (s.predicted_mean_ms) {
      const std::string y = y_of(*s.predicted_mean_ms);
      svg += "<line x1=\"0\" x2=\"" + fixed(w, 0) + "\" y1=\"" + y + "\" y2=\"" + y +
             "\" stroke=\"#2c7bb6\" stroke-dasharray=\"6 4\" stroke-width=\"1.5\"/>";
    }
    svg +=
        "<text x=\"4\" y=\"14\" font-size=\"12\" fill=\"#444\">" + fixed(top_ms, 2) + " ms</text>";
  }
  return svg + "</svg>";
}

std::string switches_table(const StatusSnapshot& s) {
  if (s.switches.empty()) return "<p class=\"note\">none seen</p>";
  std::string t = "<table><tr><th>at (s)</th><th>from</th><th>to</th></tr>";
  for (auto it = s.switches.rbegin(); it != s.switches.rend(); ++it) {
    t += "<tr><td>" + fixed(it->at_s, 1) + "</td><td>" + html_escape(to_string(it->from)) +
         "</td><td>" + html_escape(to_string(it->to)) + "</td></tr>";
  }
  return t + "</table>";
}

std::string recalibrations_table(const StatusSnapshot& s) {
  if (s.recalibrations.empty()) return "<p class=\"note\">none</p>";
  std::string t =
      "<table><tr><th>at (s)</th><th>tuple</th><th>old mean</th><th>new mean</th>"
      "<th>answers</th></tr>";
  for (auto it = s.recalibrations.rbegin(); it != s.recalibrations.rend(); ++it) {
    t += "<tr><td>" + fixed(it->at_s, 1) + "</td><td>" + html_escape(to_string(it->tuple)) +
         "</td><td>" + fixed(it->old_mean_ms, 3) + " ms</td><td>" + fixed(it->new_mean_ms, 3) +
         " ms</td><td>" + std::to_string(it->samples) + "</td></tr>";
  }
  return t + "</table>";
}

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

std::string status_page_html(const StatusSnapshot& s) {
  const std::string model = html_escape(s.model);
  const std::string window = fixed(s.window_s, 0) + " s";
  const char* state = s.live.draining ? "draining" : (s.live.ready ? "ready" : "starting");
  const Configuration& c = s.live.config;
  std::string p = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  p += "<meta http-equiv=\"refresh\" content=\"" + std::to_string(kStatusRefreshS) + "\">";
  p += "<title>SERF: " + model + "</title><style>" + kStyle + "</style></head><body>\n";
  p += "<h1>SERF serving <span id=\"model\">" + model + "</span></h1>";
  p += std::string("<p>state: <span class=\"state ") + state + "\" id=\"state\">" + state +
       "</span> <span class=\"note\">(refreshes every " + std::to_string(kStatusRefreshS) +
       " s; Prometheus text at <a href=\"/metrics\">/metrics</a>)</span></p>\n";
  p += "<h2>Configuration</h2><table><tr><th>c</th><th>K</th><th>T</th><th>b</th>"
       "<th>units</th><th>switches</th></tr><tr>" +
       cell("config-c", std::to_string(c.service)) + cell("config-K", std::to_string(c.inter)) +
       cell("config-T", std::to_string(c.intra)) + cell("config-b", std::to_string(c.batch)) +
       cell("units", std::to_string(s.live.units)) +
       cell("switches", std::to_string(s.live.switches)) + "</tr></table>\n";
  p += "<h2>Load and latency (last " + window +
       ")</h2><table><tr><th>arrival rate</th>"
       "<th>ended</th><th>predicted mean</th><th>observed mean</th><th>predicted p99</th>"
       "<th>observed p99</th>"
       "<th>queued</th><th>in flight</th></tr><tr>" +
       cell("arrival-rate", fixed(s.live.rate_per_s, 2) + " /s") +
       cell("window-rate", fixed(s.rate_per_s, 2) + " /s") +
       cell("predicted-mean", ms(s.predicted_mean_ms)) +
       cell("observed-mean", ms(s.observed_mean_ms)) +
       cell("predicted-p99", ms(s.predicted_p99_ms)) + cell("observed-p99", ms(s.observed_p99_ms)) +
       cell("queued", std::to_string(s.live.queued)) +
       cell("in-flight", std::to_string(s.live.in_flight)) + "</tr></table>";
  p += "<p class=\"note\">arrival rate: the scheduler's estimate; ended: requests that ended per "
       "second over the window; predicted: the queue model for the running configuration at that "
       "rate (n/a without a profile or table entry for it), its p99 from the planner's tail "
       "approximation (n/a without a profile); observed p99 over " +
       count(s.window_answered) + " answers.</p>\n";
  p += "<h2>Requests since start</h2><table><tr><th>received</th><th>answered</th>"
       "<th>rejected</th><th>timed out</th><th>failed</th></tr><tr>" +
       cell("received", count(s.received)) + cell("answered", count(s.answered)) +
       cell("rejected", count(s.rejected)) + cell("timed-out", count(s.timed_out)) +
       cell("failed", count(s.failed)) + "</tr></table>\n";
  p += "<h2>Last " + std::to_string(static_cast<int>(s.history.size() * s.bin_s / 60)) +
       " minutes</h2>" + sparkline(s) + "<p class=\"note\">red: observed mean latency per " +
       fixed(s.bin_s, 0) +
       " s; dashed blue: predicted mean now; bars: requests ended per second.</p>\n";
  p += "<h2>Recent switches</h2>" + switches_table(s) + "\n";
  p += "<h2>Recalibrations (<span id=\"recalibrations\">" + count(s.recalibrations_total) +
       "</span>)</h2>" + recalibrations_table(s) + "\n";
  return p + "</body></html>\n";
}

}  // namespace serf::serve
