// A KServe v2 gRPC client for the front-end tests under mpiexec:
//   grpc_infer_client HOST:PORT MODEL INPUT.safetensors OUT.json
// sends the input ("input", [1, C, H, W]) once as raw_input_contents and once as fp32_contents,
// and writes both answers' outputs to OUT.json as {"raw": [...], "typed": [...]}; exit 1 on an
// error status.
#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kserve_v2.grpc.pb.h"

namespace {

// The tensor "input" of a safetensors file: its shape and float32 values.
bool read_input(const std::string& path, std::vector<int64_t>* shape, std::vector<float>* values) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string file = ss.str();
  if (file.size() < 8) return false;
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  auto header = nlohmann::json::parse(file.substr(8, n));
  const auto& t = header.at("input");
  *shape = t.at("shape").get<std::vector<int64_t>>();
  const auto begin = t.at("data_offsets")[0].get<size_t>(),
             end = t.at("data_offsets")[1].get<size_t>();
  values->resize((end - begin) / 4);
  std::memcpy(values->data(), file.data() + 8 + n + begin, end - begin);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: grpc_infer_client HOST:PORT MODEL INPUT.safetensors OUT.json\n";
    return 2;
  }
  std::vector<int64_t> shape;
  std::vector<float> values;
  if (!read_input(argv[3], &shape, &values)) {
    std::cerr << argv[3] << ": cannot read\n";
    return 2;
  }
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(argv[1], grpc::InsecureChannelCredentials()));
  nlohmann::json out;
  for (bool raw : {true, false}) {
    inference::ModelInferRequest req;
    req.set_model_name(argv[2]);
    auto* in = req.add_inputs();
    in->set_name("input");
    in->set_datatype("FP32");
    for (int64_t d : shape) in->add_shape(d);
    if (raw) {
      req.add_raw_input_contents(
          std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
    } else {
      for (float v : values) in->mutable_contents()->add_fp32_contents(v);
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    inference::ModelInferResponse res;
    grpc::Status st = stub->ModelInfer(&ctx, req, &res);
    if (!st.ok()) {
      std::cerr << "ModelInfer: " << st.error_code() << " " << st.error_message() << "\n";
      return 1;
    }
    const std::string& bytes = res.raw_output_contents(0);
    std::vector<float> output(bytes.size() / 4);
    std::memcpy(output.data(), bytes.data(), bytes.size());
    out[raw ? "raw" : "typed"] = output;
  }
  std::ofstream(argv[4]) << out.dump() << "\n";
  return 0;
}
