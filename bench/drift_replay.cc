// drift_replay: a recorded serving run's answers replayed through the drift rule (DriftTracker)
// with the rule's parameters as flags, writing what the controller would have recalibrated as a
// run file that scripts/plot_drift.py reads (docs/calibration.md, "Choosing the rule's
// parameters"). A replay is exact for a run that served one configuration: the answers do not
// depend on the model then (a recalibration that changes the table would change what runs next).
//
//   drift_replay --profile P.json --journal RUN.json.csv --out REPLAY.json [rule flags]
//
// REPLAY.json is serf-run/1 with "recalibrations" only; REPLAY.json.csv is made a symbolic link to
// the journal, so that `plot_drift.py --run REPLAY.json` finds both.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "serf/io/profile_io.h"
#include "serve/calibration.h"

namespace {

struct Answer {
  double done_s = 0;
  double service_ms = 0;  // dispatch to answer: the slot's occupancy
  serf::ParallelismTuple tuple;
};

int fail(const std::string& message) {
  std::cerr << "drift_replay: " << message << "\n";
  return 2;
}

// The journal's answered requests, one per batch (its rows share the dispatch), in answer order.
bool read_journal(const std::string& path, std::vector<Answer>* out, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = path + ": cannot open file (" + std::strerror(errno) + ")";
    return false;
  }
  std::string line;
  std::getline(in, line);
  std::map<std::string, size_t> column;
  {
    std::stringstream header(line);
    std::string name;
    for (size_t k = 0; std::getline(header, name, ','); ++k) column[name] = k;
  }
  for (const char* need : {"dispatch_s", "done_s", "unit", "slot", "running", "inter", "intra",
                           "served_batch", "answered"}) {
    if (!column.count(need)) {
      *error = path + ": no column '" + need + "' (not a serf serve journal)";
      return false;
    }
  }
  std::set<std::tuple<std::string, std::string, std::string>> seen;  // (unit, slot, dispatch)
  for (int row = 2; std::getline(in, line); ++row) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    if (f.size() < column.size()) {
      *error = path + ": row " + std::to_string(row) + " has " + std::to_string(f.size()) +
               " fields, the header " + std::to_string(column.size());
      return false;
    }
    auto at = [&](const char* name) { return f[column[name]]; };
    if (at("answered") != "1") continue;
    if (!seen.insert({at("unit"), at("slot"), at("dispatch_s")}).second) continue;
    try {
      Answer a;
      a.done_s = std::stod(at("done_s"));
      a.service_ms = 1e3 * (a.done_s - std::stod(at("dispatch_s")));
      a.tuple = {std::stoi(at("running")), std::stoi(at("inter")), std::stoi(at("intra")),
                 std::stoi(at("served_batch"))};
      out->push_back(a);
    } catch (const std::exception&) {
      *error = path + ": row " + std::to_string(row) + " has a field that is not a number";
      return false;
    }
  }
  std::stable_sort(out->begin(), out->end(),
                   [](const Answer& a, const Answer& b) { return a.done_s < b.done_s; });
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Replay a serve journal through the drift rule (docs/calibration.md)"};
  std::string profile_path, journal_path, out_path;
  serf::serve::DriftRule rule;
  app.add_option("--profile", profile_path, "the profile the run served with")->required();
  app.add_option("--journal", journal_path, "the run's journal (serf serve --out FILE: FILE.csv)")
      ->required();
  app.add_option("--out", out_path, "the replay's run file (serf-run/1, recalibrations only)");
  // The rule's parameters (serve/calibration.h, DriftRule), each with its valid range.
  auto count = [&](const char* flag, int* v, const char* help, int lo, int hi) {
    app.add_option(flag, *v, help)->check(CLI::Range(lo, hi));
  };
  auto real = [&](const char* flag, double* v, const char* help, double lo, double hi) {
    app.add_option(flag, *v, help)->check(CLI::Range(lo, hi));
  };
  count("--batch", &rule.batch, "answers per batch mean", 1, 100000);
  count("--min-batches", &rule.min_batches, "batches before an alarm", 1, 100000);
  count("--min-samples", &rule.min_samples, "fresh answers a confirmation needs", 1, 1000000);
  real("--k", &rule.k, "CUSUM allowance (in s)", 0, 100);
  real("--h", &rule.h, "CUSUM threshold (in s)", 0, 1000);
  real("--clip", &rule.clip, "cap of one batch's standardized step", 0, 1e9);
  real("--min-sd", &rule.min_sd_fraction, "floor of s, relative to the mean", 0, 10);
  real("--max-sd", &rule.max_sd_fraction, "cap of s, relative to the mean", 0, 10);
  real("--confirm-s", &rule.confirm_s, "confirmation's length", 0, 3600);
  real("--max-confirm-s", &rule.max_confirm_s, "... prolonged at most to", 0, 3600);
  real("--precision", &rule.precision, "... until the new mean's CI is within", 0, 1e9);
  real("--confirm-fraction", &rule.confirm_fraction, "batches that must agree", 0, 1);
  real("--min-change", &rule.min_change, "smallest change taken (materiality)", 0, 10);
  real("--hold-off-s", &rule.hold_off_s, "no alarm this long after a recalibration", 0, 3600);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    return fail(e.what());
  }
  auto profile = serf::io::load_profile(profile_path);
  if (!profile.ok()) return fail(profile.status().message());
  std::vector<Answer> answers;
  std::string error;
  if (!read_journal(journal_path, &answers, &error)) return fail(error);
  if (answers.empty()) return fail(journal_path + ": no answered request");

  serf::serve::DriftTracker tracker(*profile, rule);
  std::vector<serf::serve::Recalibration> log;
  for (const Answer& a : answers) {
    auto rec = tracker.observe(a.tuple, a.service_ms, a.done_s);
    if (!rec) continue;
    for (const serf::TupleStats& s : tracker.profile().tuples)
      rec->model_mean_ms.emplace_back(s.tuple, s.mean_ms);
    std::printf("%8.1f s (%d,%d,%d,%d): %.3f -> %.3f ms (%d answers)\n", rec->at_s,
                rec->tuple.service, rec->tuple.inter, rec->tuple.intra, rec->tuple.batch,
                rec->old_mean_ms, rec->new_mean_ms, rec->samples);
    log.push_back(*rec);
  }
  std::printf("answers %zu, alarms %lld, recalibrations %zu\n", answers.size(),
              static_cast<long long>(tracker.alarms()), log.size());
  if (out_path.empty()) return 0;
  nlohmann::json doc = {{"format", "serf-run/1"},
                        {"model", profile->model},
                        {"replay_of", journal_path},
                        {"recalibrations", serf::serve::recalibrations_json(log)}};
  std::ofstream out(out_path);
  out << doc.dump(1) << "\n";
  if (!out) return fail(out_path + ": cannot write file");
  const std::string link = out_path + ".csv";
  ::unlink(link.c_str());
  char absolute[4096];
  const std::string target =
      journal_path[0] == '/' || ::realpath(journal_path.c_str(), absolute) == nullptr
          ? journal_path
          : std::string(absolute);
  if (::symlink(target.c_str(), link.c_str()) != 0)
    return fail(link + ": cannot link the journal (" + std::strerror(errno) + ")");
  return 0;
}
