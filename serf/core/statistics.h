#pragma once
// One statistics module: every command and report uses these definitions, so two outputs never
// compute "the p99" or print "a rate" differently. Pure (no I/O).

#include <cstdint>
#include <string>

namespace serf {

// ---- number formatters: every number a person reads goes through one of these ---------------

// printf-style, one double: format_number("%.3f", x).
std::string format_number(const char* printf_format, double x);
// "%g": values quoted back in error lines ("--rate -3: ...").
std::string format_g(double x);
// The shortest text that reads back to the same double (files: CSV, tables).
std::string format_shortest(double x);
// "12.3 ms".
std::string format_ms(double ms);
// A rate for people: 4 significant digits, never an exponent ("0.5", "12.35", "1234").
std::string format_rate(double per_s);
// format_rate + " requests/s".
std::string format_rate_text(double per_s);
// A fraction as a percentage with one decimal: 0.1234 -> "12.3%".
std::string format_percent(double fraction);
// Thousands separated: 28559232 -> "28,559,232".
std::string format_count(int64_t n);

}  // namespace serf
