// io::write_file_atomically: a file is whole or not there, and a failed write says why.
#include <dirent.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "serf/io/json_fields.h"

using namespace serf;

namespace {

struct TempDir {
  TempDir() {
    char name[] = "/tmp/serf_io_write_XXXXXX";
    REQUIRE(mkdtemp(name) != nullptr);
    path = name;
  }
  ~TempDir() { (void)std::system(("rm -rf " + path).c_str()); }
  std::set<std::string> entries() const {
    std::set<std::string> names;
    DIR* d = opendir(path.c_str());
    while (dirent* e = d ? readdir(d) : nullptr) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") names.insert(n);
    }
    if (d) closedir(d);
    return names;
  }
  std::string path;
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("a file is written whole, with nothing beside it", "[io][write]") {
  TempDir dir;
  const std::string out = dir.path + "/t.json";
  REQUIRE(io::write_text_file(out, "first\n").ok());
  REQUIRE(io::write_text_file(out, std::string(300000, 'x')).ok());  // past one buffer
  CHECK(read_all(out) == std::string(300000, 'x'));
  CHECK(dir.entries() == std::set<std::string>{"t.json"});
}

TEST_CASE("a write that fails leaves the old file, names why, and leaves no temporary",
          "[io][write]") {
  TempDir dir;
  const std::string out = dir.path + "/t.json";
  REQUIRE(io::write_text_file(out, "old\n").ok());
  // The body gives up half-way (a formatter's error).
  Status st = io::write_file_atomically(out, [](std::ostream& o) {
    o << std::string(100000, 'y');
    return false;
  });
  CHECK_FALSE(st.ok());
  CHECK(read_all(out) == "old\n");
  // The file size limit (ulimit -f): the write fails with EFBIG, and the line says so.
  struct rlimit saved {};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &saved) == 0);
  auto* previous = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 4096;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  st = io::write_text_file(out, std::string(100000, 'z'));
  REQUIRE(setrlimit(RLIMIT_FSIZE, &saved) == 0);
  std::signal(SIGXFSZ, previous);
  REQUIRE_FALSE(st.ok());
  CHECK_THAT(st.message(), Catch::Contains(out + ": write error (File too large)") &&
                               Catch::Contains("the file was left as it was"));
  CHECK(read_all(out) == "old\n");
  CHECK(dir.entries() == std::set<std::string>{"t.json"});
  // A folder that does not exist.
  st = io::write_text_file(dir.path + "/no/t.json", "x");
  REQUIRE_FALSE(st.ok());
  CHECK_THAT(st.message(),
             Catch::Contains("cannot write file") && Catch::Contains("its folder does not exist"));
}

TEST_CASE("a process killed in the middle of a write leaves nothing behind", "[io][write]") {
  // It left TARGET.tmp, half-written, for good (SIGINT or SIGKILL while a large file was written).
  TempDir dir;
  const std::string out = dir.path + "/w.safetensors";
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    (void)io::write_file_atomically(out, [](std::ostream& o) {
      o << std::string(1 << 20, 'w');
      o.flush();
      std::raise(SIGKILL);
      return true;
    });
    std::_Exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
  CHECK(dir.entries().empty());
}
