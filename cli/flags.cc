#include "cli/flags.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <sstream>

#include "serf/core/statistics.h"
#include "serf/io/profile_io.h"

namespace serf::cli {

// ---- validators --------------------------------------------------------------------------------

namespace {

// `v`, all of it, as a decimal integer that fits T: digits after an optional '-', no leading
// zero. CLI11 converts a checked value again by itself, as C does (strtoll, base 0): "010" passed
// a decimal check as 10 and ran as 8 (octal), so a leading zero is refused, not read two ways.
template <typename T>
bool decimal_integer(const std::string& v, T* x) {
  const char* begin = v.data();
  const char* end = begin + v.size();
  const char* digits = begin + (v.size() > 0 && v[0] == '-' ? 1 : 0);
  if (end - digits > 1 && *digits == '0') return false;
  const auto r = std::from_chars(begin, end, *x);
  return !v.empty() && r.ec == std::errc() && r.ptr == end;
}

}  // namespace

bool parse_finite(const std::string& text, double* value) {
  const char* end = text.data() + text.size();
  const auto r = std::from_chars(text.data(), end, *value);
  return !text.empty() && r.ec == std::errc() && r.ptr == end && std::isfinite(*value);
}

CLI::Validator unsigned_integer() {
  return CLI::Validator(
      [](std::string& v) {
        uint64_t x = 0;
        if (!decimal_integer(v, &x)) {
          return "must be an integer in [0, " +
                 std::to_string(std::numeric_limits<uint64_t>::max()) + "] (got " + v + ")";
        }
        return std::string();
      },
      "UINT64");
}

CLI::Validator finite_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) {
        double x = 0;
        if (!parse_finite(v, &x)) {
          if (!CLI::detail::lexical_cast(v, x)) return "must be a number (got " + v + ")";
          // CLI11's own reading (strtold) took " 1" and "0x10" (16).
          if (std::isfinite(x))
            return "must be a decimal number, nothing around it (got " + v + ")";
        }
        if (!std::isfinite(x) || x < lo || x > hi) {
          return v + " must be a finite number in [" + format_g(lo) + ", " + format_g(hi) + "]";
        }
        return std::string();
      },
      "FLOAT in [" + format_g(lo) + " - " + format_g(hi) + "]");
}

CLI::Validator at_least(int lo) {
  return CLI::Validator(
      [lo](std::string& v) {
        int x = 0;
        if (!decimal_integer(v, &x)) {
          return "must be an integer >= " + std::to_string(lo) + " (got " + v + ")";
        }
        if (x < lo) return "must be >= " + std::to_string(lo) + " (got " + v + ")";
        return std::string();
      },
      "INT >= " + std::to_string(lo));
}

CLI::Validator int_range(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) {
        int64_t x = 0;
        if (!decimal_integer(v, &x) || x < lo || x > hi) {
          return "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                 "] (got " + v + ")";
        }
        return std::string();
      },
      "INT in [" + std::to_string(lo) + " - " + std::to_string(hi) + "]");
}

CLI::Validator positive_finite() {
  return CLI::Validator(
      [](std::string& v) {
        double x = 0;
        // A subnormal value is no rate or time to compute with: 5e-324 requests/s over 4 units
        // is 0 per unit, and predict called that load unstable.
        if (!parse_finite(v, &x) || !(x > 0)) {
          return "must be a finite number > 0 (got " + v + ")";
        }
        if (x < std::numeric_limits<double>::min()) {
          return "must be a finite number of at least " +
                 format_g(std::numeric_limits<double>::min()) + " (got " + v + ")";
        }
        return std::string();
      },
      "FLOAT > 0");
}

CLI::Validator non_empty_path() {
  return CLI::Validator(
      [](std::string& v) {
        return v.empty() ? std::string("the path is empty; give a file name") : std::string();
      },
      "FILE");
}

CLI::Validator only_with(const CLI::App* sub, std::vector<std::string> others,
                         const std::string& why) {
  return CLI::Validator(
      // CLI11 validates after the whole line is parsed: the others' counts are final here.
      [sub, others = std::move(others), why](std::string&) {
        std::string names;
        for (const std::string& other : others) {
          if (sub->count(other) > 0) return std::string();
          names += (names.empty() ? "" : " or ") + other;
        }
        return "only with " + names + why;
      },
      "");
}

