#include "mpi/communicator.h"

#include <mpi.h>

#include <chrono>
#include <string>
#include <thread>

namespace serf::mpi {

struct Communicator::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
};

struct Communicator::PendingRecv::Impl {
  MPI_Request request = MPI_REQUEST_NULL;
};

namespace {

Status mpi_error(int code, const char* what) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(code, text, &len);
  return Unavailable(std::string(what) + " failed: " + text);
}

// Polls `request` until done, its deadline passes or `cancel` is set. Sleeps grow from 20 us to
// max_sleep_s so a busy exchange stays fast and an idle rank costs almost no CPU.
// A point-to-point request that gives up is cancelled and freed. A collective's is left pending
// (`collective`): MPI_Cancel on it is erroneous, and Open MPI 4.1 deadlocked in it on every rank
// (MPI_Comm_idup's request, a node stopped at the start: the job hung forever). The caller then
// must keep the request's buffers alive; the job is torn down after such a fault anyway.
Status wait_polled(MPI_Request* request, const WaitPolicy& policy, const char* what,
                   MPI_Status* status_out = nullptr, bool collective = false) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  double sleep_s = 20e-6;
  // Yield (not sleep) for the first polls: an exchange inside a request usually completes within
  // microseconds, and a sleep costs tens of them even when it asks for one.
  int yields = policy.max_sleep_s <= 100e-6 ? 200 : 0;
  for (;;) {
    int done = 0;
    MPI_Status status;
    int rc = MPI_Test(request, &done, &status);
    if (rc != MPI_SUCCESS) return mpi_error(rc, what);
    if (done) {
      if (status_out != nullptr) *status_out = status;
      return Status::Ok();
    }
    bool cancelled = policy.cancel != nullptr && policy.cancel->load();
    double waited = std::chrono::duration<double>(clock::now() - start).count();
    if (cancelled || (policy.timeout_s > 0 && waited > policy.timeout_s)) {
      if (!collective) {
        MPI_Cancel(request);
        MPI_Request_free(request);
      }
      if (cancelled) return Unavailable(std::string(what) + " cancelled");
      return Unavailable(std::string(what) + " timed out after " +
                         std::to_string(policy.timeout_s) + " s");
    }
    if (yields > 0) {
      --yields;
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
    sleep_s = std::min(sleep_s * 2, policy.max_sleep_s);
  }
}

// A collective's request: waited without the cancel flag (a collective cannot be cancelled) and,
// when the wait gives up, left pending (wait_polled).
Status wait_collective(MPI_Request* request, const WaitPolicy& wait, const char* what) {
  WaitPolicy w = wait;
  w.cancel = nullptr;
  return wait_polled(request, w, what, nullptr, /*collective=*/true);
}

}  // namespace

Communicator::Communicator() : impl_(std::make_unique<Impl>()) {}
Communicator::~Communicator() {
  if (impl_ && impl_->comm != MPI_COMM_NULL) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&impl_->comm);
  }
}
Communicator::Communicator(Communicator&& o) noexcept : impl_(std::move(o.impl_)) {
  o.impl_ = std::make_unique<Impl>();
}
Communicator& Communicator::operator=(Communicator&& o) noexcept {
  if (this != &o) {
    Communicator old(std::move(*this));
    impl_ = std::move(o.impl_);
    o.impl_ = std::make_unique<Impl>();
  }
  return *this;
}

StatusOr<Communicator> Communicator::world(const WaitPolicy& wait) {
  // The new handle lives on the heap: when the wait gives up, the pending MPI_Comm_idup may still
  // write it, so it is left to the job's teardown (see wait_polled).
  auto* comm = new MPI_Comm(MPI_COMM_NULL);
  MPI_Request req;
  int rc = MPI_Comm_idup(MPI_COMM_WORLD, comm, &req);
  if (rc != MPI_SUCCESS) {
    delete comm;
    return mpi_error(rc, "MPI_Comm_idup");
  }
  Status st = wait_collective(&req, wait, "MPI_Comm_idup");
  if (!st.ok()) return st;  // `comm` and `req` stay pending, on purpose
  Communicator c;
  c.impl_->comm = *comm;
  delete comm;
  MPI_Comm_set_errhandler(c.impl_->comm, MPI_ERRORS_RETURN);
  return c;
}

bool Communicator::valid() const { return impl_->comm != MPI_COMM_NULL; }
int Communicator::rank() const {
  int r = -1;
  if (valid()) MPI_Comm_rank(impl_->comm, &r);
  return r;
}
int Communicator::size() const {
  int s = 0;
  if (valid()) MPI_Comm_size(impl_->comm, &s);
  return s;
}

