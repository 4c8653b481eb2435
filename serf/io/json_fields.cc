#include "serf/io/json_fields.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <set>
#include <sstream>
#include <vector>

namespace serf::io {

using nlohmann::json;

std::string field_path(const std::string& where, const std::string& key) {
  return where.empty() ? key : where + "." + key;
}

std::string index_path(const std::string& where, size_t index) {
  return where + "[" + std::to_string(index) + "]";
}

Status refuse_unknown_fields(const nlohmann::json& obj, std::initializer_list<const char*> known,
                             const std::string& where) {
  if (!obj.is_object()) return Status::Ok();  // its reader says what it expected
  for (const auto& item : obj.items()) {
    bool found = false;
    for (const char* k : known) found = found || item.key() == k;
    if (found) continue;
    std::string list;
    for (const char* k : known) list += std::string(list.empty() ? "" : ", ") + k;
    return InvalidArgument((where.empty() ? "" : where + ": ") + "unknown field '" + item.key() +
                           "' (known: " + list + ")");
  }
  return Status::Ok();
}

namespace {

// Follows the parser through the document (a callback per event) to refuse a key that appears
// twice in one object, naming where: "tuples[2].mean_ms".
class DuplicateKeyCheck {
 public:
  bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
    using Event = json::parse_event_t;
    switch (event) {
      case Event::object_start:
        frames_.push_back({true, {}, {}, 0});
        break;
      case Event::array_start:
        frames_.push_back({false, {}, {}, 0});
        break;
      case Event::key: {
        Frame& top = frames_.back();
        top.key = parsed.get<std::string>();
        if (!top.keys.insert(top.key).second) throw DuplicateJsonKey{path()};
        break;
      }
      case Event::object_end:
      case Event::array_end:
        frames_.pop_back();
        next_element();
        break;
      case Event::value:
        next_element();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string key;  // objects: the key being read
    size_t index;     // arrays: the element being read
  };
  void next_element() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
  }
  std::string path() const {
    std::string out;
    for (const Frame& f : frames_)
      out = f.object ? field_path(out, f.key) : index_path(out, f.index);
    return out;
  }
  std::vector<Frame> frames_;
};

Status open_error(const std::string& path, int err) {
  switch (err) {
    case ENOENT:
      return NotFound(path + ": cannot open file: no such file");
    case ENOTDIR:
      return NotFound(path + ": cannot open file: a folder on its path is a file");
    case EACCES:
    case EPERM:
      return InvalidArgument(path + ": cannot open file: permission denied");
    default:
      return InvalidArgument(path + ": cannot open file: " + std::strerror(err));
  }
}

}  // namespace

json::parser_callback_t refuse_duplicate_keys() {
  // The callback is copied by the parser: the state it follows the document with is shared.
  auto check = std::make_shared<DuplicateKeyCheck>();
  return [check](int depth, json::parse_event_t event, json& parsed) {
    return (*check)(depth, event, parsed);
  };
}

StatusOr<json> parse_json(const std::string& text, const std::string& source) {
  try {
    return json::parse(text, refuse_duplicate_keys());
  } catch (const DuplicateJsonKey& d) {
    return InvalidArgument(source + ": key " + d.path +
                           " appears twice in one object; give each key once");
  } catch (const json::parse_error& e) {
    return InvalidArgument(source + ": malformed JSON at byte " + std::to_string(e.byte));
  } catch (const json::exception& e) {  // e.g. a number beyond double's range (1e999)
    return InvalidArgument(source + ": unreadable JSON: " + e.what());
  }
}

StatusOr<std::string> read_text_file(const std::string& path, uint64_t max_bytes) {
  // What the file is, is checked on the open descriptor before a byte is read: a device such as
  // /dev/zero never ends, and a FIFO blocks (O_NONBLOCK lets its open return, to be refused).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return open_error(path, errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return open_error(path, errno);
  if (S_ISDIR(st.st_mode)) return InvalidArgument(path + ": is a directory; give a file");
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgument(path + ": not a regular file (a pipe, socket or device); give a file");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    return InvalidArgument(path + ": " + std::to_string(size) + " bytes, more than the " +
                           std::to_string(max_bytes) + " an input file may hold");
  }
  std::string text(size, '\0');
  size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd, text.data() + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return InvalidArgument(path + ": read error: " + std::strerror(errno));
    if (n == 0) break;  // the file shrank while being read: what is there
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return text;
}

