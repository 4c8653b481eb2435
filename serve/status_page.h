#pragma once
// GET / on the HTTP front end: a self-contained HTML page an operator leaves open (no scripts,
// fonts or links to fetch; inline CSS and SVG). It refreshes itself every few seconds.

#include <string>

#include "serve/metrics.h"

namespace serf::serve {

inline constexpr int kStatusRefreshS = 5;

// & < > " ' as entities: the model name comes from a file or a flag.
std::string html_escape(const std::string& text);

// The page for one snapshot. Values the tests read carry ids: config-c, config-K, config-T,
// config-b, received, answered, rejected, timed-out, failed, switches, recalibrations.
std::string status_page_html(const StatusSnapshot& s);

}  // namespace serf::serve
