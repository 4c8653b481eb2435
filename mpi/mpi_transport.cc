// Rank 0's side of the runtime: the Transport the Controller drives, over MPI.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <set>

#include "mpi/runtime.h"

namespace serf::mpi {

namespace {
std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

using Clock = std::chrono::steady_clock;
}  // namespace

MpiTransport::Deadline::Deadline(double seconds)
    : seconds_(seconds),
      end_(Clock::now() +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds))) {}

double MpiTransport::Deadline::left_s() const {
  return std::chrono::duration<double>(end_ - Clock::now()).count();
}

MpiTransport::MpiTransport(const RuntimeComms& comms, double timeout_s, FaultPlan fault,
                           const std::atomic<bool>* terminated)
    : comms_(comms),
      nodes_(comms.control.size() - 1),
      timeout_s_(timeout_s),
      fault_(fault),
      terminated_(terminated) {}

MpiTransport::~MpiTransport() { pending_.cancel(); }

Status MpiTransport::send_within(const void* data, size_t bytes, int rank, int tag,
                                 const Deadline& deadline, const Communicator& comm) {
  const double left = deadline.left_s();
  Status st =
      left > 0 ? comm.send_bytes(data, bytes, rank, tag, wait(left)) : Unavailable("no time left");
  if (st.ok() || (terminated_ != nullptr && terminated_->load())) return st;
  return Unavailable("rank " + std::to_string(rank) + " did not take a message within " +
                     serve::seconds_text(deadline.seconds()) + " s (dead or hung node)");
}

Status MpiTransport::stop_slots(const Deadline& deadline) {
  if (!configured_) return Status::Ok();
  RunAction stop;
  stop.kind = static_cast<int32_t>(ActionKind::kStop);
  const int units = nodes_ / config_.inter;
  for (int u = 0; u < units; ++u) {
    for (int s = 0; s < config_.service; ++s) {
      stop.slot = s;
      SERF_RETURN_IF_ERROR(
          send_within(&stop, sizeof(stop), leader_rank(u), s, deadline, comms_.work));
    }
  }
  return Status::Ok();
}

