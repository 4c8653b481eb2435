// serf: one executable, subcommands per task. Parsing errors and user errors print one line on
// stderr and exit with 2 (3 where the question has no answer, e.g. an SLO no cluster meets).

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <string>

#include "cli/command.h"

namespace serf::cli {

const CommandRegistry::Entry* CommandRegistry::deepest_parsed() const {
  const Entry* best = nullptr;
  int best_depth = -1;
  for (const Entry& e : commands_) {
    if (!e.app->parsed()) continue;
    int depth = 0;
    for (const CLI::App* p = e.app->get_parent(); p != nullptr; p = p->get_parent()) ++depth;
    if (depth > best_depth) {
      best = &e;
      best_depth = depth;
    }
  }
  return best;
}

const std::function<Status()>* CommandRegistry::selected() const {
  const Entry* e = deepest_parsed();
  return e ? &e->run : nullptr;
}

bool CommandRegistry::selected_uses_mpi() const {
  const Entry* e = deepest_parsed();
  return e != nullptr && e->uses_mpi && e->uses_mpi();
}

Status out_of_memory() {
  std::string limit;
  struct rlimit as {};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    limit = " under this process's address-space limit of " + std::to_string(as.rlim_cur >> 20) +
            " MiB (ulimit -v)";
  }
  return InvalidArgument("out of memory: an allocation failed" + limit +
                         "; give smaller inputs or more memory");
}

Status run_guarded(const std::function<Status()>& run) {
  try {
    return run();
  } catch (const std::bad_alloc&) {
    return out_of_memory();
  } catch (const std::exception& e) {
    return Internal(e.what());
  }
}

namespace {

// Under mpirun every rank parses the same flags: the launcher's rank variable lets one of them
// (rank 0) print a parse error, so the user reads it once. MPI is not started yet at parse time.
bool quiet_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return std::string(v) != "0";
  }
  return false;
}

// Why parsing failed when a subcommand is missing or unknown: CLI11 would say "A subcommand is
// required" (for `serf frobnicate`, `serf ''`, `serf --frob` and `serf model` alike). Walks the
// subcommand words (`serf model frobnicate`); "" when they are all known and the last takes no
// subcommand.
std::string unknown_subcommand(const CLI::App& app, int argc, char** argv) {
  const CLI::App* at = &app;
  auto expected = [&at] {
    std::string names;
    for (const CLI::App* s : at->get_subcommands([](const CLI::App*) { return true; }))
      names += (names.empty() ? "" : ", ") + s->get_name();
    return names;
  };
  auto path = [&at, &app] { return at == &app ? std::string("serf") : "serf " + at->get_name(); };
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    const auto subs = at->get_subcommands([](const CLI::App*) { return true; });
    if (subs.empty()) return "";  // the words from here are the subcommand's flags and values
    if (!word.empty() && word[0] == '-') {
      return "unknown option '" + word + "' before the subcommand; " + path() +
             " takes one of: " + expected();
    }
    const CLI::App* next = nullptr;
    for (const CLI::App* s : subs) {
      if (s->check_name(word)) next = s;
    }
    if (next == nullptr) {
      return "unknown subcommand '" + (at == &app ? "" : at->get_name() + " ") + word +
             "'; expected one of: " + expected();
    }
    at = next;
  }
  if (at->get_subcommands([](const CLI::App*) { return true; }).empty()) return "";
  return path() + " needs a subcommand: one of " + expected();
}

// The first option given an empty value ("--weights ''") in the parsed command chain, or "".
// An empty value is never a choice: taken as "not given" it would run with the default silently
// (--weights '' ran with seeded weights), taken as a name it fails later without naming the flag.
std::string empty_value_flag(const CLI::App& app) {
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_expected_min() == 0 || opt->count() == 0) continue;  // flags take no value
    for (const std::string& v : opt->results()) {
      if (v.empty()) return opt->get_name();
    }
  }
  for (const CLI::App* sub : app.get_subcommands()) {
    std::string flag = empty_value_flag(*sub);
    if (!flag.empty()) return flag;
  }
  return "";
}

// The standard descriptors a command may find closed (`serf plan ... >&-`): the first file it
// opened then took that number, and what it printed went into that file (a run's CSV journal
// took stdout's lines). Each closed one is held open on /dev/null. A closed standard output is
// refused (its results would be lost): false, the line said.
// A pipe whose reader left (`serf ... | head -1`) is a write error the command reports (exit 4),
// not a SIGPIPE that kills it mid-way without a word.
bool hold_standard_descriptors() {
  std::signal(SIGPIPE, SIG_IGN);
  bool stdout_closed = false;
  for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; ++fd) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    stdout_closed = stdout_closed || fd == STDOUT_FILENO;
    // The lowest free number: this one, as the lower ones are open (or held) by now.
    (void)open("/dev/null", fd == STDIN_FILENO ? O_RDONLY : O_WRONLY);
  }
  if (stdout_closed) {
    std::cerr << "serf: error: standard output is closed (>&-): the results would be lost; send "
                 "it to a file, or to /dev/null to discard it\n";
  }
  return !stdout_closed;
}

// Why standard output took no more: one more byte is tried for the errno (EPIPE: its reader left,
// as `| head -1` does; ENOSPC: a full disk or /dev/full).
std::string stdout_error() {
  if (write(STDOUT_FILENO, "\n", 1) == 1) return "a write failed";
  return std::strerror(errno);
}

