// Rank 0's side of the runtime: the Transport the Controller drives, over MPI.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <set>
#include <tuple>

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

MpiTransport::MpiTransport(const RuntimeComms& comms, double timeout_s,
                           const std::atomic<bool>* terminated, const std::atomic<int>* signal,
                           const SignalOrigin* origin)
    : comms_(comms),
      nodes_(comms.control.size() - 1),
      timeout_s_(timeout_s),
      terminated_(terminated),
      signal_(signal),
      origin_(origin) {}

void MpiTransport::note_farewell(const NodeReply& reply) {
  farewells_.insert(reply.rank);
  if (!signalled() && early_farewells_.count(reply.rank) == 0) {
    early_farewells_[reply.rank] = {Clock::now(), reply.message[0] ? reply.message : "SIGTERM"};
  }
}

Status MpiTransport::check_lone_signals() {
  for (;;) {
    SERF_ASSIGN_OR_RETURN(bool waiting, comms_.control.iprobe(-1, kReplyTag));
    if (!waiting) break;
    NodeReply reply;
    SERF_RETURN_IF_ERROR(comms_.control.recv(&reply, -1, kReplyTag, wait(timeout_s_)));
    if (reply.kind == ReplyKind::kFarewell) note_farewell(reply);
  }
  if (signalled() || early_farewells_.empty()) return Status::Ok();
  std::vector<int> alone;
  std::string signal;
  for (const auto& [rank, when] : early_farewells_) {
    if (std::chrono::duration<double>(Clock::now() - when.first).count() < kLoneSignalS) continue;
    alone.push_back(rank);
    signal = when.second;
  }
  if (alone.empty()) return Status::Ok();
  return Unavailable((alone.size() == 1 ? "node rank " : "node ranks ") + rank_list(alone) +
                     " got " + signal + " (sent to " +
                     (alone.size() == 1 ? "that process" : "those processes") +
                     " alone: rank 0 got none within " + serve::seconds_text(kLoneSignalS) +
                     " s, so it was not mpirun stopping the job); " +
                     (alone.size() == 1 ? "it leaves" : "they leave") + ", so the job stops");
}

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
  stop.kind = ActionKind::kStop;
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
    if (reply.kind == ReplyKind::kFarewell) {
      note_farewell(reply);  // for diagnose_terminated(): this one is alive
      continue;
    }
    if (reply.kind == ReplyKind::kError) {
      return InvalidArgument("rank " + std::to_string(reply.rank) + ": " + reply.message);
    }
    const int want = kind == ReplyKind::kPong ? ping_generation_ : generation_;
    if (reply.kind != kind || reply.generation != want) continue;  // stale
    waiting.erase(reply.rank);
    if (replies != nullptr) replies->push_back(reply);
  }
  return Status::Ok();
}

std::vector<int> MpiTransport::silent_ranks(const std::vector<int>& ranks,
                                            const Deadline& deadline) {
  ControlMessage ping;
  ping.kind = ControlKind::kPing;
  ping.generation = ++ping_generation_;
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
                                 double cap_s, std::vector<NodeReply>* replies) {
  // Every node's reply is awaited in windows of the node timeout; the ranks that have not replied
  // probe_s (half the window, at most 2 s) before a window ends are pinged. A silent one is dead
  // or hung: named when the window ends (within the node timeout of a node that hung while idle).
  // When every one answers, they are alive and slow (a real model's kernels are re-prepared, or
  // one node waits for another inside a collective): the wait goes on, up to `cap_s` in all.
  const auto start = Clock::now();
  const double probe = serve::Controller::probe_s(timeout_s);
  auto window = std::make_unique<Deadline>(timeout_s);
  pending_.cancel();
  SERF_RETURN_IF_ERROR(stop_slots(*window));
  msg.generation = ++generation_;
  std::vector<int> waiting;
  for (int r = 1; r <= nodes_; ++r) {
    SERF_RETURN_IF_ERROR(send_within(&msg, sizeof(msg), r, kControlTag, *window, comms_.control));
    waiting.push_back(r);
  }
  auto elapsed = [&] {  // "2", "2.1": seconds since the command, to 0.1 s
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    return serve::seconds_text(std::round(s * 10) / 10);
  };
  for (;;) {
    std::vector<int> missing;
    Status st =
        collect_replies(waiting, reply, Deadline(window->left_s() - probe), replies, &missing);
    if (st.ok() || missing.empty()) return st;
    const std::vector<int> silent = silent_ranks(missing, *window);
    if (signalled()) return st;
    std::vector<int> alive;
    std::set_difference(missing.begin(), missing.end(), silent.begin(), silent.end(),
                        std::back_inserter(alive));
    if (!silent.empty()) {
      std::string text = "rank(s) " + rank_list(silent) + " did not answer within " + elapsed() +
                         " s, not even a ping (dead or hung node)";
      if (!alive.empty()) text += "; rank(s) " + rank_list(alive) + " answer pings, held up by it";
      return Unavailable(text);
    }
    const double left = cap_s - std::chrono::duration<double>(Clock::now() - start).count();
    if (left <= 0) {
      return Unavailable("rank(s) " + rank_list(alive) +
                         " answer pings but did not finish within " + elapsed() +
                         " s (a switch rebuilds every node's communicators and " +
                         "re-prepares a model's kernels; raise --node-timeout)");
    }
    waiting = alive;
    window = std::make_unique<Deadline>(std::min(timeout_s, left));
  }
}

