#pragma once
// One statistics module: every command and report uses these definitions, so two outputs never
// compute "the p99" or print "a rate" differently. Pure (no I/O).

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace serf {

// ---- sample statistics -------------------------------------------------------------------------

// The one quantile definition: Hyndman & Fan's type 7, linear interpolation between the order
// statistics x_(0) <= ... <= x_(n-1) at h = (n - 1) q: x_(floor h) + (h - floor h) (x_(floor h + 1)
// - x_(floor h)). Chosen because it is the default of numpy and R (the scripts under scripts/ get
// the same numbers), it is continuous in q, q = 0.5 is the usual median (the mean of the two
// middle values for even n), and q = 0 and q = 1 are the min and the max. 0 for no values; q is
// clamped to [0, 1]. `sorted` must be ascending.
double quantile_sorted(const std::vector<double>& sorted, double q);
// The same on unsorted values (sorted in a copy).
double quantile(std::vector<double> values, double q);
// quantile(values, 0.5).
double median(std::vector<double> values);
// The arithmetic mean; 0 for no values.
double mean(const std::vector<double>& values);
// The mean of the values within z robust standard deviations of their median (the robust
// standard deviation is 1.4826 x the median absolute deviation, the standard deviation for
// Gaussian values): a mean that a few wild values (a stalled host's batch means) cannot move,
// while a skewed but steady spread (a host's heavy tail) is kept, unlike a trimmed mean's. Never
// empty: when the MAD is 0 at least half the values equal the median. 0 for no values.
double mean_within_mad(const std::vector<double>& values, double z);
// The second central moment of the values, sum (x - mean)^2 / n: the plug-in estimate of a
// distribution's variance, as a profile's service-time SCV takes it; 0 for no values.
double variance(const std::vector<double>& values);
// The squared coefficient of variation variance / mean^2; 0 when the mean is not > 0.
double scv(const std::vector<double>& values);

// Half-width of the 95 % confidence interval of the mean of `means` (independent, e.g. batch
// means): Student's t with n - 1 degrees of freedom times the sample standard deviation (n - 1)
// over sqrt(n). -1 for fewer than 2 means.
double ci95_half_width(const std::vector<double>& means);
// The batch-means 95 % CI half-width of the mean of a correlated series (latencies in arrival
// order): `batches` consecutive batches, the last one taking the remainder, each batch's mean
// treated as independent (ci95_half_width). -1 when there are fewer than 2 values per batch.
double batch_means_ci95(const std::vector<double>& values, int batches = 10);

// Gamma draws with a given mean and squared coefficient of variation: shape 1/scv, scale
// mean*scv; exponential at scv 1 (the std::exponential_distribution stream), the constant mean at
// scv 0. Every sampled service time, work amount and arrival gap draws through this.
class GammaDraw {
 public:
  GammaDraw() = default;
  GammaDraw(double mean, double scv) : mean_(mean), scv_(scv) {
    if (scv_ > 0 && scv_ != 1.0) gamma_ = std::gamma_distribution<double>(1.0 / scv_, mean_ * scv_);
  }
  template <typename Rng>
  double operator()(Rng& rng) {
    if (!(scv_ > 0)) return mean_;
    if (scv_ == 1.0) return mean_ * exponential_(rng);
    return gamma_(rng);
  }
  double mean() const { return mean_; }
  double scv() const { return scv_; }

 private:
  double mean_ = 1.0, scv_ = 1.0;
  std::exponential_distribution<double> exponential_{1.0};
  std::gamma_distribution<double> gamma_{1.0, 1.0};
};

// ---- number formatters: every number a person reads goes through one of these ---------------

// printf-style, one double: format_number("%.3f", x).
std::string format_number(const char* printf_format, double x);
// "%g": values quoted back in error lines ("--rate -3: ...").
std::string format_g(double x);
// Four significant digits ("%.4g"): computed values in messages ("the best reachable is 270.4 ms").
std::string format_sig4(double x);
// The shortest text that reads back to the same double (files: CSV, tables).
std::string format_shortest(double x);
// "12.3 ms".
std::string format_ms(double ms);
// A rate for people: 4 significant digits, never an exponent ("0.5", "12.35", "1234").
std::string format_rate(double per_s);
// format_rate + " requests/s".
std::string format_rate_text(double per_s);
// A fraction as a percentage with one decimal: 0.1234 -> "12.3%".
std::string format_percent(double fraction);
// Thousands separated: 28559232 -> "28,559,232".
std::string format_count(int64_t n);

}  // namespace serf