// ---- the configuration -------------------------------------------------------------------------

CLI::Option* add_intra(CLI::App* sub, int* intra, bool alias_threads, const std::string& help) {
  return sub->add_option(alias_threads ? "--intra,--threads" : "--intra", *intra, help)
      ->check(int_range(1, kMaxCoresPerNode));
}

void ConfigurationFlags::add(CLI::App* sub) {
  sub->add_option("--service", config.service,
                  "c: at most c requests served at once per unit (count)")
      ->check(at_least(1))
      ->required();
  sub->add_option("--inter", config.inter, "K: nodes that compute each request together (count)")
      ->check(at_least(1))
      ->required();
  add_intra(sub, &config.intra, false, "T: threads per node for each request (count)")->required();
  add_batch(sub, &config.batch,
            "b: a free slot takes up to b waiting requests as one batch (requests; default 1; "
            "the profile needs tuples (i, K, T, 1) and (i, K, T, b))");
}

CLI::Option* add_batch(CLI::App* sub, int* batch, const std::string& help) {
  return sub->add_option("--batch", *batch, help)
      ->check(int_range(1, kMaxBatch))
      ->capture_default_str();
}

StatusOr<Configuration> parse_configuration(const std::string& text, const std::string& flag) {
  // Each field all digits: sscanf("%d,%d,%d") took "1,1,1x" and "1,1,1 " as 1,1,1.
  std::vector<int> v;
  std::stringstream fields(text + ",");  // getline drops a last empty field: "1,1,1," has one
  std::string field;
  bool whole = true;
  for (int x = 0; std::getline(fields, field, ','); v.push_back(x))
    whole = whole && decimal_integer(field, &x);
  whole = whole && (v.size() == 3 || v.size() == 4);
  const Configuration c =
      whole ? Configuration{v[0], v[1], v[2], v.size() == 4 ? v[3] : 1} : Configuration{0, 0, 0, 0};
  if (c.service < 1 || c.inter < 1 || c.intra < 1 || c.batch < 1 || c.batch > kMaxBatch) {
    return InvalidArgument(
        flag + ": expected c,K,T or c,K,T,b (integers >= 1, b <= " + std::to_string(kMaxBatch) +
        ", e.g. 2,1,4 or 2,1,4,8), got \"" + text + "\"");
  }
  return c;
}

Status check_configuration(const Configuration& config, const ClusterShape& shape,
                           const std::string& flag) {
  return validate(config, shape).with_context(flag);
}

CLI::Option* add_nodes(CLI::App* sub, int* nodes, const std::string& help) {
  return sub->add_option("--nodes", *nodes, help)->check(int_range(1, kMaxNodes));
}

CLI::Option* add_queue(CLI::App* sub, std::string* queue, bool allow_all) {
  return sub->add_option("--queue", *queue,
                         "queueing model: " + queue_kind_names() + (allow_all ? ", or all" : "") +
                             " (default " + to_string(kDefaultQueue) +
                             "; md-interf is the paper's)");
}

CLI::Option* add_json(CLI::App* sub, bool* json) {
  return sub->add_flag("--json", *json, "print one JSON object instead of text");
}

// ---- files -------------------------------------------------------------------------------------

void ProfileFlag::add(CLI::App* sub, const std::string& help) {
  sub->add_option(
         "--profile", path,
         help.empty() ? "profile of the model's parallelism tuples (serf-profile/1 JSON)" : help)
      ->check(non_empty_path())
      ->required();
  sub->add_flag("--allow-incomplete", allow_incomplete,
                "use a --profile marked incomplete (a profiling run stopped early, e.g. by a dead "
                "node): its results may differ from the full profile's");
}

StatusOr<Profile> ProfileFlag::load() const {
  SERF_ASSIGN_OR_RETURN(Profile p, io::load_profile(path));
  if (p.incomplete && !allow_incomplete) {
    return InvalidArgument(path + ": the profile is incomplete (" +
                           (p.note.empty() ? std::string("marked so") : p.note) + "; " +
                           std::to_string(p.tuples.size()) +
                           " tuples), so its answers may differ from the full profile's; "
                           "profile again, or give --allow-incomplete to use it anyway");
  }
  return p;
}

