#include "serf/core/arrivals.h"

#include <cmath>

namespace serf {

StatusOr<ArrivalKind> parse_arrival_kind(const std::string& name) {
  if (name == "poisson") return ArrivalKind::kPoisson;
  if (name == "gamma") return ArrivalKind::kGamma;
  if (name == "deterministic") return ArrivalKind::kDeterministic;
  return InvalidArgument("unknown arrival process '" + name +
                         "'; use poisson, gamma or deterministic");
}

const char* arrival_kind_name(ArrivalKind kind) {
  switch (kind) {
    case ArrivalKind::kPoisson:
      return "poisson";
    case ArrivalKind::kGamma:
      return "gamma";
    case ArrivalKind::kDeterministic:
      return "deterministic";
  }
  return "?";
}

namespace {

// The SCV the kind implies, or an error when the caller asked for another one.
StatusOr<double> checked_scv(ArrivalKind kind, double scv) {
  if (!std::isfinite(scv) || scv < 0) {
    return InvalidArgument("arrival SCV must be finite and >= 0 (got " + std::to_string(scv) + ")");
  }
  switch (kind) {
    case ArrivalKind::kPoisson:
      if (scv != 1.0) {
        return InvalidArgument("Poisson arrivals have SCV 1; use gamma arrivals for SCV " +
                               std::to_string(scv));
      }
      return 1.0;
    case ArrivalKind::kDeterministic:
      return 0.0;
    case ArrivalKind::kGamma:
      if (scv <= 0) {
        return InvalidArgument("gamma arrivals need SCV > 0; use deterministic arrivals for SCV 0");
      }
      return scv;
  }
  return InvalidArgument("unknown arrival kind");
}

}  // namespace

StatusOr<ArrivalProcess> ArrivalProcess::Create(ArrivalKind kind, double rate_per_s, double scv) {
  if (!std::isfinite(rate_per_s) || rate_per_s <= 0) {
    return InvalidArgument("arrival rate must be finite and > 0 requests/s (got " +
                           std::to_string(rate_per_s) + ")");
  }
  SERF_ASSIGN_OR_RETURN(double s, checked_scv(kind, scv));
  ArrivalProcess p;
  p.kind_ = kind;
  p.scv_ = s;
  p.mean_rate_per_s_ = rate_per_s;
  p.inv_rate_s_ = 1.0 / rate_per_s;
  p.gap_ = GammaDraw(1.0, s);
  return p;
}

StatusOr<ArrivalProcess> ArrivalProcess::CreateSchedule(ArrivalKind kind,
                                                        std::vector<RateSegment> schedule,
                                                        double scv) {
  if (schedule.empty()) return InvalidArgument("rate schedule is empty; give at least one segment");
  double total_s = 0, total_arrivals = 0;
  for (size_t k = 0; k < schedule.size(); ++k) {
    const RateSegment& seg = schedule[k];
    const std::string where = "rate schedule segment " + std::to_string(k);
    if (!std::isfinite(seg.duration_s) || seg.duration_s <= 0) {
      return InvalidArgument(where + ": duration_s must be finite and > 0");
    }
    if (!std::isfinite(seg.rate_per_s) || seg.rate_per_s < 0) {
      return InvalidArgument(where + ": rate_per_s must be finite and >= 0");
    }
    total_s += seg.duration_s;
    total_arrivals += seg.duration_s * seg.rate_per_s;
  }
  if (total_arrivals <= 0) return InvalidArgument("rate schedule has only zero rates");
  SERF_ASSIGN_OR_RETURN(ArrivalProcess p, Create(kind, total_arrivals / total_s, scv));
  p.schedule_ = std::move(schedule);
  double t = 0, op = 0;
  for (const RateSegment& seg : p.schedule_) {
    p.start_s_.push_back(t);
    p.op_start_.push_back(op);
    t += seg.duration_s;
    op += seg.duration_s * seg.rate_per_s;
  }
  return p;
}

void ArrivalProcess::reset() {
  now_s_ = 0;
  op_now_ = 0;
  segment_ = 0;
}

double ArrivalProcess::next_scheduled_s(double gap) {
  op_now_ += gap;
  // Find the segment whose operational-time interval holds op_now_ (segments of rate 0 hold none).
  while (segment_ < schedule_.size()) {
    const RateSegment& seg = schedule_[segment_];
    const double op_end = op_start_[segment_] + seg.duration_s * seg.rate_per_s;
    if (seg.rate_per_s > 0 && op_now_ < op_end) {
      now_s_ = start_s_[segment_] + (op_now_ - op_start_[segment_]) / seg.rate_per_s;
      return now_s_;
    }
    ++segment_;
  }
  now_s_ = std::numeric_limits<double>::infinity();
  return now_s_;
}

}  // namespace serf
