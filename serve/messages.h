#pragma once
// The controller <-> node contract (Clockwork-style: narrow, plain data). Every message is a
// trivially copyable struct sent as bytes; ranks of one job run the same binary, so layouts match.
// No MPI here: the dispatcher is tested against a fake transport with these same messages.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "serf/core/configuration.h"

namespace serf::serve {

// Controller -> every node, on the control communicator. Kinds are typed with their enums (an
// enum class of int32_t is the same four bytes); a zero kind is unset.
enum class ControlKind : int32_t { kConfigure = 1, kPing = 2, kShutdown = 3 };

struct ControlMessage {
  ControlKind kind{};
  int32_t generation = 0;  // configuration number, echoed in replies
  int32_t service = 1;     // c
  int32_t inter = 1;       // K
  int32_t intra = 1;       // T
  int32_t batch = 1;       // b: the most rows a slot's action may carry
};

// Node -> controller, on the control communicator. kFarewell: the node got SIGTERM (mpirun tears
// the job down after a rank died); the node ranks that send none are the dead ones.
enum class ReplyKind : int32_t { kReady = 1, kPong = 2, kError = 3, kBye = 4, kFarewell = 5 };

// What a node did for a configuration's kernels (in its kReady reply; ordered by cost): kHeld,
// every batch size of its (K, T, b) was still held (prepared ahead at start-up, or already
// running); kWarm, prepared again a (K, T, b) this node had prepared before in this run (oneDNN
// has its primitives); kCold, prepared for the first time. kUnknown: nothing to prepare
// (emulated nodes) or not said.
enum class Preparation : int32_t { kUnknown = 0, kHeld = 1, kWarm = 2, kCold = 3 };

inline const char* preparation_name(Preparation p) {
  switch (p) {
    case Preparation::kHeld:
      return "held";
    case Preparation::kWarm:
      return "warm";
    case Preparation::kCold:
      return "cold";
    default:
      return "unknown";
  }
}

// A message into a fixed field: whole when it fits, else cut with "..." at its end, so that a
// reader sees the line was cut (the node prints the whole line on its stderr where it matters).
inline void copy_message(const std::string& m, char* field, size_t size) {
  std::strncpy(field, m.c_str(), size - 1);
  field[size - 1] = '\0';
  if (m.size() > size - 1 && size > 4) std::memcpy(field + size - 4, "...", 3);
}

struct NodeReply {
  ReplyKind kind{};
  int32_t rank = 0;
  int32_t generation = 0;
  Preparation preparation = Preparation::kUnknown;  // kReady: the most costly of its slots'
  char message[232] = {};
  void set_message(const std::string& m) { copy_message(m, message, sizeof(message)); }
};

// Controller -> unit leader (tag = slot), then leader -> the unit (broadcast on the slot's
// communicator). A kRun is followed by `payload_floats` input values when non-zero: `rows`
// requests' inputs one after the other (a batch; 1 is a single request), answered as one.
enum class ActionKind : int32_t { kRun = 1, kStop = 2 };

struct RunAction {
  ActionKind kind{};
  int32_t slot = 0;
  int64_t request_id = -1;
  int32_t running = 0;         // i: requests running in this unit at dispatch, this one included
  int32_t payload_floats = 0;  // input values that follow
  int32_t rows = 1;            // requests in this batch, 1..b (request_id is the first one's)
  double emulated_ms = 0;      // > 0: emulated node, sleep this long instead of computing
};

// Per-layer times of one request on the unit leader (real nodes; `serf infer --inter` prints
// them as the single-process command does).
struct LayerTiming {
  float compute_ms = 0;   // this rank's compute of the layer
  float exchange_ms = 0;  // its all-gather
  int32_t fused = 0;      // 1: fused into the previous layer's step (no time of its own)
};

// Unit leader -> controller (kResultTag). Then, on kResultPayloadTag + slot and in this order
// (MPI keeps the order of messages between two ranks on one tag): `payload_floats` output values
// when non-zero (the action's rows one after the other, row r the answer to input row r), then
// `timed_layers` LayerTiming records (of the whole batch) when non-zero.
struct RunResult {
  int64_t request_id = -1;
  int32_t slot = 0;
  int32_t leader_rank = 0;
  int32_t ok = 1;
  int32_t payload_floats = 0;  // output values that follow
  int32_t timed_layers = 0;    // LayerTiming records that follow the output
  double service_ms = 0;       // started -> finished on the leader's clock
  char message[200] = {};
  void set_message(const std::string& m) { copy_message(m, message, sizeof(message)); }
};

static_assert(std::is_trivially_copyable_v<ControlMessage>);
static_assert(std::is_trivially_copyable_v<NodeReply>);
static_assert(std::is_trivially_copyable_v<RunAction>);
static_assert(std::is_trivially_copyable_v<RunResult>);
static_assert(std::is_trivially_copyable_v<LayerTiming>);
static_assert(sizeof(ControlKind) == 4 && sizeof(ReplyKind) == 4 && sizeof(ActionKind) == 4 &&
              sizeof(Preparation) == 4);

// Tags on the work communicator: slot s of a leader receives actions with tag s; results go to
// the controller with kResultTag, their output and layer times with kResultPayloadTag + slot.
inline constexpr int kMaxSlots = kMaxSlotsPerUnit;  // serf/core/configuration.h
inline constexpr int kResultTag = 10000;
inline constexpr int kResultPayloadTag = 20000;
inline constexpr int kControlTag = 1;
inline constexpr int kReplyTag = 2;
// Pings go to a node's watcher thread, which answers while the node's main and slot threads are
// busy or blocked (in a collective with a hung peer): only a stopped or dead process is silent.
inline constexpr int kPingTag = 3;
static_assert(kMaxSlots <= kResultTag, "a slot's action tag must stay below the result tags");

}  // namespace serf::serve