Status check_output_path(const std::string& flag, const std::string& out) {
  if (out.empty()) return InvalidArgument(flag + ": the path is empty; give a file name");
  const size_t slash = out.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : out.substr(0, slash);
  if (access(dir.c_str(), W_OK) != 0) {
    // Why, not a guess: a read-only file system (root may write anywhere else) is not a
    // missing folder.
    const int err = errno;
    return InvalidArgument(flag + ": cannot write " + out + ": directory " + dir +
                           (err == ENOENT || err == ENOTDIR ? " does not exist"
                            : err == EROFS                  ? " is on a read-only file system"
                            : err == EACCES                 ? " is not writable (permission denied)"
                                            : std::string(": ") + std::strerror(err)));
  }
  struct stat st;
  if (stat(out.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return InvalidArgument(flag + ": " + out + " is a directory; give a file name");
  }
  if (stat(out.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return InvalidArgument(flag + ": " + out + " is not a regular file (a CSV goes beside it as " +
                           out + ".csv; leave the flag out to write nothing)");
  }
  return Status::Ok();
}

Status check_not_input(const std::string& out_flag, const std::string& out,
                       const std::string& in_flag, const std::string& in) {
  struct stat o, i;
  if (out.empty() || in.empty() || stat(out.c_str(), &o) != 0 || stat(in.c_str(), &i) != 0) {
    return Status::Ok();  // a file that does not exist yet cannot be the input
  }
  if (o.st_dev == i.st_dev && o.st_ino == i.st_ino) {
    return InvalidArgument(out_flag + " " + out + " is the same file as " + in_flag + " " + in +
                           ": writing it would destroy the input; give another file");
  }
  return Status::Ok();
}

Status check_output_path(const std::string& flag, const std::string& out,
                         const std::vector<InputFile>& inputs) {
  SERF_RETURN_IF_ERROR(check_output_path(flag, out));
  for (const InputFile& in : inputs)
    SERF_RETURN_IF_ERROR(check_not_input(flag, out, in.flag, in.path));
  return Status::Ok();
}

Status check_distinct_outputs(const std::string& flag, const std::string& out,
                              const std::vector<InputFile>& outputs) {
  std::error_code ec;
  const std::filesystem::path mine = std::filesystem::weakly_canonical(out, ec);
  const auto same = std::find_if(outputs.begin(), outputs.end(), [&](const InputFile& other) {
    std::error_code other_ec;
    return !ec && !other.path.empty() &&
           std::filesystem::weakly_canonical(other.path, other_ec) == mine && !other_ec;
  });
  if (same == outputs.end()) return Status::Ok();
  return InvalidArgument(flag + " " + out + " is the same file as " + same->flag + " " +
                         same->path + ": one would replace the other; give another file");
}

CLI::Option* add_output(CLI::App* sub, const std::string& name, std::string* path,
                        const std::string& help, bool required) {
  CLI::Option* opt = sub->add_option(name, *path, help)->check(non_empty_path());
  if (required) opt->required();
  return opt;
}

CLI::Option* add_seed(CLI::App* sub, uint64_t* seed, const std::string& help) {
  return sub->add_option("--seed", *seed, help)->check(unsigned_integer());
}

// ---- arrivals ----------------------------------------------------------------------------------

namespace {
constexpr double kMaxArrivalScv = 1e4;  // as the service SCV (kMaxServiceScv)
}

void PrecisionFlags::add(CLI::App* sub, const std::string& what) {
  precision_opt = sub->add_option("--precision", precision,
                                  "run until the mean latency's 95 % CI half-width is within this "
                                  "fraction of the mean (e.g. 0.03), the warm-up cut by MSER-5 "
                                  "and the p99 bounded; " +
                                      what)
                      ->check(finite_range(1e-4, 0.5));
  sub->add_option("--min-duration", target.min_duration_s,
                  "with --precision: a point runs at least this long to be VALID, seconds "
                  "(default 10)")
      ->check(finite_range(1e-3, 86400))
      ->needs(precision_opt);
  sub->add_option("--min-requests", target.min_requests,
                  "with --precision: answers after the warm-up cut a VALID point needs (default "
                  "100)")
      ->check(int_range(1, 100000000))
      ->needs(precision_opt);
  sub->add_option("--percentile", target.percentile,
                  "with --precision: the latency percentile whose 95 % order-statistic CI must be "
                  "bounded (LoadGen's early stopping; default 99: needs >= 368 answers)")
      ->check(finite_range(50, 99.99))
      ->needs(precision_opt);
}

void ArrivalFlags::add(CLI::App* sub, const std::string& when) {
  kind_opt = sub->add_option(
      "--arrivals", kind,
      when +
          "arrival process: poisson (default), gamma (bursty, needs --arrival-scv) or "
          "deterministic");
  scv_opt = sub->add_option("--arrival-scv", scv,
                            when +
                                "squared coefficient of variation of the inter-arrival gaps "
                                "(dimensionless; poisson 1, deterministic 0, gamma any > 0)")
                ->check(finite_range(0, kMaxArrivalScv));
}

void ArrivalFlags::add_scv_only(CLI::App* sub) {
  scv_opt = sub->add_option("--arrival-scv", scv,
                            "squared coefficient of variation of the inter-arrival gaps of the "
                            "cluster-wide stream (dimensionless; 1 Poisson, the default; > 1 "
                            "bursty; Allen-Cunneen correction of the wait)")
                ->check(finite_range(0, kMaxArrivalScv));
}

StatusOr<ArrivalFlags::Resolved> ArrivalFlags::resolve() const {
  auto parsed = parse_arrival_kind(kind);
  if (!parsed.ok()) return parsed.status().with_context("--arrivals " + kind);
  const bool given = scv_opt != nullptr && scv_opt->count() > 0;
  Resolved r{*parsed, 1.0};
  switch (r.kind) {
    case ArrivalKind::kPoisson:
      if (given && scv != 1.0) {
        return InvalidArgument("--arrival-scv " + format_g(scv) +
                               ": poisson arrivals have SCV 1; use --arrivals gamma for another");
      }
      return r;
    case ArrivalKind::kDeterministic:
      if (given && scv != 0.0) {
        return InvalidArgument("--arrival-scv " + format_g(scv) +
                               ": deterministic arrivals have SCV 0; use --arrivals gamma for "
                               "another");
      }
      r.scv = 0;
      return r;
    case ArrivalKind::kGamma:
      if (!given) {
        return InvalidArgument("--arrivals gamma needs --arrival-scv X (X > 0; 1 is Poisson's)");
      }
      if (!(scv > 0)) {
        return InvalidArgument("--arrival-scv " + format_g(scv) +
                               ": gamma arrivals need an SCV > 0 (deterministic arrivals have 0)");
      }
      r.scv = scv;
      return r;
  }
  return r;
}

StatusOr<std::vector<RateChange>> parse_load_steps(const std::string& text) {
  std::vector<RateChange> out;
  std::stringstream ss(text);
  std::string item;
  const std::string fix =
      "--load: expected \"SECONDS:RATE;...\" from 0 s, ascending, rates >= 0 (requests/s), got \"" +
      text + "\"";
  while (std::getline(ss, item, ';')) {
    RateChange step;
    const size_t colon = item.find(':');
    if (colon == std::string::npos || !parse_finite(item.substr(0, colon), &step.from_s) ||
        !parse_finite(item.substr(colon + 1), &step.rate_per_s) || !(step.rate_per_s >= 0) ||
        (step.rate_per_s > 0 && step.rate_per_s < std::numeric_limits<double>::min()) ||
        !(step.from_s >= 0) || (!out.empty() && !(step.from_s > out.back().from_s)) ||
        (out.empty() && step.from_s != 0)) {
      return InvalidArgument(fix);
    }
    out.push_back(step);
  }
  if (out.empty()) return InvalidArgument(fix);
  // Nothing would ever arrive (serve's generator refused it only after the start, unnamed).
  if (std::all_of(out.begin(), out.end(), [](const RateChange& s) { return s.rate_per_s == 0; }))
    return InvalidArgument("--load \"" + text + "\": every rate is 0; give one step a rate > 0");
  return out;
}

// ---- tail objective ----------------------------------------------------------------------------

const Objective* TailObjective::get() const {
  if (fallback_ != nullptr) return fallback_.get();
  return analytic_.get();
}

std::string TailObjective::note() const {
  if (fallback_ == nullptr || fallback_->simulations() == 0) return "";
  return "note: " + std::to_string(fallback_->simulations()) +
         " evaluation(s) were simulated where the analytic approximation is known to be poor "
         "(docs/simulation.md; --tail-method model to skip)\n";
}

void TailFlags::add_objective(CLI::App* sub) {
  objective_opt = sub->add_option(
      "--objective", objective,
      "what the best configuration minimises: mean (the paper's mean latency, default) or a "
      "latency percentile pNN in ms, 0.001 <= NN < 100, e.g. p99 (tail approximation, "
      "docs/simulation.md)");
}

void TailFlags::add_percentile(CLI::App* sub) {
  percentile_opt = sub->add_option("--percentile", percentile,
                                   "hold the SLO on this latency percentile (percent, 0.001 <= NN "
                                   "< 100, e.g. 99) instead of "
                                   "the mean (tail approximation, docs/simulation.md)")
                       ->check(finite_range(kMinPercentile, 100));
}

void TailFlags::add_arrival_scv(CLI::App* sub) {
  arrivals.add_scv_only(sub);
  tail_method_opt =
      sub->add_option(
             "--tail-method", tail_method,
             "auto: simulate configurations where the tail/bursty approximation is known to "
             "be poor (docs/simulation.md); model: the analytic approximation only")
          ->capture_default_str();
}

StatusOr<double> TailFlags::requested_percentile() const {
  double p = 0;
  if (objective_opt != nullptr && objective != "mean") {
    // strtod took "p 99" and "p0x10" (p16).
    if (objective.empty() || objective[0] != 'p' || !parse_finite(objective.substr(1), &p) ||
        !(p >= kMinPercentile && p < 100)) {
      return InvalidArgument("--objective " + objective +
                             ": must be mean or pNN with 0.001 <= NN < 100, e.g. p99");
    }
  }
  if (percentile_opt != nullptr && percentile_opt->count() > 0) {
    if (!(percentile >= kMinPercentile && percentile < 100)) {
      return InvalidArgument("--percentile " + format_g(percentile) +
                             ": must be in [0.001, 100) percent, e.g. 99");
    }
    p = percentile;
  }
  return p;
}

StatusOr<TailObjective> TailFlags::make(const Profile& profile, int nodes, int max_batch) const {
  if (tail_method != "auto" && tail_method != "model") {
    return InvalidArgument("--tail-method " + tail_method + ": must be auto or model");
  }
  LatencyObjectiveOptions o;
  o.arrival_scv = arrivals.scv;
  o.nodes = nodes;
  SERF_ASSIGN_OR_RETURN(o.percentile, requested_percentile());
  TailObjective out;
  // The mean under Poisson arrivals is exact without a batch: a --tail-method given for it would
  // be silently ignored.
  if (o.percentile == 0 && o.arrival_scv == 1.0 && max_batch == 1 && tail_method_opt != nullptr &&
      tail_method_opt->count() > 0) {
    return InvalidArgument("--tail-method " + tail_method +
                           ": only with a percentile (--percentile NN or --objective pNN), an "
                           "--arrival-scv other than 1 or a --batch > 1 (the mean under Poisson "
                           "arrivals needs no approximation)");
  }
  if (max_batch > 1 && (o.percentile != 0 || o.arrival_scv != 1.0)) {
    return InvalidArgument(
        "--batch " + std::to_string(max_batch) +
        ": with batches only the mean latency under Poisson arrivals is modelled; drop "
        "--percentile/--objective/--arrival-scv or use --batch 1");
  }
  if (o.percentile == 0 && o.arrival_scv == 1.0 && (max_batch == 1 || tail_method != "auto")) {
    return out;
  }
  SERF_ASSIGN_OR_RETURN(out.analytic_, LatencyObjective::Create(profile, o));
  if (tail_method == "auto") {
    out.fallback_ = std::make_unique<sim::SimulationFallbackObjective>(*out.analytic_);
  }
  return out;
}

std::string TailFlags::what() const {
  auto p = requested_percentile();
  std::string out = p.ok() && *p > 0 ? percentile_name(*p) + " latency" : "mean latency";
  if (arrivals.scv != 1.0) out += " (arrival SCV " + format_g(arrivals.scv) + ")";
  return out;
}

io::ObjectiveLabel TailFlags::label(const TailObjective& objective) const {
  io::ObjectiveLabel l;
  l.what = what();
  l.arrival_scv = arrivals.scv;
  if (!objective) return l;
  l.active = true;
  l.name = objective->name();
  l.percentile = objective->options().percentile;
  l.simulations = objective.simulations();
  l.note = objective.note();
  return l;
}

}  // namespace serf::cli
