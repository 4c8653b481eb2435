// The gRPC bad-request corpus (issue 14), run as an outside client would, against `serf serve
// --emulate --grpc` under mpiexec (tests/serve/grpc_bad_requests.sh starts it):
//   grpc_bad_requests HOST:PORT fixed   the tiny model's shape [1, 3, 12, 12], one unit whose
//                                       requests take 250 ms, --max-queue 3, --max-body-mb 1
//   grpc_bad_requests HOST:PORT any     emulated nodes without --model (an input of any shape)
// Every bad ModelInfer must end with the right status code and a message naming what is wrong
// (never OK, never a crash), and a good request must be answered right after each. The last line
// counts what was sent, for the script to compare with rank 0's accounting and /metrics:
//   sent VALID valid, UNAVAILABLE unavailable, INVALID invalid, UNCOUNTED uncounted
// (valid: calls that reached the controller; unavailable: of those, refused for a full queue;
// invalid: refused by SERF's checks; uncounted: refused by gRPC before any handler runs).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kserve_v2.grpc.pb.h"

namespace {

using grpc::StatusCode;
using Request = inference::ModelInferRequest;
using Response = inference::ModelInferResponse;

std::unique_ptr<inference::GRPCInferenceService::Stub> stub;
bool any_shape = false;
int cases = 0, valid = 0, unavailable = 0, invalid = 0, uncounted = 0;
std::vector<std::string> failures;

const std::vector<int64_t> kShape = {1, 3, 12, 12};
constexpr int64_t kElements = 432;
constexpr int64_t kHuge = int64_t{1} << 62;

void fail(const std::string& what, const std::string& why) {
  failures.push_back(what + ": " + why);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string raw_of(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// A good request: the tiny model's input as raw_input_contents (in `any` mode the same shape).
Request good(bool raw = true) {
  Request req;
  req.set_model_name(any_shape ? "emulated-small" : "tiny");
  auto* in = req.add_inputs();
  in->set_name("input");
  in->set_datatype("FP32");
  for (int64_t d : kShape) in->add_shape(d);
  std::vector<float> values(kElements);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.01f * static_cast<float>(i % 97);
  if (raw) {
    req.add_raw_input_contents(raw_of(values));
  } else {
    for (float v : values) in->mutable_contents()->add_fp32_contents(v);
  }
  return req;
}

grpc::Status call(const Request& req, Response* res, double deadline_s = 60) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(deadline_s * 1000)));
  return stub->ModelInfer(&ctx, req, res);
}

// A call in flight on gRPC's callback client API; wait() returns its status.
struct Pending {
  grpc::ClientContext ctx;
  Request req;
  Response res;
  grpc::Status status;
  bool done = false;
  std::mutex mu;
  std::condition_variable cv;

  void start(double deadline_s) {
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(deadline_s * 1000)));
    stub->async()->ModelInfer(&ctx, &req, &res, [this](grpc::Status s) {
      std::lock_guard<std::mutex> lock(mu);
      status = std::move(s);
      done = true;
      cv.notify_all();
    });
  }
  grpc::Status wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [this] { return done; });
    return status;
  }
};

std::unique_ptr<Pending> send(Request req, double deadline_s = 60) {
  auto p = std::make_unique<Pending>();
  p->req = std::move(req);
  p->start(deadline_s);
  return p;
}

void check_answer(const std::string& what, const grpc::Status& st, const Response& res,
                  const std::string& id = "") {
  if (!st.ok()) {
    fail(what, "status " + std::to_string(st.error_code()) + " " + st.error_message());
    return;
  }
  const bool emulated =
      res.parameters().count("emulated") && res.parameters().at("emulated").bool_param();
  if (res.outputs_size() != 1 || res.outputs(0).name() != "output" || !emulated ||
      res.raw_output_contents_size() != 1 || res.id() != id) {
    fail(what, "OK but not the emulated answer: " + res.ShortDebugString().substr(0, 200));
  }
}

// A good request right after a bad one is answered as usual.
void still_serving(const std::string& after) {
  Response res;
  ++valid;
  check_answer("a good request after " + after, call(good(), &res), res);
}

