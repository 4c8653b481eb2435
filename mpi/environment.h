#pragma once
// RAII MPI environment. Only commands that need MPI create one, so `serf predict` and friends run
// without mpirun. MPI is initialised with MPI_THREAD_MULTIPLE (slots of one node are threads that
// communicate at once); a library that cannot provide it is an error, not a silent downgrade.
// Every wait on the other ranks is bounded, as the runtime's are: MPI_Init and MPI_Finalize (which
// wait for every rank) by a watchdog, the start-up agreement by a deadline.

#include <memory>
#include <string>
#include <vector>

#include "serf/core/status.h"

namespace serf::mpi {

// The bound a node rank keeps on a wait that rank 0 bounds too (MPI_Init, MPI_Finalize, the
// runtime's communicators): longer, so rank 0 always finds the fault first and reports it. A node
// ending the job first (its exit or MPI_Abort) made mpirun kill rank 0 before its error line
// when the ranks started a few seconds apart on a loaded machine: no line, only mpirun's notice.
// A node's bound expires only when rank 0 itself is dead or hung.
inline double node_bound_s(double rank0_bound_s) { return 2 * rank0_bound_s + 5; }

// Whether a launcher (mpirun, srun, hydra) started this process: its rank variable is set.
bool under_launcher();

class Environment {
 public:
  // MPI_Init waits for every rank of the job; past `start_bound_s` (> 0) rank 0 says a rank did
  // not start, and the process exits 1 (mpirun then ends the job). Node ranks wait
  // node_bound_s(start_bound_s) and exit 1 without a word (rank 0 did not report: it is the one
  // dead or hung).
  // Without a launcher the job is this process alone: rank 0 of 1, and MPI is not started (a
  // singleton's MPI_Init starts a PMIx server, seconds on a loaded machine, for a job that has no
  // node rank to run anything on; every runtime command then stops at its need for nodes).
  static StatusOr<std::unique_ptr<Environment>> Create(double start_bound_s = 0);
  // MPI_Finalize, unless abort() was called; bounded by set_finish_bound_s as MPI_Init is
  // (node ranks by node_bound_s of it).
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The start-up agreement, so every rank stops together when one found bad input. Every rank
  // passes its own outcome; rank 0 collects them within `timeout_s` and sends every rank the
  // verdict: rank 0's own error, else the lowest failing rank's ("rank 3: ..."), else Ok. On rank
  // 0, `*complete` is false when a rank did not report in time (the verdict then names it): that
  // rank cannot be told anything, so the caller must abort. Nodes wait for the verdict
  // node_bound_s(timeout_s) (their `timeout_s` is computed as rank 0's is); past it `*complete` is
  // false and the Status says rank 0 is dead or hung: the caller must abort too.
  Status agree(const Status& mine, double timeout_s, bool* complete);
  // Every node tells rank 0 that it reached `where` (and goes on at once); rank 0 waits for them
  // `timeout_s` and names the ranks that did not arrive ("WHERE: rank(s) 2 did not arrive within
  // 2 s (dead or hung node)"). Before a collective of every rank (the runtime's communicators,
  // MPI_Finalize), whose own timeout cannot say which rank is missing.
  Status check_in(const std::string& where, double timeout_s);
  void set_finish_bound_s(double seconds) { finish_bound_s_ = seconds; }
  // Tears the whole job down (every rank) with `code`; used after a fault, where a rank may hang.
  [[noreturn]] void abort(int code);

 private:
  Environment() = default;
  Status agree_as_node(const Status& mine, double timeout_s, bool* complete);
  int rank_ = 0;
  int size_ = 1;
  bool started_ = false;  // MPI_Init ran (under a launcher)
  double finish_bound_s_ = 0;
};

}  // namespace serf::mpi
