// Rank 0's side of the runtime: the Transport the Controller drives, over MPI.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>

#include "mpi/runtime.h"

namespace serf::mpi {

namespace {
std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}
}  // namespace

MpiTransport::MpiTransport(const RuntimeComms& comms, double timeout_s, FaultPlan fault,
                           const std::atomic<bool>* terminated)
    : comms_(comms),
      nodes_(comms.control.size() - 1),
      timeout_s_(timeout_s),
      fault_(fault),
      terminated_(terminated) {}

MpiTransport::~MpiTransport() { pending_.cancel(); }

Status MpiTransport::stop_slots() {
  if (!configured_) return Status::Ok();
  RunAction stop;
  stop.kind = static_cast<int32_t>(ActionKind::kStop);
  const int units = nodes_ / config_.inter;
  for (int u = 0; u < units; ++u) {
    for (int s = 0; s < config_.service; ++s) {
      stop.slot = s;
      SERF_RETURN_IF_ERROR(comms_.work.send(stop, leader_rank(u), s, wait(timeout_s_)));
    }
  }
  return Status::Ok();
}

Status MpiTransport::collect_replies(const std::vector<int>& ranks, ReplyKind kind,
                                     double timeout_s, std::vector<NodeReply>* replies) {
  std::set<int> missing(ranks.begin(), ranks.end());
  const auto start = std::chrono::steady_clock::now();
  while (!missing.empty()) {
    double left =
        timeout_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    NodeReply reply;
    Status st = left > 0 ? comms_.control.recv(&reply, -1, kReplyTag, wait(left))
                         : Unavailable("timed out");
    if (!st.ok()) {
      return Unavailable("rank(s) " + rank_list({missing.begin(), missing.end()}) +
                         " did not answer within " + serve::seconds_text(timeout_s) +
                         " s (dead or hung node)");
    }
    if (reply.kind == static_cast<int32_t>(ReplyKind::kFarewell)) {
      farewells_.insert(reply.rank);  // for diagnose_terminated(): this one is alive
      continue;
    }
    if (reply.kind == static_cast<int32_t>(ReplyKind::kError)) {
      return InvalidArgument("rank " + std::to_string(reply.rank) + ": " + reply.message);
    }
    if (reply.kind != static_cast<int32_t>(kind) || reply.generation != generation_)
      continue;  // stale
    missing.erase(reply.rank);
    if (replies != nullptr) replies->push_back(reply);
  }
  return Status::Ok();
}

Status MpiTransport::command_all(ControlMessage msg, ReplyKind reply, double timeout_s,
                                 std::vector<NodeReply>* replies) {
  pending_.cancel();
  SERF_RETURN_IF_ERROR(stop_slots());
  msg.generation = ++generation_;
  std::vector<int> ranks;
  for (int r = 1; r <= nodes_; ++r) {
    SERF_RETURN_IF_ERROR(comms_.control.send(msg, r, kControlTag, wait(timeout_s_)));
    ranks.push_back(r);
  }
  return collect_replies(ranks, reply, timeout_s, replies);
}

Status MpiTransport::configure(const Configuration& config) {
  ControlMessage msg;
  msg.kind = static_cast<int32_t>(ControlKind::kConfigure);
  msg.service = config.service;
  msg.inter = config.inter;
  msg.intra = config.intra;
  msg.fault_rank = fault_.rank;
  msg.fault_mode = static_cast<int32_t>(fault_.mode);
  msg.fault_after = fault_.after;
  std::vector<NodeReply> replies;
  // Nodes re-prepare the model's kernels for the new (K, T): allow more than a request's time.
  SERF_RETURN_IF_ERROR(
      command_all(msg, ReplyKind::kReady, std::max(6 * timeout_s_, 60.0), &replies));
  std::sort(replies.begin(), replies.end(),
            [](const NodeReply& a, const NodeReply& b) { return a.rank < b.rank; });
  placement_.clear();
  for (const NodeReply& r : replies) {
    placement_ += "rank " + std::to_string(r.rank) + ": " + r.message + "\n";
  }
  config_ = config;
  configured_ = true;
  return Status::Ok();
}

Status MpiTransport::send_run(int unit, const RunAction& action, const std::vector<float>& input) {
  SERF_RETURN_IF_ERROR(comms_.work.send(action, leader_rank(unit), action.slot, wait(timeout_s_)));
  if (action.payload_floats > 0) {
    SERF_RETURN_IF_ERROR(comms_.work.send_bytes(input.data(), input.size() * sizeof(float),
                                                leader_rank(unit), action.slot, wait(timeout_s_)));
  }
  return Status::Ok();
}