Status MpiTransport::configure(const Configuration& config) {
  ControlMessage msg;
  msg.kind = ControlKind::kConfigure;
  msg.service = config.service;
  msg.inter = config.inter;
  msg.intra = config.intra;
  msg.batch = config.batch;
  std::vector<NodeReply> replies;
  // A node that hung while idle is named within the node timeout, at the next switch. Live nodes
  // re-prepare a real model's kernels for the new (K, T) meanwhile (imagenet1k: 0.5-0.8 s here,
  // several seconds on a loaded machine): they get up to 6 node timeouts, at least 60 s.
  SERF_RETURN_IF_ERROR(
      command_all(msg, ReplyKind::kReady, timeout_s_, std::max(6 * timeout_s_, 60.0), &replies));
  std::sort(replies.begin(), replies.end(),
            [](const NodeReply& a, const NodeReply& b) { return a.rank < b.rank; });
  placement_.clear();
  preparation_ = Preparation::kUnknown;
  for (const NodeReply& r : replies) {
    placement_ += "rank " + std::to_string(r.rank) + ": " + r.message + "\n";
    preparation_ = std::max(preparation_, r.preparation);
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
  SERF_RETURN_IF_ERROR(check_lone_signals());
  if (!pending_.active()) {
    SERF_RETURN_IF_ERROR(pending_.post(comms_.work, &inbox_, sizeof(inbox_), -1, kResultTag));
  }
  int from = -1;
  SERF_ASSIGN_OR_RETURN(bool done, pending_.test(&from));
  if (!done) return std::optional<RunResult>();
  RunResult result = inbox_;
  // The output, then the layer times, on one tag: MPI keeps their order.
  last_output_.assign(static_cast<size_t>(std::max(result.payload_floats, 0)), 0.0f);
  last_layers_.assign(static_cast<size_t>(std::max(result.timed_layers, 0)), LayerTiming{});
  for (auto [data, bytes, what] :
       {std::tuple<void*, size_t, const char*>{last_output_.data(),
                                               last_output_.size() * sizeof(float), "output"},
        {last_layers_.data(), last_layers_.size() * sizeof(LayerTiming), "layer times"}}) {
    if (bytes == 0) continue;
    Status got = comms_.work.recv_bytes(data, bytes, from, kResultPayloadTag + result.slot,
                                        wait(timeout_s_));
    if (!got.ok() && !signalled()) {
      return Unavailable("rank " + std::to_string(from) + " sent the result of request " +
                         std::to_string(result.request_id) + " but not its " + what + " within " +
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
  // mpirun's SIGTERM is its teardown: SIGKILL comes within a second, whether or not the nodes'
  // farewells (they got it too) arrive within the window on a loaded machine.
  if (origin_ != nullptr && origin_->kill_follows.load()) return true;
  const auto start = std::chrono::steady_clock::now();
  while (farewells_.empty()) {
    double left =
        window_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    NodeReply reply;
    if (left <= 0 || !comms_.control.recv(&reply, -1, kReplyTag, WaitPolicy{left}).ok()) break;
    if (reply.kind == ReplyKind::kFarewell) note_farewell(reply);
  }
  return !farewells_.empty();
}

std::set<int> MpiTransport::hear_nodes() {
  // Who got a signal and who is alive: a node that got one says farewell (its watcher polls every
  // 10 ms), and every live node answers a ping, so the silent ones are dead. mpirun sends SIGKILL
  // 1 s after its SIGTERM (odls_base_sigkill_timeout) and the measurements are saved before this
  // is called: then the window ends 0.5 s after the signal came (at least 0.1 s from now: the
  // farewells of a teardown are in by then). A signal nothing follows (sent to rank 0 alone,
  // SIGUSR1) leaves time: up to the node timeout, as any wait on a node (a node stopped for 1.5 s
  // answered after the 0.5 s, and rank 0 said it died). Either is cut short once every node has
  // said farewell, or has answered and 0.25 s passed since the last pong (a node that got the
  // signal too says farewell within that).
  constexpr double kWindowS = 0.5, kLeastS = 0.1, kSettleS = 0.25;
  double window_s = std::max(kWindowS, timeout_s_);
  if (kill_follows()) {
    const int64_t at_ns = origin_ != nullptr ? origin_->at_ns.load() : 0;
    const double since_s =
        at_ns > 0 ? std::chrono::duration<double>(
                        Clock::now() - Clock::time_point(std::chrono::nanoseconds(at_ns)))
                        .count()
                  : 0;
    window_s = std::max(kLeastS, kWindowS - since_s);
  }
  const Deadline deadline(window_s);
  ControlMessage ping;
  ping.kind = ControlKind::kPing;
  ping.generation = ++ping_generation_;
  for (int r = 1; r <= nodes_; ++r) {
    if (farewells_.count(r) == 0)
      (void)comms_.control.send(ping, r, kPingTag, WaitPolicy{std::max(deadline.left_s(), 1e-3)});
  }
  std::set<int> pongs;
  auto heard = [&] {
    for (int r = 1; r <= nodes_; ++r) {
      if (farewells_.count(r) == 0 && pongs.count(r) == 0) return false;
    }
    return true;
  };
  double settled_at_s = kSettleS;  // into the window
  while (static_cast<int>(farewells_.size()) < nodes_) {
    const double left = deadline.left_s();
    if (left <= 0 || (heard() && window_s - left >= settled_at_s)) break;
    NodeReply reply;
    // No cancel flag here: it is the flag that is set.
    if (!comms_.control.recv(&reply, -1, kReplyTag, WaitPolicy{std::min(left, 0.02)}).ok())
      continue;
    if (reply.kind == ReplyKind::kFarewell) note_farewell(reply);
    if (reply.kind == ReplyKind::kPong && reply.generation == ping.generation) {
      pongs.insert(reply.rank);
      settled_at_s = std::max(settled_at_s, window_s - deadline.left_s() + kSettleS);
    }
  }
  return pongs;
}

std::string MpiTransport::diagnose_terminated() {
  if (!terminated_text_.empty()) return terminated_text_;
  const std::set<int> pongs = hear_nodes();
  const std::string mine = signal_name(signal_ != nullptr ? signal_->load() : 0);
  std::vector<int> dead, alone_dead, signalled_nodes;
  for (int r = 1; r <= nodes_; ++r) {
    if (farewells_.count(r) != 0) signalled_nodes.push_back(r);
    if (farewells_.count(r) != 0 || pongs.count(r) != 0) continue;
    (early_farewells_.count(r) != 0 ? alone_dead : dead).push_back(r);
  }
  const int alive = nodes_ - static_cast<int>(dead.size() + alone_dead.size());
  const std::string alive_text =
      std::to_string(alive) + " of " + std::to_string(nodes_) + " node ranks are alive";
  if (!dead.empty() || !alone_dead.empty()) {
    std::string text;
    if (!dead.empty()) {
      text = (dead.size() == 1 ? "node rank " : "node ranks ") + rank_list(dead) +
             " died (mpirun stopped the job with " + mine + "; " +
             (dead.size() == 1 ? "it sent no farewell and answers"
                               : "they sent no farewell and answer") +
             " no ping)";
    }
    if (!alone_dead.empty()) {
      if (!text.empty()) text += "; ";
      text += (alone_dead.size() == 1 ? "node rank " : "node ranks ") + rank_list(alone_dead) +
              " died after " + early_farewells_.begin()->second.second +
              " was sent to it alone, then mpirun stopped the job";
    }
    terminated_text_ = text + "; " + alive_text;
  } else if (signalled_nodes.empty()) {
    terminated_text_ = "rank 0 got " + mine +
                       " alone: every node rank is alive (answered a ping) and got no signal; " +
                       "the controller was stopped from outside, not by mpirun";
  } else if (static_cast<int>(signalled_nodes.size()) == nodes_) {
    terminated_text_ =
        "every rank got " + mine + " and every node rank is alive (" + std::to_string(nodes_) +
        " farewells): the whole job was signalled (mpirun forwards SIGUSR1 and SIGUSR2, and "
        "turns its own SIGINT or SIGTERM into SIGTERM to every rank)";
  } else {
    terminated_text_ = "rank 0 and node rank(s) " + rank_list(signalled_nodes) + " got " + mine +
                       "; every node rank is alive";
  }
  return terminated_text_;
}

Status MpiTransport::shutdown() {
  if (shut_down_) return Status::Ok();
  ControlMessage msg;
  msg.kind = ControlKind::kShutdown;
  Status st = command_all(msg, ReplyKind::kBye, timeout_s_, timeout_s_, nullptr);
  if (!st.ok() && !signalled()) return st.with_context("stopping the nodes after the run");
  SERF_RETURN_IF_ERROR(st);
  shut_down_ = true;
  return Status::Ok();
}

}  // namespace serf::mpi
