#pragma once
// PNG plots of a command's JSON output, drawn by the matplotlib scripts under scripts/ with
// Debian's /usr/bin/python3 (the first python3 on PATH may lack matplotlib).

#include <string>
#include <vector>

#include "cli/flags.h"
#include "serf/core/status.h"

namespace serf::cli {

// InvalidArgument naming `flag` unless `png` ends in .png, its directory exists and is writable,
// and it is none of the command's other `outputs` (the JSON the plot reads, its CSV): checked
// before a command does its work, so a typo does not cost the run.
Status check_plot_path(const std::string& flag, const std::string& png,
                       const std::vector<InputFile>& outputs = {});

// Runs `/usr/bin/python3 <scripts dir>/<script> args...` and waits. Its output goes to this
// process's stdout/stderr; a non-zero exit is an error naming the script.
Status run_plot_script(const std::string& script, const std::vector<std::string>& args);

}  // namespace serf::cli
