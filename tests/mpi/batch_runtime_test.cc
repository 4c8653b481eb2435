// Dynamic batching on real nodes (issue 16), under mpiexec with 3 ranks (a controller and 2
// nodes computing the tiny model): requests that wait together are served as batches of up to b,
// and every request is answered once with its own row, equal to the model run on its input alone
// (what `serf infer` computes), with K = 1 and with the batch split over K = 2 ranks.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <memory>

#include "engine/backend.h"
#include "model/weights.h"
#include "mpi/engine_worker.h"
#include "mpi/runtime.h"
#include "mpi_test_env.h"

using namespace serf;
using namespace serf::mpi;
using namespace serf::serve;
using namespace serf::mpi::testing;  // environment, AbortOnFailure

namespace {

const std::string kModel = std::string(SERF_SOURCE_DIR) + "/configs/models/tiny.json";
constexpr uint64_t kWeightSeed = 5;

// The model run alone on each input, batch 1, one process: the reference rows.
std::vector<std::vector<float>> run_alone(const std::vector<std::vector<float>>& inputs) {
  auto backend = engine::make_backend("cpu");
  REQUIRE(backend.ok());
  auto plan = model::load_model(kModel);
  REQUIRE(plan.ok());
  const model::Weights weights = model::Weights::seeded(*plan, kWeightSeed);
  auto prepared = (*backend)->prepare(*plan, weights, {0, 1}, 1, 1);
  REQUIRE(prepared.ok());
  auto slot = (*prepared)->new_slot();
  REQUIRE(slot.ok());
  engine::LocalExchange local;
  std::vector<std::vector<float>> out;
  for (const auto& in : inputs) {
    std::vector<float> row(static_cast<size_t>(plan->output().elements()));
    REQUIRE((*slot)->run(in.data(), row.data(), local, nullptr).ok());
    out.push_back(std::move(row));
  }
  return out;
}

// Serves `inputs` (all waiting before the loop starts) on `config`; the answers in input order.
std::vector<InferAnswer> serve_all(Controller& controller, const Configuration& config,
                                   const std::vector<std::vector<float>>& inputs) {
  REQUIRE(controller.configure(config).ok());
  std::vector<InferAnswer> answers(inputs.size());
  size_t done = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    InferRequest r;
    r.input = std::make_shared<const std::vector<float>>(inputs[k]);
    r.arrival = std::chrono::steady_clock::now();
    r.done = [&, k](InferAnswer&& a) {
      answers[k] = std::move(a);
      if (++done == inputs.size()) controller.request_stop();
    };
    const bool pushed = controller.inbox().push(std::move(r));  // REQUIRE loops: moved once
    REQUIRE(pushed);
  }
  REQUIRE(controller.serve(nullptr).ok());
  REQUIRE(done == inputs.size());
  controller.inbox().reopen();
  return answers;
}

}  // namespace

TEST_CASE("batches on real nodes answer each request with its own row", "[mpi][batch]") {
  Environment& env = environment();
  REQUIRE(env.size() == 3);
  auto comms = make_runtime_comms();
  REQUIRE(comms.ok());
  if (env.rank() != 0) {
    auto slots = EngineSlots::Create(kModel, "cpu", "", kWeightSeed);
    REQUIRE(slots.ok());
    REQUIRE(run_node(*comms, {2, false}, (*slots)->factory()).ok());
    return;
  }
  AbortOnFailure guard;  // a failed REQUIRE on rank 0 must not leave the nodes waiting
  auto plan = model::load_model(kModel);
  REQUIRE(plan.ok());
  std::vector<std::vector<float>> inputs;
  for (uint64_t k = 0; k < 22; ++k) inputs.push_back(model::seeded_input(plan->spec.input, 40 + k));
  const std::vector<std::vector<float>> alone = run_alone(inputs);

  MpiTransport transport(*comms, 30.0);
  Controller controller(transport, {});
  for (const Configuration config :
       {Configuration{1, 1, 1, 4}, Configuration{2, 1, 1, 8}, Configuration{1, 2, 1, 4}}) {
    INFO(to_string(config));
    const size_t before = controller.records().size();
    std::vector<InferAnswer> answers = serve_all(controller, config, inputs);
    for (size_t k = 0; k < inputs.size(); ++k) {
      REQUIRE(answers[k].outcome == Outcome::kAnswered);
      REQUIRE(answers[k].output.size() == alone[k].size());
      for (size_t j = 0; j < alone[k].size(); ++j) {
        REQUIRE(answers[k].output[j] == Approx(alone[k][j]).margin(1e-5));
      }
    }
    std::map<int64_t, int> seen;
    int largest = 0;
    for (size_t r = before; r < controller.records().size(); ++r) {
      const RequestRecord& rec = controller.records()[r];
      REQUIRE(rec.answered);
      REQUIRE(rec.batch <= config.batch);
      largest = std::max(largest, rec.batch);
      seen[rec.id]++;
    }
    REQUIRE(seen.size() == inputs.size());
    for (const auto& [id, n] : seen) REQUIRE(n == 1);
    REQUIRE(largest > 1);  // all waited together: batches formed
  }
  REQUIRE(controller.shutdown().ok());
  guard.done = true;
}
