#pragma once
// The flags several subcommands share, each declared and checked here once: the configuration
// (--service, --inter, --intra), the profile file, the arrival process (--arrivals,
// --arrival-scv), the tail objective (--objective, --percentile, --tail-method), the seed and the
// output paths. A subcommand adds the ones it takes; two commands never read the same flag
// differently. Errors name the flag, the value and what would be accepted (exit 2).

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "profiler/precision.h"
#include "serf/core/arrivals.h"
#include "serf/core/cluster_limits.h"
#include "serf/core/configuration.h"
#include "serf/core/profile.h"
#include "serf/core/queue_model.h"
#include "serf/core/status.h"
#include "serf/core/tail_objective.h"
#include "serf/io/queue_report.h"
#include "serf/sim/fallback_objective.h"

namespace serf::cli {

// `text`, all of it, as a finite decimal number ("1.5", "2e3"); no space, sign '+', hex, unit or
// other trailing text.
bool parse_finite(const std::string& text, double* value);

// ---- validators (CLI11 runs them at parse time; the message follows "--flag: ") -------------

// An unsigned 64-bit integer written in digits: "-1", "1e30" and 2^64 are refused, not wrapped
// or clamped.
CLI::Validator unsigned_integer();
// A finite number in [lo, hi]. CLI::Range lets "nan" through (every comparison with NaN is false).
CLI::Validator finite_range(double lo, double hi);
// An integer >= lo ("must be >= 1 (got 0)").
CLI::Validator at_least(int lo);
// An integer in [lo, hi] (decimal: CLI::Range passed "0200" and CLI11 then read it as octal 128).
CLI::Validator int_range(int64_t lo, int64_t hi);
// A finite number > 0 (rates, SLOs, durations).
CLI::Validator positive_finite();
// A path that is not "" (an empty --out would name no file).
CLI::Validator non_empty_path();
// Given on the command line of `sub` only together with one of `others` (flag names): alone the
// flag would be silently ignored ("--requests: only with --rate or --load ..."). For one other
// flag, CLI11's Option::needs says the same.
CLI::Validator only_with(const CLI::App* sub, std::vector<std::string> others,
                         const std::string& why);

// ---- the configuration (c, K, T) -----------------------------------------------------------

// --service, --inter, --intra and --batch of a command that runs or predicts one configuration. The
// intra knob is --intra everywhere (--threads is its old spelling, kept as an alias where it was
// used).
struct ConfigurationFlags {
  Configuration config{0, 0, 0};
  void add(CLI::App* sub);
};
// --batch B (requests per batch, in [1, kMaxBatch], default 1) with the command's help.
CLI::Option* add_batch(CLI::App* sub, int* batch, const std::string& help);
// The most cores a node may have: kMaxCoresPerNode (serf/core/cluster_limits.h).
// --intra (T, threads per node, in [1, kMaxCoresPerNode]); `alias_threads` also accepts --threads.
CLI::Option* add_intra(CLI::App* sub, int* intra, bool alias_threads, const std::string& help);

// "c,K,T" (serve --config, --schedule entries): three integers >= 1, nothing else.
StatusOr<Configuration> parse_configuration(const std::string& text, const std::string& flag);
// validate() (serf/core/configuration.h) with the flag named: "--config: configuration ...".
Status check_configuration(const Configuration& config, const ClusterShape& shape,
                           const std::string& flag);

// --nodes N: the cluster size, in [1, kMaxNodes] (serf/core/cluster_limits.h); commands that
// default to the profile's hardware.nodes leave it 0 when it is not given.
CLI::Option* add_nodes(CLI::App* sub, int* nodes, const std::string& help);
// --queue NAME: one of queue_kind_names() (validate also takes "all").
CLI::Option* add_queue(CLI::App* sub, std::string* queue, bool allow_all);
// --json: one JSON object on stdout instead of text.
CLI::Option* add_json(CLI::App* sub, bool* json);

// ---- files -------------------------------------------------------------------------------------

// --profile FILE (serf-profile/1).
// A profile marked incomplete (a run that a dead node stopped) is refused unless
// --allow-incomplete is given.
struct ProfileFlag {
  std::string path;
  bool allow_incomplete = false;
  void add(CLI::App* sub, const std::string& help = "");
  StatusOr<Profile> load() const;
};

// InvalidArgument naming `flag` unless `out` can be written before the run: its directory exists
// and is writable, and `out` is not an existing non-regular file (`/dev/null` would put the CSV
// written beside it, FILE.csv, into /dev).
Status check_output_path(const std::string& flag, const std::string& out);
// InvalidArgument when `out` is the same file as the input `in` (same device and inode, so also
// through a symlink or a hard link): writing it would destroy the input before it is read.
Status check_not_input(const std::string& out_flag, const std::string& out,
                       const std::string& in_flag, const std::string& in);
// An input file of a command, named by its flag (or "the ONNX file" for a positional one); an
// empty path is a flag not given.
struct InputFile {
  std::string flag;
  std::string path;
};
// check_output_path, then check_not_input against each of `inputs`: run before anything is read
// or written, so an output named like an input is refused before the run.
Status check_output_path(const std::string& flag, const std::string& out,
                         const std::vector<InputFile>& inputs);
// InvalidArgument when `out` names the same file as one of the command's other `outputs` (which
// need not exist yet: compared by path, symlinks of existing parts resolved): the later write
// would replace the earlier one (serve --out run.png --plot run.png lost the report).
Status check_distinct_outputs(const std::string& flag, const std::string& out,
                              const std::vector<InputFile>& outputs);
// --out FILE (or another name): not empty; `required` makes CLI11 insist on it.
CLI::Option* add_output(CLI::App* sub, const std::string& name, std::string* path,
                        const std::string& help, bool required);

// --seed N: an unsigned 64-bit integer (unsigned_integer()).
CLI::Option* add_seed(CLI::App* sub, uint64_t* seed, const std::string& help);

// ---- arrivals ----------------------------------------------------------------------------------

// --arrivals KIND and --arrival-scv X. Commands that generate arrivals (simulate, serve, profile
// --exhaustive) take both; the queue commands (predict, plan, size, capacity) only the SCV of the
// cluster-wide stream, which their analytic models correct the wait by (default 1, Poisson).
struct ArrivalFlags {
  std::string kind = "poisson";
  double scv = 1.0;
  CLI::Option* kind_opt = nullptr;
  CLI::Option* scv_opt = nullptr;