StatusOr<Communicator> Communicator::split(int color, int key) const {
  Communicator c;
  int rc = MPI_Comm_split(impl_->comm, color < 0 ? MPI_UNDEFINED : color, key, &c.impl_->comm);
  if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Comm_split");
  if (c.valid()) MPI_Comm_set_errhandler(c.impl_->comm, MPI_ERRORS_RETURN);
  return c;
}

StatusOr<Communicator> Communicator::dup() const {
  Communicator c;
  int rc = MPI_Comm_dup(impl_->comm, &c.impl_->comm);
  if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Comm_dup");
  return c;
}

StatusOr<Communicator> Communicator::tail_group(int first, int tag) const {
  MPI_Group all, tail;
  MPI_Comm_group(impl_->comm, &all);
  int range[1][3] = {{first, size() - 1, 1}};
  MPI_Group_range_incl(all, 1, range, &tail);
  Communicator c;
  int rc = MPI_Comm_create_group(impl_->comm, tail, tag, &c.impl_->comm);
  MPI_Group_free(&tail);
  MPI_Group_free(&all);
  if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Comm_create_group");
  MPI_Comm_set_errhandler(c.impl_->comm, MPI_ERRORS_RETURN);
  return c;
}

StatusOr<Communicator> Communicator::split_shared() const {
  Communicator c;
  int rc =
      MPI_Comm_split_type(impl_->comm, MPI_COMM_TYPE_SHARED, rank(), MPI_INFO_NULL, &c.impl_->comm);
  if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Comm_split_type");
  return c;
}

Status Communicator::send_bytes(const void* data, size_t bytes, int dest, int tag,
                                const WaitPolicy& wait) const {
  MPI_Request req;
  int rc = MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, dest, tag, impl_->comm, &req);
  if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Isend");
  return wait_polled(&req, wait, ("send to rank " + std::to_string(dest)).c_str());
}

Status Communicator::recv_bytes(void* data, size_t bytes, int source, int tag,
                                const WaitPolicy& wait, int* from) const {
  MPI_Request req;
  int rc = MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, source < 0 ? MPI_ANY_SOURCE : source,
                     tag, impl_->comm, &req);
  if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Irecv");
  MPI_Status status;
  SERF_RETURN_IF_ERROR(wait_polled(&req, wait, "receive", &status));
  if (from != nullptr) *from = status.MPI_SOURCE;
  return Status::Ok();
}

StatusOr<bool> Communicator::iprobe(int source, int tag) const {
  int flag = 0;
  MPI_Status status;
  int rc = MPI_Iprobe(source < 0 ? MPI_ANY_SOURCE : source, tag, impl_->comm, &flag, &status);
  if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Iprobe");
  return flag != 0;
}

Status Communicator::bcast_bytes(void* data, size_t bytes, int root, const WaitPolicy& wait) const {
  MPI_Request req;
  int rc = MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, root, impl_->comm, &req);
  if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Ibcast");
  return wait_collective(&req, wait, "broadcast");
}

Status Communicator::barrier(const WaitPolicy& wait) const {
  MPI_Request req;
  int rc = MPI_Ibarrier(impl_->comm, &req);
  if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Ibarrier");
  return wait_collective(&req, wait, "barrier");
}

Status Communicator::all_gather_in_place(float* full, const std::vector<int>& counts,
                                         const std::vector<int>& offsets,
                                         const WaitPolicy& wait) const {
  MPI_Request req;
  int rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, full, counts.data(), offsets.data(),
                           MPI_FLOAT, impl_->comm, &req);
  if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Iallgatherv");
  return wait_collective(&req, wait, "all-gather");
}

Communicator::PendingRecv::PendingRecv() : impl_(std::make_unique<Impl>()) {}
Communicator::PendingRecv::~PendingRecv() { cancel(); }

Status Communicator::PendingRecv::post(const Communicator& comm, void* data, size_t bytes,
                                       int source, int tag) {
  int rc = MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, source < 0 ? MPI_ANY_SOURCE : source,
                     tag, comm.impl()->comm, &impl_->request);
  if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Irecv");
  active_ = true;
  return Status::Ok();
}

StatusOr<bool> Communicator::PendingRecv::test(int* from) {
  if (!active_) return false;
  int done = 0;
  MPI_Status status;
  int rc = MPI_Test(&impl_->request, &done, &status);
  if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Test");
  if (!done) return false;
  active_ = false;
  if (from != nullptr) *from = status.MPI_SOURCE;
  return true;
}

void Communicator::PendingRecv::cancel() {
  if (!active_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    MPI_Cancel(&impl_->request);
    MPI_Request_free(&impl_->request);
  }
  active_ = false;
}

}  // namespace serf::mpi
