// A build without gRPC (SERF_WITH_GRPC=OFF, or libgrpc++ missing): --protocol grpc says so.
#include "serve/load/grpc_channel.h"

namespace serf::serve::load {

namespace {
Status missing() {
  return InvalidArgument(
      "--protocol grpc: this serf was built without gRPC (install libgrpc++-dev, "
      "protobuf-compiler-grpc with scripts/setup and rebuild); use --protocol http");
}
}  // namespace

StatusOr<ServedModel> grpc_model_metadata(const Endpoint&, const std::string&, double) {
  return missing();
}

StatusOr<std::unique_ptr<LoadChannel>> make_grpc_channel(const Endpoint&, const ServedModel&,
                                                         const std::vector<float>&,
                                                         const LoadOptions&) {
  return missing();
}

}  // namespace serf::serve::load