  // `when` prefixes both help texts, e.g. "with --exhaustive: " (or "").
  void add(CLI::App* sub, const std::string& when);
  void add_scv_only(CLI::App* sub);
  // The process the flags ask for: poisson (SCV 1), deterministic (SCV 0), or gamma with the
  // --arrival-scv given (> 0). An SCV that contradicts the kind is an error, not ignored.
  struct Resolved {
    ArrivalKind kind = ArrivalKind::kPoisson;
    double scv = 1.0;
  };
  StatusOr<Resolved> resolve() const;
};

// ---- precision-driven runs ----------------------------------------------------------------------

// --precision P and the stopping rule's companions (profiler/precision.h), one rule for every
// command that runs points until precise (load, profile --exhaustive): P in [1e-4, 0.5];
// --min-duration > 0 s, --min-requests >= 1 answers and --percentile in [50, 99.99], each only
// with --precision (alone it would be silently ignored).
struct PrecisionFlags {
  double precision = 0;              // 0: not given (the command's fixed-count run)
  profiler::PrecisionTarget target;  // target.precision is set from `precision` by target_of()
  CLI::Option* precision_opt = nullptr;

  // `what` ends --precision's help: what the command does with it.
  void add(CLI::App* sub, const std::string& what);
  // A flag that only applies with --precision (a command's own caps).
  CLI::Option* needs_precision(CLI::Option* opt) const { return opt->needs(precision_opt); }
  bool on() const { return precision > 0; }
  profiler::PrecisionTarget target_of() const {
    profiler::PrecisionTarget t = target;
    t.precision = precision;
    return t;
  }
};

// --load "SECONDS:RATE;...": a load that changes over time (serve, load). Steps (from_s,
// rate_per_s) from 0 s, strictly ascending, rates finite and >= 0 requests/s; the last lasts until
// the run ends.
struct RateChange {
  double from_s = 0;
  double rate_per_s = 0;
};
StatusOr<std::vector<RateChange>> parse_load_steps(const std::string& text);

// ---- tail objective ----------------------------------------------------------------------------

// The objective the flags ask for: the analytic one (operator->) and, with --tail-method auto,
// the simulator fallback around it (get(), what the planner and sizing use). Empty (false) for the
// paper's mean under Poisson arrivals.
class TailObjective {
 public:
  explicit operator bool() const { return analytic_ != nullptr; }
  const LatencyObjective* operator->() const { return analytic_.get(); }
  const LatencyObjective* analytic() const { return analytic_.get(); }
  const Objective* get() const;
  // "" or a line saying how many configurations the simulator scored.
  std::string note() const;
  int64_t simulations() const { return fallback_ ? fallback_->simulations() : 0; }

 private:
  friend struct TailFlags;
  std::unique_ptr<LatencyObjective> analytic_;
  std::unique_ptr<sim::SimulationFallbackObjective> fallback_;
};

// --objective (plan), --percentile (predict, size, capacity), --arrival-scv and --tail-method
// (all four).
struct TailFlags {
  std::string objective = "mean";    // plan: mean | pNN (e.g. p99)
  double percentile = 0;             // size, capacity: 0 = mean
  ArrivalFlags arrivals;             // --arrival-scv only
  std::string tail_method = "auto";  // auto: simulate where the approximation is poor; model: never
  CLI::Option* objective_opt = nullptr;
  CLI::Option* percentile_opt = nullptr;
  CLI::Option* tail_method_opt = nullptr;

  void add_objective(CLI::App* sub);
  void add_percentile(CLI::App* sub);
  void add_arrival_scv(CLI::App* sub);  // also adds --tail-method

  double arrival_scv() const { return arrivals.scv; }
  // The percentile asked for (0: the mean), checked: --objective pNN or --percentile NN,
  // kMinPercentile <= NN < 100.
  StatusOr<double> requested_percentile() const;
  // The objective to plan/size with, or nullptr for the paper's (mean, Poisson). `nodes` is the
  // fixed cluster size, 0 when sizing searches it. With batches (max_batch > 1) only the mean
  // under Poisson arrivals is modelled; --tail-method auto then adds the simulator where the
  // batch model is poor (serf/sim/fallback_objective.h).
  StatusOr<TailObjective> make(const Profile& profile, int nodes, int max_batch = 1) const;
  // "mean latency" or "p99 latency", plus the arrival SCV when not Poisson: for output lines.
  std::string what() const;
  // What the reports print about the objective made by make().
  io::ObjectiveLabel label(const TailObjective& objective) const;
};

}  // namespace serf::cli
