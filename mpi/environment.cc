#include "mpi/environment.h"

#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

namespace serf::mpi {

namespace {

// The rank variables of the launchers (Open MPI's mpirun, PMIx: srun --mpi=pmix, PMI: hydra).
constexpr const char* kRankVariables[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};

// The rank mpirun gave this process, before MPI knows it (0 when not under a launcher).
int launcher_rank() {
  for (const char* name : kRankVariables) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return std::atoi(v);
  }
  return 0;
}

// Ends the process when a blocking MPI call on every rank (MPI_Init, MPI_Finalize) does not return
// within its bound: the call cannot be cancelled, and a rank that is stopped or dead would hold
// this one there forever. Rank 0 says why; the exit makes mpirun end the job. Node ranks wait
// longer (node_bound_s), so their exit never ends the job before rank 0 has said it.
class Watchdog {
 public:
  Watchdog(double seconds, std::string message) {
    if (!(seconds > 0)) return;
    if (launcher_rank() != 0) seconds = node_bound_s(seconds);
    thread_ = std::thread([this, seconds, message = std::move(message)] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; }))
        return;
      if (launcher_rank() == 0) std::cerr << "serf: error: " << one_line(message) << "\n";
      std::cout.flush();
      std::cerr.flush();
      std::fflush(nullptr);
      _exit(1);
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

// The start-up agreement's message: a StatusCode and its text.
struct Verdict {
  int32_t code = 0;
  char message[1000] = {};
};
constexpr int kAgreeTag = 7001;    // on MPI_COMM_WORLD, which carries nothing else point to point
constexpr int kCheckInTag = 7002;  // check_in's messages, on MPI_COMM_WORLD too

Verdict verdict_of(const Status& st) {
  Verdict v;
  v.code = static_cast<int32_t>(st.code());
  std::strncpy(v.message, st.message().c_str(), sizeof(v.message) - 1);
  return v;
}

// Waits for each of `pending` (the receive from rank i + 1 at index i) within `timeout_s` and
// returns the ranks whose receive did not complete (cancelled and freed). Each request on its own:
// MPI_Testall completes none until all are done, so one missing rank left every request pending
// and named every node ("rank(s) 1, 2, 3").
std::vector<int> wait_each(std::vector<MPI_Request>* pending, double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    bool all = true;
    for (MPI_Request& req : *pending) {
      int done = 0;
      if (req != MPI_REQUEST_NULL) MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      all = all && (req == MPI_REQUEST_NULL);
    }
    if (all) return {};
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_s)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<int> missing;
  for (size_t i = 0; i < pending->size(); ++i) {
    MPI_Request& req = (*pending)[i];
    if (req == MPI_REQUEST_NULL) continue;
    missing.push_back(static_cast<int>(i) + 1);
    MPI_Cancel(&req);
    MPI_Request_free(&req);
  }
  return missing;
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

}  // namespace

bool under_launcher() {
  for (const char* name : kRankVariables) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return true;
  }
  return false;
}

StatusOr<std::unique_ptr<Environment>> Environment::Create(double start_bound_s) {
  // A job of this process alone: a bad --drift file took 0.68 s to refuse (load 11; 0.13 s
  // without MPI), past 20 s at load 16, nearly all of it the singleton's MPI_Init and Finalize.
  if (!under_launcher()) return std::unique_ptr<Environment>(new Environment());
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return Internal("MPI is already initialised in this process");
  int provided = 0;
  {
    Watchdog watchdog(start_bound_s,
                      "MPI did not start within " + seconds_text(start_bound_s) +
                          " s: a rank of the job did not reach MPI_Init (dead or hung)");
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      return Unavailable("MPI_Init_thread failed");
    }
  }
  // Failures come back as error codes (and become a Status), they do not abort inside MPI.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::unique_ptr<Environment> env(new Environment());
  env->started_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &env->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &env->size_);
  if (provided < MPI_THREAD_MULTIPLE) {
    return Unavailable(
        "this MPI library does not provide MPI_THREAD_MULTIPLE (slots of a node are "
        "threads); use an MPI built with thread support, e.g. Open MPI 4");
  }
  return env;
}

