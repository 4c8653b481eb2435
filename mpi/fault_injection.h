#pragma once
// Test hook, selected by the hidden --test-fault-* flags only: a node that misbehaves on purpose so
// the controller's fault handling can be tested. It decorates the slot workers of the one faulty
// rank; nothing of it travels in the controller <-> node messages, and without the flags it is
// never constructed.

#include <memory>

#include "mpi/runtime.h"

namespace serf::mpi {

// kHangAtStart: the rank (rank 0 too) stops itself as SIGSTOP does just before the start-up
// agreement (hang_at_start), so the others' bound on waiting for it is tested.
enum class FaultMode { kNone, kHang, kExit, kHangAtStart };

struct FaultPlan {
  int rank = -1;  // the rank that misbehaves
  FaultMode mode = FaultMode::kNone;
  int after = 0;  // requests that rank serves (over all its slots and configurations) before
};

// `factory` itself unless `plan` names `rank`. Then each slot's worker counts the requests the rank
// was given, and past plan.after, before serving, stops the whole process as SIGSTOP does (kHang:
// a hung node, silent to pings) or exits with code 3 (kExit: a dead node).
SlotWorkerFactory with_injected_fault(SlotWorkerFactory factory, const FaultPlan& plan, int rank);

// Stops the whole process (never returns) when `plan` is kHangAtStart for `rank`; else nothing.
void hang_at_start(const FaultPlan& plan, int rank);

}  // namespace serf::mpi
