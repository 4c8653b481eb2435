// study_model_vs_sim: the analytic queue models against the discrete-event simulator over
// c = 1..64, utilization 0.05..0.95 and random interference profiles; prints CSV on stdout.
// Driven by scripts/study_model_vs_sim.py (plots, summary). Usage:
//   study_model_vs_sim [--threads N] [--scale X]   (X scales the simulated requests; default 1)
//   study_model_vs_sim --scv-sweep [--threads N] [--scale X]: the two-moment study instead (issue
//     17): service SCV 0..1.5 x 4 interference shapes x c 1..64 x rho 0.05..0.95, start semantics,
//     Poisson, one unit; md-interf, mm-interf and mg-interf beside the simulator
//     (scripts/study_mg_interf.py).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "serf/core/queue_model.h"
#include "serf/core/tail_latency.h"
#include "serf/core/tail_objective.h"
#include "serf/sim/simulator.h"

namespace {

struct InterferenceProfile {
  int id;
  double a, b, scv;  // mean_ms(i) = 10 (1 + a (i-1)^b), every level with SCV scv
  std::vector<serf::ServiceLevel> levels(int c) const {
    std::vector<serf::ServiceLevel> out;
    for (int i = 1; i <= c; ++i) out.push_back({10.0 * (1.0 + a * std::pow(i - 1.0, b)), scv});
    return out;
  }
};

struct Task {
  const InterferenceProfile* profile;
  int c;
  double rho;
  serf::sim::ServiceSemantics semantics;
  double arrival_scv;
  int units;
  std::string row;
};

std::vector<InterferenceProfile> make_profiles() {
  std::vector<InterferenceProfile> out = {{0, 0.0, 1.0, 0.0}, {1, 0.0, 1.0, 1.0}};
  std::mt19937_64 rng(2018);
  std::uniform_real_distribution<double> a(0.02, 0.5), b(0.5, 1.2), scv(0.0, 0.3);
  for (int id = 2; id < 8; ++id) {
    const double ai = a(rng), bi = b(rng), si = scv(rng);
    out.push_back({id, ai, bi, si});
  }
  return out;
}

// What both studies derive from a task: its service levels and their means, the arrival rate
// per unit for its rho, and the simulation of those levels.
struct TaskSetup {
  std::vector<serf::ServiceLevel> levels;
  std::vector<double> means;
  double lambda_unit = 0;
  serf::sim::SimulationOptions options;
};

// `seed_base` keeps the two studies' random streams apart.
TaskSetup task_setup(const Task& t, uint64_t seed_base) {
  TaskSetup s;
  s.levels = t.profile->levels(t.c);
  for (const auto& l : s.levels) s.means.push_back(l.mean_ms);
  s.lambda_unit = t.rho * t.c * 1000.0 / s.levels.back().mean_ms;
  s.options.levels = s.levels;
  s.options.seed = seed_base * static_cast<uint64_t>(t.profile->id) + 1009ULL * t.c +
                   static_cast<uint64_t>(t.rho * 1000);
  return s;
}

std::string run_task(const Task& t, double scale) {
  TaskSetup setup = task_setup(t, 1000003ULL);
  const auto& levels = setup.levels;
  const auto& means = setup.means;
  const double lambda_unit = setup.lambda_unit;
  serf::sim::SimulationOptions& o = setup.options;
  o.units = t.units;
  o.semantics = t.semantics;
  o.arrival_kind = t.arrival_scv == 1.0 ? serf::ArrivalKind::kPoisson : serf::ArrivalKind::kGamma;
  o.arrival_scv = t.arrival_scv;
  o.rate_per_s = lambda_unit * t.units;
  o.requests = static_cast<int64_t>(scale * std::max(200000.0, 40000.0 / (1.0 - t.rho)));
  const auto sim = serf::sim::simulate(o);

  auto md = serf::QueueModel::Create(serf::QueueKind::kMdInterf, means, t.profile->scv);
  auto mm = serf::QueueModel::Create(serf::QueueKind::kMmInterf, means, t.profile->scv);
  auto mdc = serf::QueueModel::Create(serf::QueueKind::kMdc, means, t.profile->scv);
  if (!sim.ok() || !md.ok() || !mm.ok() || !mdc.ok()) return "";
  // The model side goes through the planner's objective, exactly as `serf plan --objective p99
  // --arrival-scv X` evaluates a configuration (K = 1, so `units` nodes hold `units` units).
  serf::Profile profile;
  profile.hardware = {t.units, 64};
  for (int i = 1; i <= t.c; ++i) {
    profile.tuples.push_back({{i, 1, 1}, means[static_cast<size_t>(i - 1)], t.profile->scv, 1, 0});
  }
  profile.reindex();
  const serf::ConfigurationFamily family{1, 1, t.c, *md, {}, 1, {}, {}};
  serf::LatencyObjectiveOptions oo;
  oo.percentile = 99;
  oo.arrival_scv = t.arrival_scv;
  oo.nodes = t.units;
  auto objective = serf::LatencyObjective::Create(profile, oo);
  if (!objective.ok()) return "";
  const serf::LatencyObjective& obj = **objective;
  const serf::Prediction raw = md->predict(t.c, lambda_unit);
  const serf::Prediction pmd = obj.corrected(family, t.c, raw);
  const double model_p99 = obj.score_ms(family, t.c, lambda_unit, raw);
  const double unit_scv = obj.unit_arrival_scv(family);
  const serf::Prediction pmm =
      serf::scale_wait(mm->predict(t.c, lambda_unit), serf::arrival_scv_wait_factor(unit_scv, 1.0));
  const serf::Prediction pdc =
      serf::scale_wait(mdc->predict(t.c, lambda_unit), obj.wait_factor(family, t.c));
  const auto tail =
      serf::LatencyTail::Create(*md, t.c, lambda_unit, levels, obj.tail_wait_factor(family, t.c));
  if (!tail.ok()) return "";
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%d,%.4f,%.4f,%.4f,%d,%.2f,%s,%.3f,%d,%lld,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,"
                "%.6g,%.6g,%.6g\n",
                t.profile->id, t.profile->a, t.profile->b, t.profile->scv, t.c, t.rho,
                serf::sim::service_semantics_name(t.semantics), t.arrival_scv, t.units,
                static_cast<long long>(sim->requests), sim->latency_ms, sim->latency_ci95_ms,
                sim->p99_ms, sim->wait_probability, pmd.latency_ms, model_p99,
                tail->wait_probability(), pmm.latency_ms, pdc.latency_ms, sim->wait_ms,
                tail->mean_latency_ms());
  return buf;
}

