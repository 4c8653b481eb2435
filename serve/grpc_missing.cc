// Builds without gRPC (SERF_WITH_GRPC=OFF, or libgrpc++ not found): --grpc says so.
#include "serve/grpc_frontend.h"

namespace serf::serve {

bool grpc_available() { return false; }

class GrpcFrontend::Impl {};

GrpcFrontend::GrpcFrontend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrpcFrontend::~GrpcFrontend() = default;

StatusOr<std::unique_ptr<GrpcFrontend>> GrpcFrontend::Start(InferenceService&, const GrpcOptions&) {
  return InvalidArgument(
      "--grpc: this serf was built without gRPC (install libgrpc++-dev and "
      "protobuf-compiler-grpc with scripts/setup, then rebuild)");
}

int GrpcFrontend::port() const { return 0; }
void GrpcFrontend::stop() {}

}  // namespace serf::serve
