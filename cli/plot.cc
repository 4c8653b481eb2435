#include "cli/plot.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cli/flags.h"

extern char** environ;

namespace serf::cli {

namespace {
constexpr const char* kPython = "/usr/bin/python3";
}

Status check_plot_path(const std::string& flag, const std::string& png,
                       const std::vector<InputFile>& outputs) {
  if (png.size() < 5 || png.compare(png.size() - 4, 4, ".png") != 0) {
    return InvalidArgument(flag + ": " + png + " must name a .png file");
  }
  SERF_RETURN_IF_ERROR(check_output_path(flag, png));
  return check_distinct_outputs(flag, png, outputs);
}

Status run_plot_script(const std::string& script, const std::vector<std::string>& args) {
  const std::string path = std::string(SERF_SCRIPTS_DIR) + "/" + script;
  if (access(kPython, X_OK) != 0) {
    return Unavailable(std::string("--plot: ") + kPython +
                       " is missing; install python3-matplotlib (scripts/setup)");
  }
  if (access(path.c_str(), R_OK) != 0) {
    return Unavailable("--plot: " + path + " is missing (plots need the source tree's scripts/)");
  }
  std::vector<std::string> argv_s = {kPython, path};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, kPython, nullptr, nullptr, argv.data(), environ);
  if (rc != 0)
    return Unavailable(std::string("--plot: cannot start ") + kPython + ": " + std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      return Unavailable("--plot: waitpid failed: " + std::string(std::strerror(errno)));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Unavailable("--plot: " + script + " failed (exit " +
                       std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                       "); the JSON output was written");
  }
  return Status::Ok();
}

}  // namespace serf::cli