// SIGINT, SIGTERM or SIGHUP stops a command that runs without MPI (the runtime's commands handle
// them themselves: docs/runtime.md). It says so in one line and ends by the signal, as the shell
// expects (exit status 128 + n); an output file being written is unnamed until whole
// (io::write_file_atomically), so none is left half-written.
extern "C" void on_stop_signal(int signal) {
  const char* name = signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "SIGHUP";
  char line[160] = "serf: error: stopped by ";
  std::strncat(line, name, 16);
  std::strncat(line, " before the end; no output file is left half-written\n", 100);
  (void)!write(STDERR_FILENO, line, std::strlen(line));
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

// The one error line a command prints, its control characters escaped (serf::one_line).
void print_error(const std::string& message) {
  std::cerr << "serf: error: " << one_line(message) << "\n";
}

void handle_stop_signals() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, on_stop_signal);
}

}  // namespace

}  // namespace serf::cli

namespace {

// A request's buffers (the body, its tensor, the answer) are reused from the heap instead of
// being mapped fresh and faulted in page by page. glibc serves blocks over 128 KiB-32 MiB with
// mmap and returns freed heap tops to the kernel, so every 618 KB imagenet1k request touched
// ~450 new pages: on this VM (a paravirtualized guest) that was 2.6-6.8 ms (p10-p90) of parsing
// per HTTP request before its dispatch, against 0.14-0.31 ms with the memory kept (measured on
// `serf serve` with `serf load --binary` at 10 requests/s; docs/serving.md). The cost is that a
// process keeps its peak heap instead of shrinking after it.
void keep_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest: blocks up to 32 MiB from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);   // never hand back a free heap top under 1 GiB
#endif
}

// Linux may end a normal thread's sleep up to its timer slack (50 us by default) late, and every
// wait of the runtime is a short sleep in a poll loop (an idle slot polling for work, the
// controller sleeping until the next arrival or answer). 1 us of slack instead; the threads
// created later inherit it.
void precise_sleeps() { prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); }

}  // namespace

int main(int argc, char** argv) {
  if (!serf::cli::hold_standard_descriptors()) return 2;
  keep_freed_memory();
  precise_sleeps();
  CLI::App app{
      "SERF serves deep neural networks on clusters and predicts, with a queueing model, which\n"
      "parallelism configuration (c requests at once, K nodes per request, T threads per node)\n"
      "gives the lowest mean latency at each load. Run `serf SUBCOMMAND --help` for details."};
  app.name("serf");
  app.require_subcommand(1, 1);
  app.fallthrough(false);

  serf::cli::CommandRegistry registry;
  serf::cli::register_queue_commands(app, registry);
  serf::cli::register_engine_commands(app, registry);
  serf::cli::register_model_commands(app, registry);
  serf::cli::register_mpi_commands(app, registry);
  serf::cli::register_sim_commands(app, registry);
  serf::cli::register_validate_commands(app, registry);
  serf::cli::register_load_commands(app, registry);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Every rank parsed the same words and failed alike: rank 0 says it and its exit code is
    // mpirun's. The other ranks exit 0: a rank exiting non-zero first makes mpirun kill the rest,
    // and on a loaded machine rank 0 (still loading) was killed before its line.
    if (serf::cli::quiet_rank()) return 0;
    std::string what = serf::cli::unknown_subcommand(app, argc, argv);
    if (what.empty()) what = e.what();
    serf::cli::print_error(what + " (see serf --help)");
    return 2;
  } catch (const std::bad_alloc&) {
    if (serf::cli::quiet_rank()) return 0;  // as above: rank 0 reports it
    const serf::Status oom = serf::cli::out_of_memory();
    serf::cli::print_error(oom.message());
    return oom.exit_code();
  }

  if (const std::string flag = serf::cli::empty_value_flag(app); !flag.empty()) {
    if (serf::cli::quiet_rank()) return 0;  // as above: rank 0 reports it
    serf::cli::print_error(flag + ": the value is empty; give one (see serf SUBCOMMAND --help)");
    return 2;
  }
  const auto* run = registry.selected();
  if (run == nullptr) {
    serf::cli::print_error("no subcommand given (see serf --help)");
    return 2;
  }
  // A command without MPI launched by mpirun on several ranks (`mpirun -n 2 serf predict`): rank 0
  // runs it, the others exit 0 at once without a word (docs/runtime.md). Run on every rank, each
  // printed its own answer and wrote the same --out file, and one exiting non-zero made mpirun
  // kill the other, sometimes before its line.
  if (serf::cli::quiet_rank() && !registry.selected_uses_mpi()) return 0;
  // A file past the size limit (ulimit -f) is a write error the command reports, not a crash.
  std::signal(SIGXFSZ, SIG_IGN);
  if (!registry.selected_uses_mpi()) serf::cli::handle_stop_signals();
  serf::Status status = serf::cli::run_guarded(*run);
  // Results printed to a full disk or a closed pipe are lost: say so instead of exiting 0.
  if (status.ok() && (!std::cout.flush() || std::fflush(stdout) != 0 || std::ferror(stdout))) {
    status = serf::Unavailable("cannot write the results to standard output (" +
                               serf::cli::stdout_error() + "); what it printed is incomplete");
  }
  if (!status.ok()) {
    // Under mpirun every rank returns the same Status (launch_runtime agrees on it): rank 0 says
    // it.
    if (!serf::cli::quiet_rank()) serf::cli::print_error(status.message());
    return status.exit_code();
  }
  return 0;
}
