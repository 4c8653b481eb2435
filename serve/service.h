#pragma once
// What the front ends (HTTP, gRPC) share: the served model, health, and the call that hands a
// request to the controller and waits for its answer on the front end's own thread.

#include <atomic>
#include <string>
#include <vector>

#include "serve/controller.h"
#include "serve/model_info.h"
#include "serve/request.h"

namespace serf::serve {

class ServeMetrics;

class InferenceService {
 public:
  // `metrics` may be null (no metrics kept).
  InferenceService(Controller& controller, ModelInfo model, ServeMetrics* metrics = nullptr);
  const ModelInfo& model() const { return model_; }
  bool live() const { return true; }
  // Every node prepared the model, and the service is not stopping.
  bool ready() const { return controller_.live().ready; }
  LiveStatus status() const { return controller_.live(); }
  ServeMetrics* metrics() const { return metrics_; }
  // Hands the request to the controller and blocks until it ends. `timeout_us` > 0: a request
  // still queued that long after `arrival` ends kTimedOut. The answer's output is the model's
  // output tensor (empty for emulated nodes).
  // `cancelled`: InferRequest::cancelled (the client went away), or empty.
  InferAnswer infer(std::vector<float> input, SteadyTime arrival, double timeout_us,
                    std::function<bool()> cancelled = nullptr);
  // The same without blocking (infer() is this and a wait): `done` is called exactly once, on the
  // controller's thread when the request was admitted (keep it short), or on this thread at once
  // when the server is stopping.
  void submit(std::vector<float> input, SteadyTime arrival, double timeout_us, Completion done,
              std::function<bool()> cancelled = nullptr);
  // A request that ended before its input arrived whole (`reason`: why; a gRPC call whose message
  // never came): the controller counts it received and timed out (InferRequest::ended), or, when
  // the server is stopping, received and rejected at the door.
  void count_ended(SteadyTime arrival, std::string reason);
  // Whether `name` (and `version`, when not empty) is the served model; the error names both.
  Status check_model(const std::string& name, const std::string& version) const;

 private:
  // Trims the unit leader's message to the output tensor (or fails the answer when it is short).
  void finish(InferAnswer* a) const;

  Controller& controller_;
  ModelInfo model_;
  ServeMetrics* metrics_;
};

}  // namespace serf::serve