StatusOr<json> read_json_file(const std::string& path) {
  SERF_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  return parse_json(text, path);
}

namespace {

// `body` into `out`, then everything out to the file: a stream buffers, so a full disk (or
// /dev/full) showed only at the close, after the check, and the command said it wrote the file.
bool write_all(std::ofstream& out, const std::function<bool(std::ostream&)>& body) {
  const bool wrote = body(out) && out.flush();
  out.close();
  return wrote && !out.fail();
}

// A stream buffer over a file descriptor that keeps the errno of its first failed write, so the
// error names the cause (a full disk, a file size limit) instead of guessing.
class FdStreamBuf : public std::streambuf {
 public:
  explicit FdStreamBuf(int fd) : fd_(fd) { setp(buffer_, buffer_ + sizeof(buffer_)); }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type ch) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(ch, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(ch);
      pbump(1);
    }
    return traits_type::not_eof(ch);
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  bool drain() {
    if (error_ != 0) return false;
    const char* p = pbase();
    auto left = static_cast<size_t>(pptr() - pbase());
    while (left > 0) {
      const ssize_t n = ::write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error_ = n < 0 ? errno : EIO;
        return false;
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
    setp(buffer_, buffer_ + sizeof(buffer_));
    return true;
  }
  int fd_;
  int error_ = 0;
  char buffer_[1 << 16];
};

// The file a write makes, named only once it is whole. It starts unnamed (O_TMPFILE) in the
// target's folder, so a process stopped in the middle (SIGINT, SIGKILL, a dead node's teardown)
// leaves nothing behind; it was TARGET.tmp, left half-written. Where the file system has no
// unnamed files, a temporary named for this process, removed unless replace() renamed it.
class NewFile {
 public:
  explicit NewFile(const std::string& target) {
    const size_t slash = target.rfind('/');
    const std::string dir = slash == std::string::npos ? "."
                            : slash == 0               ? "/"
                                                       : target.substr(0, slash);
    temp_ = target + ".tmp." + std::to_string(::getpid());
    fd_ = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
    if (fd_ >= 0) return;
    if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
      error_ = errno;
      return;
    }
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd_ < 0) {
      error_ = errno;
      return;
    }
    named_ = true;
  }
  ~NewFile() {
    if (fd_ >= 0) ::close(fd_);
    if (named_) ::unlink(temp_.c_str());
  }
  NewFile(const NewFile&) = delete;
  NewFile& operator=(const NewFile&) = delete;
  int fd() const { return fd_; }
  int error() const { return error_; }
  // Names the whole file `target` (over what was there); 0 or the errno of the failure.
  int replace(const std::string& target) {
    if (!named_) {  // linkat cannot replace a file: the temporary name first, then rename
      const std::string self = "/proc/self/fd/" + std::to_string(fd_);
      int linked = ::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, temp_.c_str(), AT_SYMLINK_FOLLOW);
      if (linked != 0 && errno == EEXIST && ::unlink(temp_.c_str()) == 0)
        linked = ::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, temp_.c_str(), AT_SYMLINK_FOLLOW);
      if (linked != 0) return errno;
      named_ = true;
    }
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return errno;  // a network file system reports a failed write here
    if (::rename(temp_.c_str(), target.c_str()) != 0) return errno;
    named_ = false;
    return 0;
  }

 private:
  std::string temp_;
  int fd_ = -1;
  int error_ = 0;
  bool named_ = false;
};

// A device or a pipe (no rename). A pipe no process reads would block the open for good: opened
// without blocking first (ENXIO when no reader), that descriptor is held until the stream is open.
Status write_in_place(const std::string& path, const std::string& target, bool fifo,
                      const std::function<bool(std::ostream&)>& body) {
  int probe = -1;
  if (fifo) {
    probe = ::open(target.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (probe < 0) {
      return InvalidArgument(path + ": cannot write the pipe (" + std::strerror(errno) +
                             (errno == ENXIO ? ": no process reads it" : "") + ")");
    }
  }
  std::ofstream out(target, std::ios::binary);
  if (probe >= 0) ::close(probe);
  if (!out) return InvalidArgument(path + ": cannot write");
  if (!write_all(out, body))
    return InvalidArgument(path + ": write error (the device is full, or the pipe's reader left)");
  return Status::Ok();
}

}  // namespace