StatusOr<std::optional<RunResult>> MpiTransport::poll_result() {
  if (!pending_.active()) {
    SERF_RETURN_IF_ERROR(pending_.post(comms_.work, &inbox_, sizeof(inbox_), -1, kResultTag));
  }
  int from = -1;
  SERF_ASSIGN_OR_RETURN(bool done, pending_.test(&from));
  if (!done) return std::optional<RunResult>();
  RunResult result = inbox_;
  if (result.payload_floats > 0) {
    last_output_.resize(static_cast<size_t>(result.payload_floats));
    SERF_RETURN_IF_ERROR(
        comms_.work.recv_bytes(last_output_.data(), last_output_.size() * sizeof(float), from,
                               kResultPayloadTag + result.slot, wait(timeout_s_)));
  }
  SERF_RETURN_IF_ERROR(pending_.post(comms_.work, &inbox_, sizeof(inbox_), -1, kResultTag));
  return std::optional<RunResult>(result);
}

std::string MpiTransport::diagnose(int unit) {
  // Ping the unit's ranks (their main threads answer even while a slot computes).
  ++generation_;
  ControlMessage ping;
  ping.kind = static_cast<int32_t>(ControlKind::kPing);
  ping.generation = generation_;
  std::vector<int> ranks;
  for (int k = 0; k < config_.inter; ++k) ranks.push_back(leader_rank(unit) + k);
  std::vector<int> sent;
  for (int r : ranks) {
    if (comms_.control.send(ping, r, kControlTag, wait(1.0)).ok()) sent.push_back(r);
  }
  Status st = collect_replies(sent, ReplyKind::kPong, 2.0, nullptr);
  std::string ranks_text = "unit " + std::to_string(unit) + " is rank(s) " + rank_list(ranks);
  if (sent.size() < ranks.size()) return ranks_text + "; a ping could not be sent: " + st.message();
  if (!st.ok()) return ranks_text + "; " + st.message();
  return ranks_text +
         "; every rank answers a ping, so the request itself is too slow (raise --node-timeout)";
}

bool MpiTransport::job_torn_down(double window_s) {
  const auto start = std::chrono::steady_clock::now();
  while (farewells_.empty()) {
    double left =
        window_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    NodeReply reply;
    if (left <= 0 || !comms_.control.recv(&reply, -1, kReplyTag, WaitPolicy{left}).ok()) break;
    if (reply.kind == static_cast<int32_t>(ReplyKind::kFarewell)) farewells_.insert(reply.rank);
  }
  return !farewells_.empty();
}

std::string MpiTransport::diagnose_terminated() {
  if (!terminated_text_.empty()) return terminated_text_;
  // Live nodes answer SIGTERM within milliseconds (their watcher polls every 10 ms); the window
  // allows for nodes starved of CPU. mpirun sends SIGKILL 1 s after SIGTERM
  // (odls_base_sigkill_timeout), and the measurements are saved before this is called.
  constexpr double kFarewellWindowS = 0.5;
  const auto start = std::chrono::steady_clock::now();
  while (static_cast<int>(farewells_.size()) < nodes_) {
    double left = kFarewellWindowS -
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    NodeReply reply;
    // No cancel flag here: it is the flag that is set.
    if (left <= 0 || !comms_.control.recv(&reply, -1, kReplyTag, WaitPolicy{left}).ok()) break;
    if (reply.kind == static_cast<int32_t>(ReplyKind::kFarewell)) farewells_.insert(reply.rank);
  }
  std::vector<int> dead;
  for (int r = 1; r <= nodes_; ++r) {
    if (farewells_.count(r) == 0) dead.push_back(r);
  }
  const std::string alive = std::to_string(farewells_.size()) + " of " + std::to_string(nodes_);
  if (dead.empty()) {
    terminated_text_ = "terminated (SIGTERM) with every node rank alive (" + alive +
                       " answered): the job was cancelled";
  } else {
    terminated_text_ = (dead.size() == 1 ? "node rank " : "node ranks ") + rank_list(dead) +
                       " died (mpirun stopped the job with SIGTERM and " +
                       (dead.size() == 1 ? "it" : "they") + " sent no farewell; " + alive +
                       " node ranks did)";
  }
  return terminated_text_;
}

Status MpiTransport::shutdown() {
  if (shut_down_) return Status::Ok();
  ControlMessage msg;
  msg.kind = static_cast<int32_t>(ControlKind::kShutdown);
  SERF_RETURN_IF_ERROR(command_all(msg, ReplyKind::kBye, timeout_s_, nullptr));
  shut_down_ = true;
  return Status::Ok();
}

}  // namespace serf::mpi