Status MpiTransport::collect_replies(const std::vector<int>& ranks, ReplyKind kind,
                                     const Deadline& deadline, std::vector<NodeReply>* replies,
                                     std::vector<int>* missing) {
  std::set<int> waiting(ranks.begin(), ranks.end());
  while (!waiting.empty()) {
    const double left = deadline.left_s();
    NodeReply reply;
    Status st = left > 0 ? comms_.control.recv(&reply, -1, kReplyTag, wait(left))
                         : Unavailable("timed out");
    if (!st.ok()) {
      if (missing != nullptr && !(terminated_ != nullptr && terminated_->load()))
        missing->assign(waiting.begin(), waiting.end());
      return st;
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
    waiting.erase(reply.rank);
    if (replies != nullptr) replies->push_back(reply);
  }
  return Status::Ok();
}

std::vector<int> MpiTransport::silent_ranks(const std::vector<int>& ranks,
                                            const Deadline& deadline) {
  ControlMessage ping;
  ping.kind = static_cast<int32_t>(ControlKind::kPing);
  ping.generation = ++generation_;
  std::vector<int> sent, silent;
  for (int r : ranks) {
    if (send_within(&ping, sizeof(ping), r, kPingTag, deadline, comms_.control).ok()) {
      sent.push_back(r);
    } else {
      silent.push_back(r);
    }
  }
  std::vector<int> missing;
  (void)collect_replies(sent, ReplyKind::kPong, deadline, nullptr, &missing);
  silent.insert(silent.end(), missing.begin(), missing.end());
  std::sort(silent.begin(), silent.end());
  return silent;
}

Status MpiTransport::command_all(ControlMessage msg, ReplyKind reply, double timeout_s,
                                 std::vector<NodeReply>* replies) {
  // One bound for the whole exchange: stop actions, commands, every node's reply, and pings to
  // the ranks that did not reply, which tell a hung node from the live ones it holds up (nodes
  // rebuild their communicators together, so one hung node stops them all).
  const Deadline deadline(timeout_s);
  const Deadline replies_by(timeout_s - serve::Controller::probe_s(timeout_s));
  pending_.cancel();
  SERF_RETURN_IF_ERROR(stop_slots(deadline));
  msg.generation = ++generation_;
  std::vector<int> ranks;
  for (int r = 1; r <= nodes_; ++r) {
    SERF_RETURN_IF_ERROR(send_within(&msg, sizeof(msg), r, kControlTag, deadline, comms_.control));
    ranks.push_back(r);
  }
  std::vector<int> missing;
  Status st = collect_replies(ranks, reply, replies_by, replies, &missing);
  if (st.ok() || missing.empty()) return st;
  const std::vector<int> silent = silent_ranks(missing, deadline);
  if (terminated_ != nullptr && terminated_->load()) return st;
  std::vector<int> alive;
  std::set_difference(missing.begin(), missing.end(), silent.begin(), silent.end(),
                      std::back_inserter(alive));
  const std::string within = " within " + serve::seconds_text(timeout_s) + " s";
  if (silent.empty()) {
    return Unavailable("rank(s) " + rank_list(alive) + " answer pings but did not finish" + within +
                       " (raise --node-timeout: a switch rebuilds every node's "
                       "communicators and re-prepares a model's kernels)");
  }
  std::string text = "rank(s) " + rank_list(silent) + " did not answer" + within +
                     ", not even a ping (dead or hung node)";
  if (!alive.empty()) text += "; rank(s) " + rank_list(alive) + " answer pings, held up by it";
  return Unavailable(text);
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
  // Bounded by the node timeout like every wait of rank 0 on the nodes, so a node that hung while
  // idle is named at the next switch. Nodes re-prepare a real model's kernels for the new (K, T)
  // meanwhile (imagenet1k: 0.5-0.8 s here): the timeout must allow that.
  SERF_RETURN_IF_ERROR(command_all(msg, ReplyKind::kReady, timeout_s_, &replies));
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
  const Deadline deadline(timeout_s_);
  SERF_RETURN_IF_ERROR(
      send_within(&action, sizeof(action), leader_rank(unit), action.slot, deadline, comms_.work));
  if (action.payload_floats > 0) {
    SERF_RETURN_IF_ERROR(send_within(input.data(), input.size() * sizeof(float), leader_rank(unit),
                                     action.slot, deadline, comms_.work));
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
    Status got = comms_.work.recv_bytes(last_output_.data(), last_output_.size() * sizeof(float),
                                        from, kResultPayloadTag + result.slot, wait(timeout_s_));
    if (!got.ok() && !(terminated_ != nullptr && terminated_->load())) {
      return Unavailable("rank " + std::to_string(from) + " sent the result of request " +
                         std::to_string(result.request_id) + " but not its output within " +
                         serve::seconds_text(timeout_s_) + " s (dead or hung node)");
    }
    SERF_RETURN_IF_ERROR(got);
  }
  SERF_RETURN_IF_ERROR(pending_.post(comms_.work, &inbox_, sizeof(inbox_), -1, kResultTag));
  return std::optional<RunResult>(result);
}

Status MpiTransport::probe(int unit, double within_s) {
  // Each node's watcher thread answers, whatever its slots are doing.
  const Deadline deadline(within_s);
  std::vector<int> ranks;
  for (int k = 0; k < config_.inter; ++k) ranks.push_back(leader_rank(unit) + k);
  const std::vector<int> silent = silent_ranks(ranks, deadline);
  if (silent.empty()) return Status::Ok();
  return Unavailable("unit " + std::to_string(unit) + " is rank(s) " + rank_list(ranks) +
                     "; rank(s) " + rank_list(silent) + " did not answer a ping within " +
                     serve::seconds_text(within_s) + " s (dead or hung node)");
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