Status write_file_atomically(const std::string& path,
                             const std::function<bool(std::ostream&)>& body) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string target = path;
  const fs::file_status link = fs::symlink_status(path, ec);
  if (fs::is_symlink(link)) {
    target = fs::canonical(path, ec).string();
    if (ec) return InvalidArgument(path + ": a symlink to nowhere");
  }
  const fs::file_status st = fs::status(target, ec);
  if (fs::is_directory(st)) return InvalidArgument(path + ": is a directory, not a file");
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    return write_in_place(path, target, fs::is_fifo(st), body);
  }
  NewFile file(target);
  if (file.fd() < 0) {
    return InvalidArgument(path + ": cannot write file (" + std::strerror(file.error()) +
                           (file.error() == ENOENT ? ": its folder does not exist" : "") + ")");
  }
  {
    FdStreamBuf buf(file.fd());
    std::ostream out(&buf);
    if (!body(out) || !out.flush()) {
      return InvalidArgument(path + ": write error (" +
                             std::strerror(buf.error() != 0 ? buf.error() : EIO) +
                             "); the file was left as it was");
    }
  }
  const int err = file.replace(target);
  if (err != 0) {
    return InvalidArgument(path + ": cannot replace file (" + std::strerror(err) +
                           "); the file was left as it was");
  }
  return Status::Ok();
}

Status write_text_file(const std::string& path, const std::string& text) {
  return write_file_atomically(path, [&](std::ostream& out) {
    out << text;
    return static_cast<bool>(out);
  });
}

StatusOr<const json*> get_field(const json& obj, const std::string& key, const std::string& where) {
  if (!obj.is_object()) {
    return InvalidArgument((where.empty() ? std::string("document") : where) +
                           ": expected a JSON object");
  }
  auto it = obj.find(key);
  if (it == obj.end()) return InvalidArgument(field_path(where, key) + ": missing field");
  return &*it;
}

StatusOr<double> get_number(const json& obj, const std::string& key, const std::string& where) {
  SERF_ASSIGN_OR_RETURN(const json* v, get_field(obj, key, where));
  if (!v->is_number()) return InvalidArgument(field_path(where, key) + ": expected a number");
  const double x = v->get<double>();
  if (!std::isfinite(x)) return InvalidArgument(field_path(where, key) + ": not a finite number");
  return x;
}

StatusOr<int> get_int(const json& obj, const std::string& key, const std::string& where) {
  SERF_ASSIGN_OR_RETURN(const json* v, get_field(obj, key, where));
  if (v->is_number_integer()) {
    const auto x = v->get<long long>();
    if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max()) {
      return InvalidArgument(field_path(where, key) + ": integer out of range");
    }
    return static_cast<int>(x);
  }
  if (v->is_number_float()) {
    const double x = v->get<double>();
    if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 2e9) return static_cast<int>(x);
  }
  return InvalidArgument(field_path(where, key) + ": expected an integer");
}

StatusOr<std::string> get_string(const json& obj, const std::string& key,
                                 const std::string& where) {
  SERF_ASSIGN_OR_RETURN(const json* v, get_field(obj, key, where));
  if (!v->is_string()) return InvalidArgument(field_path(where, key) + ": expected a string");
  return v->get<std::string>();
}

StatusOr<bool> get_bool(const json& obj, const std::string& key, const std::string& where) {
  SERF_ASSIGN_OR_RETURN(const json* v, get_field(obj, key, where));
  if (!v->is_boolean()) {
    return InvalidArgument(field_path(where, key) + ": expected true or false, got " + v->dump());
  }
  return v->get<bool>();
}

StatusOr<const json*> get_array(const json& obj, const std::string& key, const std::string& where) {
  SERF_ASSIGN_OR_RETURN(const json* v, get_field(obj, key, where));
  if (!v->is_array()) return InvalidArgument(field_path(where, key) + ": expected an array");
  return v;
}

StatusOr<const json*> get_object(const json& obj, const std::string& key,
                                 const std::string& where) {
  SERF_ASSIGN_OR_RETURN(const json* v, get_field(obj, key, where));
  if (!v->is_object()) return InvalidArgument(field_path(where, key) + ": expected an object");
  return v;
}

}  // namespace serf::io