// One bad call: the status code `code` and a message holding every word of `words`; counted as
// SERF's invalid requests unless gRPC itself refuses it (`counted` false).
void expect(const std::string& what, const Request& req, StatusCode code,
            const std::vector<std::string>& words, bool counted = true) {
  ++cases;
  Response res;
  const grpc::Status st = call(req, &res);
  if (code == StatusCode::INVALID_ARGUMENT || code == StatusCode::RESOURCE_EXHAUSTED) {
    (counted ? invalid : uncounted) += 1;
  }
  if (st.error_code() != code) {
    fail(what, "status " + std::to_string(st.error_code()) + " (" + st.error_message() +
                   "), expected " + std::to_string(code));
  } else {
    for (const std::string& w : words) {
      if (lower(st.error_message()).find(lower(w)) == std::string::npos) {
        fail(what, "the message \"" + st.error_message() + "\" does not name \"" + w + "\"");
      }
    }
  }
  if (std::getenv("VERBOSE")) std::cout << what << ": " << st.error_message() << "\n";
  still_serving(what);
}

void set_param(google::protobuf::Map<std::string, inference::InferParameter>* map,
               const std::string& key, const inference::InferParameter& p) {
  (*map)[key] = p;
}

inference::InferParameter int_param(int64_t v) {
  inference::InferParameter p;
  p.set_int64_param(v);
  return p;
}

void names_and_types() {
  const auto bad = StatusCode::INVALID_ARGUMENT;
  Request r = good();
  r.set_model_name("nope");
  expect("unknown model", r, bad, {"unknown model", "nope"});
  expect("an empty request", Request(), bad, {"unknown model"});
  r = good();
  r.set_model_version("7");
  expect("unknown version", r, bad, {"unknown version", "7"});
  r = good();
  r.clear_inputs();
  r.clear_raw_input_contents();
  expect("no input", r, bad, {"inputs", "got 0"});
  r = good();
  r.mutable_inputs(0)->set_name("image");
  expect("unknown input name", r, bad, {"unknown input", "image"});
  r = good();
  r.mutable_inputs(0)->set_datatype("INT32");
  expect("datatype INT32", r, bad, {"datatype INT32", "FP32"});
  r = good();
  r.mutable_inputs(0)->set_datatype("");
  expect("no datatype", r, bad, {"datatype", "FP32"});
  r = good();
  *r.add_inputs() = r.inputs(0);
  expect("two inputs", r, bad, {"inputs", "got 2"});
  r = good();
  r.add_raw_input_contents(r.raw_input_contents(0));
  expect("two raw_input_contents for one input", r, bad, {"raw_input_contents", "2 entries"});
}

void shapes_and_sizes() {
  const auto bad = StatusCode::INVALID_ARGUMENT;
  // Without --model a shape is checked against the values given: the first two are fine there.
  const std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
      {"a wrong shape", {1, 3, 12, 13}},
      {"a shape of three dimensions", {3, 12, 12}},
      {"no shape", {}},
      {"a negative dimension", {-1, 3, 12, 12}},
      {"a dimension of 2^62", {1, 3, 12, kHuge}},
      {"dimensions whose product overflows", {kHuge, kHuge, 4, 1}},
      {"a dimension of INT64_MIN", {std::numeric_limits<int64_t>::min(), 1, 1, 1}},
  };
  for (size_t i = any_shape ? 2 : 0; i < shapes.size(); ++i) {
    const auto& [what, shape] = shapes[i];
    Request r = good();
    r.mutable_inputs(0)->clear_shape();
    for (int64_t d : shape) r.mutable_inputs(0)->add_shape(d);
    expect(what, r, bad, {"input"});
    if (any_shape && shape.size() == 4) {  // the huge ones with no values at all
      r.clear_raw_input_contents();
      expect(what + ", no values", r, bad, {"input"});
    }
  }
  std::string raw = good().raw_input_contents(0);
  for (size_t bytes : {size_t{0}, raw.size() - 4, raw.size() + 4, raw.size() - 1}) {
    Request r = good();
    r.set_raw_input_contents(0, std::string(bytes, '\0'));
    expect("raw_input_contents of " + std::to_string(bytes) + " bytes", r, bad,
           {"raw_input_contents", std::to_string(bytes) + " bytes"});
  }
  Request r = good();
  r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1.0f);
  expect("both raw and typed contents", r, bad, {"both raw and typed"});
  r = good(false);
  r.mutable_inputs(0)->mutable_contents()->mutable_fp32_contents()->RemoveLast();
  expect("one fp32_contents too few", r, bad, {"431 fp32_contents"});
  r = good(false);
  r.mutable_inputs(0)->mutable_contents()->clear_fp32_contents();
  for (int i = 0; i < kElements; ++i) r.mutable_inputs(0)->mutable_contents()->add_int_contents(1);
  expect("int_contents for an FP32 input", r, bad, {"int_contents", "FP32"});
  r = good();
  r.mutable_inputs(0)->set_datatype("FP32");
  std::vector<float> nan(kElements, 0.5f);
  nan[7] = std::nanf("");
  r.set_raw_input_contents(0, raw_of(nan));
  expect("a NaN in raw_input_contents", r, bad, {"NaN"});
  r = good(false);
  r.mutable_inputs(0)->mutable_contents()->set_fp32_contents(3, INFINITY);
  expect("an infinity in fp32_contents", r, bad, {"infinity"});
}