Environment::~Environment() {
  if (!started_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  Watchdog watchdog(finish_bound_s_, "rank 0 finished, but MPI_Finalize waited " +
                                         seconds_text(finish_bound_s_) +
                                         " s for the other ranks: a node rank hung at the end");
  MPI_Finalize();
}

Status Environment::agree(const Status& mine, double timeout_s, bool* complete) {
  *complete = true;
  if (rank_ != 0) return agree_as_node(mine, timeout_s, complete);
  const int nodes = size_ - 1;
  std::vector<Verdict> got(static_cast<size_t>(nodes));
  std::vector<MPI_Request> pending(static_cast<size_t>(nodes), MPI_REQUEST_NULL);
  for (int r = 1; r <= nodes; ++r) {
    MPI_Irecv(&got[static_cast<size_t>(r - 1)], sizeof(Verdict), MPI_BYTE, r, kAgreeTag,
              MPI_COMM_WORLD, &pending[static_cast<size_t>(r - 1)]);
  }
  const std::vector<int> missing = wait_each(&pending, timeout_s);
  if (!missing.empty()) {
    *complete = false;
    return Unavailable("rank(s) " + ranks_text(missing) + " did not reach the start within " +
                       seconds_text(std::round(timeout_s * 10) / 10) +
                       " s of rank 0 (dead or hung, or slower to read their files by more than "
                       "--node-timeout)");
  }
  Status verdict = mine;
  for (int r = 1; r <= nodes && verdict.ok(); ++r) {
    const Verdict& v = got[static_cast<size_t>(r - 1)];
    if (v.code != 0) {
      verdict =
          Status(static_cast<StatusCode>(v.code), "rank " + std::to_string(r) + ": " + v.message);
    }
  }
  // Small messages go out at once (eager): the nodes reported, so they are there to take them.
  const Verdict out = verdict_of(verdict);
  for (int r = 1; r <= nodes; ++r) {
    MPI_Send(&out, sizeof(out), MPI_BYTE, r, kAgreeTag, MPI_COMM_WORLD);
  }
  return verdict;
}

Status Environment::agree_as_node(const Status& mine, double timeout_s, bool* complete) {
  // Rank 0 may be dead or hung before the agreement: the node waits node_bound_s of rank 0's bound
  // (longer, so a rank 0 that is merely slow still reports first), then gives up. Rank 1 reports
  // it for every node; the others wait 5 s more, so none ends the job (and rank 1 with it) before
  // rank 1's line is out.
  const double bound_s = node_bound_s(timeout_s) + (rank_ == 1 ? 0.0 : 5.0);
  const Verdict v = verdict_of(mine);
  Verdict got;
  MPI_Request pending[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  MPI_Isend(&v, sizeof(v), MPI_BYTE, 0, kAgreeTag, MPI_COMM_WORLD, &pending[0]);
  MPI_Irecv(&got, sizeof(got), MPI_BYTE, 0, kAgreeTag, MPI_COMM_WORLD, &pending[1]);
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    int all = 0;
    MPI_Testall(2, pending, &all, MPI_STATUSES_IGNORE);
    if (all) return Status(static_cast<StatusCode>(got.code), got.message);
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > bound_s)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (MPI_Request& req : pending) {
    if (req == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&req);
    MPI_Request_free(&req);
  }
  *complete = false;
  return Unavailable("rank 0 did not send the start-up verdict within " +
                     seconds_text(std::round(bound_s * 10) / 10) +
                     " s (2 x its own bound + 5 s): rank 0 is dead or hung");
}

Status Environment::check_in(const std::string& where, double timeout_s) {
  if (rank_ != 0) {
    // Small: it goes out at once, and MPI completes the freed request (by MPI_Finalize at last).
    static const int32_t here = 1;
    MPI_Request req;
    MPI_Isend(&here, 1, MPI_INT32_T, 0, kCheckInTag, MPI_COMM_WORLD, &req);
    MPI_Request_free(&req);
    return Status::Ok();
  }
  std::vector<int32_t> got(static_cast<size_t>(size_ - 1));
  std::vector<MPI_Request> pending(got.size(), MPI_REQUEST_NULL);
  for (int r = 1; r < size_; ++r) {
    MPI_Irecv(&got[static_cast<size_t>(r - 1)], 1, MPI_INT32_T, r, kCheckInTag, MPI_COMM_WORLD,
              &pending[static_cast<size_t>(r - 1)]);
  }
  const std::vector<int> missing = wait_each(&pending, timeout_s);
  if (missing.empty()) return Status::Ok();
  return Unavailable(where + ": rank(s) " + ranks_text(missing) + " did not arrive within " +
                     seconds_text(std::round(timeout_s * 10) / 10) + " s (dead or hung node)");
}

void Environment::abort(int code) {
  if (!started_) std::_Exit(code);
  // MPI_Abort asks mpirun to end the job. With a node stopped (SIGSTOP) the job ran on past 60 s
  // now and then (test_mpi_cli_fault_stop_phases, "bye" and "finalize"): past a grace this rank
  // leaves with its code on its own, and mpirun ends the job when it sees it gone.
  constexpr auto kGrace = std::chrono::seconds(3);
  std::thread([code, kGrace] {
    std::this_thread::sleep_for(kGrace);
    std::_Exit(code);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace serf::mpi
