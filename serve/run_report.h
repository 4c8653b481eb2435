#pragma once
// The report of an open-loop run, owned by the room whose data it is (the controller's records,
// switches and counts): the JSON and CSV files, the journal written as requests end, and the
// summary `serf serve` prints.

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "serf/core/status.h"
#include "serve/calibration.h"
#include "serve/controller.h"

namespace serf::serve {

// Measurements of an open-loop run: JSON at `path` and CSV at `path` + ".csv" (nothing when empty).
// `overloads`: the table scheduler's notes that the load exceeded every configuration of its table.
// `recalibrations`: the self-calibration's log (serf serve --recalibrate on), or null.
Status write_run_report(const Controller& controller, const std::string& path,
                        const std::string& model, const std::vector<OverloadNote>& overloads = {},
                        const std::vector<Recalibration>* recalibrations = nullptr);

// The run's CSV written as results arrive: one row per answered request at `path` + ".csv", each
// handed to the kernel whole as it comes (write(2)), so a controller killed outright (SIGKILL)
// still leaves what it measured. A failed or short write (a full disk, a file size limit) is found
// at once: the file is cut back to its last whole row, so it still parses, and every later add()
// is refused. write_run_report replaces the file at the end with every request in id order
// unless the oldest requests were dropped from memory (a long service): the journal then stays.
// Nothing when `path` is empty.
class RunJournal {
 public:
  static StatusOr<std::unique_ptr<RunJournal>> Open(const std::string& path);
  ~RunJournal();
  RunJournal(const RunJournal&) = delete;
  RunJournal& operator=(const RunJournal&) = delete;
  // False once a write failed (status() says why).
  bool add(const RequestRecord& record);
  const Status& status() const { return status_; }
  size_t rows() const { return rows_; }

 private:
  RunJournal(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  bool write_whole(const std::string& text);
  int fd_;
  std::string path_;
  long long good_bytes_ = 0;  // the file up to its last whole row
  size_t rows_ = 0;
  Status status_;
};
// The summary `serf serve` prints after a run: requests answered, the accounting line, latency
// (mean, p50, p99 from the scheduled arrival), batch sizes and each switch.
void print_run_summary(const Controller& controller, std::ostream& out);

}  // namespace serf::serve