// One point of the SCV sweep: the simulated mean against md-, mm- and mg-interf.
std::string run_scv_task(const Task& t, double scale) {
  TaskSetup setup = task_setup(t, 7000003ULL);
  const auto& means = setup.means;
  const double lambda_unit = setup.lambda_unit;
  serf::sim::SimulationOptions& o = setup.options;
  o.units = 1;
  o.semantics = serf::sim::ServiceSemantics::kStart;
  o.rate_per_s = lambda_unit;
  // Waits vary more with the service SCV: longer runs where it is high.
  o.requests = static_cast<int64_t>(scale * (1.0 + t.profile->scv) *
                                    std::max(200000.0, 40000.0 / (1.0 - t.rho)));
  const auto sim = serf::sim::simulate(o);
  double model[3] = {0, 0, 0};
  const serf::QueueKind kinds[3] = {serf::QueueKind::kMdInterf, serf::QueueKind::kMmInterf,
                                    serf::QueueKind::kMgInterf};
  for (int k = 0; k < 3; ++k) {
    auto m = serf::QueueModel::Create(kinds[k], means, t.profile->scv);
    if (!m.ok()) return "";
    const serf::Prediction p = m->predict(t.c, lambda_unit);
    if (!p.stable) return "";
    model[k] = p.latency_ms;
  }
  if (!sim.ok()) return "";
  char buf[320];
  std::snprintf(buf, sizeof buf, "%d,%.4f,%.4f,%.4f,%d,%.2f,%lld,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g\n",
                t.profile->id, t.profile->a, t.profile->b, t.profile->scv, t.c, t.rho,
                static_cast<long long>(sim->requests), sim->latency_ms, sim->latency_ci95_ms,
                sim->wait_ms, model[0], model[1], model[2]);
  return buf;
}

