#pragma once
// Online recalibration, the model's side (issue 17): a profile brought up to date from the service
// times a running system observes, ready to re-plan (plan_table) in milliseconds. The controller
// decides when a tuple has drifted (its own rule); this only says what the new profile is.

#include <vector>

#include "serf/core/configuration.h"
#include "serf/core/profile.h"
#include "serf/core/status.h"

namespace serf {

// The running estimate of one tuple's mean service time.
struct TupleObservation {
  ParallelismTuple tuple;
  double mean_ms = 0;
};

struct Recalibration {
  Profile profile;     // the updated profile (reindexed)
  int observed = 0;    // tuples set to their observed mean
  int scaled = 0;      // tuples scaled by their neighbours' drift (factor != 1)
  double drift = 1.0;  // geometric mean of observed / profiled over all observations
};

// Observed tuples take their observed mean. Every other tuple is scaled by the drift seen on its
// neighbours: the geometric mean of observed / profiled over the observations of the same (K, T)
// (any i, any b), else of the same K, else over all observations. Why: host drift (clock, heat,
// co-tenants) slows a node's work by about one factor, shared most closely by the tuples that run
// the same partition (K) with the same threads (T); the interference shape across i stays the
// profile's. SCVs are kept. InvalidArgument (naming it) for an observation of a tuple the profile
// lacks, a mean that is not finite and > 0, or a tuple observed twice.
StatusOr<Recalibration> recalibrate(const Profile& profile,
                                    const std::vector<TupleObservation>& observations);

}  // namespace serf