void outputs_and_parameters() {
  const auto bad = StatusCode::INVALID_ARGUMENT;
  Request r = good();
  r.add_outputs()->set_name("logits");
  expect("an unknown output", r, bad, {"unknown output", "logits"});
  r = good();
  r.add_outputs()->set_name("output");
  r.add_outputs()->set_name("output");
  expect("two outputs", r, bad, {"outputs", "one output"});
  std::vector<std::pair<std::string, inference::InferParameter>> ks;
  ks.emplace_back("0", int_param(0));
  ks.emplace_back("-1", int_param(-1));
  ks.emplace_back("2^62", int_param(kHuge));
  inference::InferParameter p;
  p.set_double_param(1.5);
  ks.emplace_back("1.5", p);
  p.set_string_param("3");
  ks.emplace_back("\"3\"", p);
  p.set_uint64_param(std::numeric_limits<uint64_t>::max());
  ks.emplace_back("2^64-1", p);
  p.set_bool_param(true);
  ks.emplace_back("true", p);
  for (const auto& [text, param] : ks) {
    r = good();
    auto* o = r.add_outputs();
    o->set_name("output");
    set_param(o->mutable_parameters(), "classification", param);
    expect("classification " + text, r, bad, {"classification"});
  }
  std::vector<std::pair<std::string, inference::InferParameter>> timeouts;
  timeouts.emplace_back("-1", int_param(-1));
  p.set_string_param("soon");
  timeouts.emplace_back("\"soon\"", p);
  p.set_double_param(std::nan(""));
  timeouts.emplace_back("NaN", p);
  p.set_double_param(INFINITY);
  timeouts.emplace_back("infinity", p);
  for (const auto& [text, param] : timeouts) {
    r = good();
    set_param(r.mutable_parameters(), "timeout", param);
    expect("timeout " + text, r, bad, {"timeout"});
  }
  Response res;
  r = good(false);
  r.set_id("request-17");
  ++cases;
  ++valid;
  check_answer("a typed request with an id", call(r, &res), res, "request-17");
}

void other_methods() {
  ++cases;
  ++invalid;
  grpc::ClientContext c1, c2;
  inference::ModelMetadataRequest mm;
  mm.set_name("nope");
  inference::ModelMetadataResponse meta;
  grpc::Status st = stub->ModelMetadata(&c1, mm, &meta);
  if (st.error_code() != StatusCode::INVALID_ARGUMENT ||
      st.error_message().find("nope") == std::string::npos) {
    fail("ModelMetadata of an unknown model",
         std::to_string(st.error_code()) + " " + st.error_message());
  }
  ++cases;
  ++invalid;
  inference::ModelReadyRequest mr;
  mr.set_name(std::string("ti\0ny", 5));
  inference::ModelReadyResponse ready;
  st = stub->ModelReady(&c2, mr, &ready);
  if (st.error_code() != StatusCode::INVALID_ARGUMENT) {
    fail("ModelReady of a name with a NUL",
         std::to_string(st.error_code()) + " " + st.error_message());
  }
  still_serving("metadata of unknown models");
}

// Messages over --max-body-mb (1 MiB): refused with RESOURCE_EXHAUSTED naming the limit and
// counted, whatever their size (until session 26 gRPC refused those over twice the limit itself,
// uncounted).
void oversized() {
  Request r = good();
  r.set_raw_input_contents(0, std::string((1u << 20) + (1u << 19), '\0'));
  expect("a message of 1.5 MiB (--max-body-mb 1)", r, StatusCode::RESOURCE_EXHAUSTED,
         {"--max-body-mb 1", "bytes"});
  r.set_raw_input_contents(0, std::string(3u << 20, '\0'));
  expect("a message of 3 MiB (over gRPC's old limit of 2 MiB)", r, StatusCode::RESOURCE_EXHAUSTED,
         {"--max-body-mb 1", "bytes"});
}