// Interference shapes (none, and three of make_profiles' random ones) x service SCV 0..1.5.
std::vector<InterferenceProfile> make_scv_profiles() {
  const auto base = make_profiles();
  std::vector<InterferenceProfile> out;
  int id = 100;
  for (const InterferenceProfile* shape : {&base[0], &base[2], &base[3], &base[5]}) {
    for (double scv : {0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5}) {
      out.push_back({id++, shape->a, shape->b, scv});
    }
  }
  return out;
}

void run_pool(std::vector<Task>& tasks, int threads, double scale, bool scv_sweep) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (int k = 0; k < threads; ++k) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < tasks.size(); i = next++)
        tasks[i].row = scv_sweep ? run_scv_task(tasks[i], scale) : run_task(tasks[i], scale);
    });
  }
  for (auto& th : pool) th.join();
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  double scale = 1.0;
  bool scv_sweep = false;
  for (int k = 1; k < argc; ++k) {
    if (std::strcmp(argv[k], "--scv-sweep") == 0) scv_sweep = true;
    if (k + 1 >= argc) break;
    if (std::strcmp(argv[k], "--threads") == 0) threads = std::max(1, std::atoi(argv[k + 1]));
    if (std::strcmp(argv[k], "--scale") == 0) scale = std::atof(argv[k + 1]);
  }
  const int cs[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};
  if (scv_sweep) {
    const auto profiles = make_scv_profiles();
    std::vector<Task> tasks;
    for (const auto& p : profiles) {
      for (int c : cs) {
        for (int r = 0; r < 10; ++r) {
          tasks.push_back({&p, c, 0.05 + 0.1 * r, serf::sim::ServiceSemantics::kStart, 1.0, 1, ""});
        }
      }
    }
    run_pool(tasks, threads, scale, true);
    std::printf(
        "profile,interference_a,interference_b,scv,c,rho,requests,sim_latency_ms,sim_ci95_ms,"
        "sim_wait_ms,md_interf_latency_ms,mm_interf_latency_ms,mg_interf_latency_ms\n");
    for (const Task& t : tasks) std::fputs(t.row.c_str(), stdout);
    return 0;
  }
  const auto profiles = make_profiles();
  std::vector<Task> tasks;
  for (const auto& p : profiles) {
    for (int c : cs) {
      for (int r = 0; r < 10; ++r) {
        const double rho = 0.05 + 0.1 * r;
        for (auto sem :
             {serf::sim::ServiceSemantics::kStart, serf::sim::ServiceSemantics::kShared}) {
          tasks.push_back({&p, c, rho, sem, 1.0, 1, ""});
        }
        // Bursty arrivals (start semantics) on a subset: one unit and four units (split stream).
        if (p.id % 2 == 0 && (c == 1 || c == 4 || c == 16 || c == 64)) {
          for (double ca2 : {0.25, 4.0}) {
            for (int units : {1, 4}) {
              tasks.push_back({&p, c, rho, serf::sim::ServiceSemantics::kStart, ca2, units, ""});
            }
          }
        }
      }
    }
  }
  run_pool(tasks, threads, scale, false);
  std::printf(
      "profile,interference_a,interference_b,scv,c,rho,semantics,arrival_scv,units,requests,"
      "sim_latency_ms,sim_ci95_ms,sim_p99_ms,sim_wait_probability,model_latency_ms,model_p99_ms,"
      "model_wait_probability,mm_interf_latency_ms,mdc_latency_ms,sim_wait_ms,tail_mean_ms\n");
  for (const Task& t : tasks) std::fputs(t.row.c_str(), stdout);
  return 0;
}
