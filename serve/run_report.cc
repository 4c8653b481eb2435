#include "serve/run_report.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "serf/core/statistics.h"
#include "serf/io/json_fields.h"

namespace serf::serve {

namespace {
constexpr const char* kRunCsvHeader =
    "id,arrival_s,dispatch_s,done_s,latency_ms,service_ms,unit,slot,running,service,inter,intra,"
    "batch,served_batch,outcome,answered\n";

// Times in whole microseconds (fixed, 6 decimals): the stream's default 6 significant digits
// left 10 ms steps after 1000 s of a run, which hid every wait shorter than that.
void write_csv_row(std::ostream& csv, const RequestRecord& r) {
  const auto flags = csv.flags();
  const auto precision = csv.precision();
  csv << r.id << ',' << std::fixed << std::setprecision(6) << r.arrival_s << ',' << r.dispatch_s
      << ',' << r.done_s << ',';
  csv.flags(flags);
  csv.precision(precision);
  csv << (r.answered ? r.latency_ms() : 0) << ',' << r.service_ms << ',' << r.unit << ',' << r.slot
      << ',' << r.running << ',' << r.config.service << ',' << r.config.inter << ','
      << r.config.intra << ',' << r.config.batch << ',' << (r.dispatch_s > 0 ? r.batch : 0) << ','
      << outcome_name(r.outcome) << ',' << (r.answered ? 1 : 0) << '\n';
}
}  // namespace

StatusOr<std::unique_ptr<RunJournal>> RunJournal::Open(const std::string& path) {
  if (path.empty()) return std::unique_ptr<RunJournal>();
  const std::string csv = path + ".csv";
  const int fd = ::open(csv.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    return InvalidArgument(csv + ": cannot write file (" + std::strerror(err) +
                           (err == ENOENT ? ": its folder does not exist" : "") + ")");
  }
  std::unique_ptr<RunJournal> journal(new RunJournal(fd, csv));
  if (!journal->write_whole(kRunCsvHeader)) return journal->status();
  return journal;
}

RunJournal::~RunJournal() { ::close(fd_); }

bool RunJournal::write_whole(const std::string& text) {
  if (!status_.ok()) return false;
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "nothing written";
      // A row cut short would not parse: back to the last whole one.
      const bool cut =
          ::ftruncate(fd_, good_bytes_) == 0 && ::lseek(fd_, good_bytes_, SEEK_SET) >= 0;
      status_ = Unavailable(path_ + ": write failed after " + std::to_string(rows_) + " rows (" +
                            why + ")" +
                            (cut ? "; the file holds those rows, each whole"
                                 : "; it could not be cut back to its last whole row"));
      return false;
    }
    done += static_cast<size_t>(n);
  }
  good_bytes_ += static_cast<long long>(text.size());
  return true;
}

bool RunJournal::add(const RequestRecord& record) {
  std::ostringstream row;
  write_csv_row(row, record);
  if (!write_whole(row.str())) return false;  // in the kernel now: survives a SIGKILL
  ++rows_;
  return true;
}

Status write_run_report(const Controller& controller, const std::string& path,
                        const std::string& model, const std::vector<OverloadNote>& overloads,
                        const std::vector<Recalibration>* recalibrations) {
  if (path.empty()) return Status::Ok();
  nlohmann::json doc{{"format", "serf-run/1"}, {"model", model}};
  doc["requests"] = nlohmann::json::array();
  std::ostringstream csv;
  csv << kRunCsvHeader;
  for (const RequestRecord& r : controller.records()) {
    nlohmann::json j{{"id", r.id},
                     {"arrival_s", r.arrival_s},
                     {"unit", r.unit},
                     {"slot", r.slot},
                     {"running", r.running},
                     {"service", r.config.service},
                     {"inter", r.config.inter},
                     {"intra", r.config.intra},
                     {"batch", r.config.batch},
                     {"answered", r.answered},
                     {"outcome", outcome_name(r.outcome)}};
    if (r.answered) {
      j["latency_ms"] = r.latency_ms();
      j["service_ms"] = r.service_ms;
      j["served_batch"] = r.batch;  // requests in the batch that answered it (<= batch)
    }
    doc["requests"].push_back(j);
    write_csv_row(csv, r);
  }
  doc["switches"] = nlohmann::json::array();
  for (const SwitchRecord& s : controller.switches()) {
    doc["switches"].push_back({{"at_s", s.at_s},
                               {"from", {s.from.service, s.from.inter, s.from.intra, s.from.batch}},
                               {"to", {s.to.service, s.to.inter, s.to.intra, s.to.batch}},
                               {"drain_ms", s.drain_ms},
                               {"configure_ms", s.configure_ms},
                               {"preparation", preparation_name(s.preparation)}});
  }
  doc["overloads"] = nlohmann::json::array();
  for (const OverloadNote& n : overloads) {
    doc["overloads"].push_back(
        {{"at_s", n.at_s},
         {"rate_per_s", n.rate_per_s},
         {"to", {n.config.service, n.config.inter, n.config.intra, n.config.batch}},
         {"capacity_per_s", n.capacity_per_s}});
  }
  if (recalibrations != nullptr) doc["recalibrations"] = recalibrations_json(*recalibrations);
  SERF_RETURN_IF_ERROR(io::write_text_file(path, doc.dump(1) + "\n"));
  // A long service keeps only its newest requests in memory: its journal, written as requests
  // ended, has every one of them and stays (in the order they ended).
  if (controller.counts().received > controller.records().size()) return Status::Ok();
  return io::write_text_file(path + ".csv", csv.str());
}

void print_run_summary(const Controller& controller, std::ostream& out) {
  std::vector<double> lat;
  size_t sent = controller.records().size();
  for (const auto& r : controller.records()) {
    if (r.answered) lat.push_back(r.latency_ms());
  }
  out << std::fixed << std::setprecision(2);
  out << "requests: " << lat.size() << " answered of " << sent << "\n";
  const OutcomeCounts counts = controller.counts();
  if (counts.received != sent) out << "(the oldest requests were dropped from memory)\n";
  out << accounting_line(counts) << "\n";
  if (!lat.empty()) {
    out << "latency ms (from scheduled arrival): mean " << mean(lat) << "  p50 "
        << quantile(lat, 0.5) << "  p99 " << quantile(lat, 0.99) << "\n";
  }
  // Batches served (counted at their first row) by size: "batches: 40 (1: 10, 2: 20, 8: 10)".
  std::map<int, size_t> sizes;
  size_t batches = 0;
  bool batched = false;
  for (const auto& r : controller.records()) {
    batched = batched || r.config.batch > 1;
    if (r.dispatch_s > 0 && r.batch_row == 0) {
      ++sizes[r.batch];
      ++batches;
    }
  }
  if (batched) {
    out << "batches: " << batches << " (requests per batch: ";
    const char* sep = "";
    for (const auto& [n, count] : sizes) {
      out << sep << n << ": " << count;
      sep = ", ";
    }
    out << ")\n";
  }
  for (const auto& s : controller.switches()) {
    out << "switch at " << s.at_s << " s " << to_string(s.from) << " -> " << to_string(s.to)
        << ": drain " << s.drain_ms << " ms, reconfigure " << s.configure_ms << " ms";
    if (s.preparation != Preparation::kUnknown)
      out << " (kernels " << preparation_name(s.preparation) << ")";
    out << "\n";
  }
}

}  // namespace serf::serve
