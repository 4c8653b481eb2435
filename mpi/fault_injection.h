#pragma once
// Test hook, selected by the hidden --test-fault-* flags only: a node that misbehaves on purpose so
// the controller's fault handling can be tested. It decorates the slot workers of the one faulty
// rank; nothing of it travels in the controller <-> node messages, and without the flags it is
// never constructed.

#include <memory>
#include <string>

#include "mpi/runtime.h"

namespace serf::mpi {

// kHangAtStart: the rank (rank 0 too) stops itself as SIGSTOP does at a phase of the start (or the
// end) of the runtime (at_phase), so the others' bound on every wait for it is tested.
enum class FaultMode { kNone, kHang, kExit, kHangAtStart };

// The phases, in the order a node passes them: before the start-up agreement ("agree"), before
// the runtime's communicators ("comms"), before the nodes' own group ("nodes"), before the
// placement split ("pin"), at the first configuration before its unit split ("configure"; rank 0:
// before it sends the first configuration),
// before the slots' communicators ("slots"), before the ready reply ("ready"), at the shutdown
// before the bye ("bye"), and after it, before MPI_Finalize ("finalize").
inline constexpr const char* kFaultPhases[] = {"agree", "comms", "nodes", "pin",     "configure",
                                               "slots", "ready", "bye",   "finalize"};

struct FaultPlan {
  int rank = -1;  // the rank that misbehaves
  FaultMode mode = FaultMode::kNone;
  int after = 0;  // requests that rank serves (over all its slots and configurations) before
  // The configuration (1: the rank's first) from which `after` counts: a fault placed by request
  // count alone moves with the load, since a closed loop sends more requests to a tuple of c > 1
  // when its slots did not overlap (unmeasured ones).
  int from_configuration = 1;
  std::string phase = "agree";  // kHangAtStart: where it stops (one of kFaultPhases)
};

// `factory` itself unless `plan` names `rank`. Then each slot's worker counts the requests the rank
// was given from its plan.from_configuration-th configuration on (configurations counted as the
// rank's slots are built for them), and past plan.after, before serving, stops the whole process as
// SIGSTOP does (kHang: a hung node, silent to pings) or exits with code 3 (kExit: a dead node).
SlotWorkerFactory with_injected_fault(SlotWorkerFactory factory, const FaultPlan& plan, int rank);

// Arms the start-up hook of this process: at_phase(plan.phase) then stops it (never returns) when
// `plan` is kHangAtStart for `rank`. Without it (every real run) at_phase does nothing.
void arm_phase_fault(const FaultPlan& plan, int rank);
void at_phase(const char* phase);

}  // namespace serf::mpi