// Fills the one unit (250 ms a request): one running and two queued, so a request sent now waits
// at least 550 ms (the margins allow for a loaded machine).
std::vector<std::unique_ptr<Pending>> fill() {
  std::vector<std::unique_ptr<Pending>> fillers;
  for (int i = 0; i < 3; ++i) fillers.push_back(send(good()));
  valid += 3;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  return fillers;
}

void drain(std::vector<std::unique_ptr<Pending>>* fillers, const std::string& what) {
  for (auto& f : *fillers) check_answer(what + " (a request queued before it)", f->wait(), f->res);
  fillers->clear();
}

// Timing cases on the `fixed` server: a deadline (and a "timeout" parameter) that expires while
// the request is queued, a client that cancels while its request is queued, and many calls at
// once at --max-queue 3.
void queueing() {
  auto fillers = fill();
  ++cases;
  ++valid;
  Response res;
  grpc::Status st = call(good(), &res, 0.35);
  if (st.error_code() != StatusCode::DEADLINE_EXCEEDED) {
    fail("a deadline of 350 ms behind 550 ms of work",
         std::to_string(st.error_code()) + " " + st.error_message());
  }
  drain(&fillers, "a deadline that expired");
  still_serving("a deadline that expired");

  fillers = fill();
  Request r = good();
  set_param(r.mutable_parameters(), "timeout", int_param(350000));
  ++cases;
  ++valid;
  st = call(r, &res);
  if (st.error_code() != StatusCode::DEADLINE_EXCEEDED ||
      st.error_message().find("timeout") == std::string::npos) {
    fail("a timeout of 350 ms behind 550 ms of work",
         std::to_string(st.error_code()) + " " + st.error_message());
  }
  drain(&fillers, "a timeout parameter");
  still_serving("a timeout parameter that expired");

  fillers = fill();
  auto cancelled = send(good());
  ++cases;
  ++valid;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  cancelled->ctx.TryCancel();
  st = cancelled->wait();
  if (st.error_code() != StatusCode::CANCELLED) {
    fail("a client that cancels while queued",
         std::to_string(st.error_code()) + " " + st.error_message());
  }
  drain(&fillers, "a cancelled call");
  still_serving("a cancelled call");

  std::vector<std::unique_ptr<Pending>> many;
  for (int i = 0; i < 64; ++i) many.push_back(send(good()));
  int ok = 0, refused = 0;
  for (auto& p : many) {
    st = p->wait();
    ++cases;
    ++valid;
    if (st.ok()) {
      ++ok;
    } else if (st.error_code() == StatusCode::UNAVAILABLE &&
               st.error_message().find("queue of unit") != std::string::npos) {
      ++refused;
    } else {
      fail("64 calls at once, --max-queue 3",
           std::to_string(st.error_code()) + " " + st.error_message());
    }
  }
  unavailable += refused;
  if (ok < 1 || refused < 1) {
    fail("64 calls at once, --max-queue 3",
         std::to_string(ok) + " answered, " + std::to_string(refused) + " refused");
  }
  still_serving("64 calls at once");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::string(argv[2]) != "fixed" && std::string(argv[2]) != "any")) {
    std::cerr << "usage: grpc_bad_requests HOST:PORT fixed|any\n";
    return 2;
  }
  any_shape = std::string(argv[2]) == "any";
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateCustomChannel(argv[1], grpc::InsecureChannelCredentials(), args));
  still_serving("nothing");
  if (any_shape) {
    shapes_and_sizes();
  } else {
    names_and_types();
    shapes_and_sizes();
    outputs_and_parameters();
    other_methods();
    oversized();
    queueing();
  }
  for (const std::string& f : failures) std::cout << "FAIL " << f << "\n";
  std::cout << cases << " bad-request cases, " << failures.size() << " failures\n";
  std::cout << "sent " << valid << " valid, " << unavailable << " unavailable, " << invalid
            << " invalid, " << uncounted << " uncounted\n";
  return failures.empty() ? 0 : 1;
}
