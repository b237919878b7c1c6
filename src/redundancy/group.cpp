// cairn::Group's defaults (include/cairn/group.hpp): what a group that
// implements only the blocking collectives answers to the optional calls.
// Redundancy that needs one of them reports kUnsupported naming it.
#include "cairn/group.hpp"

namespace cairn {

Group::~Group() = default;
Group::Pending::~Pending() = default;
Group::Request::~Request() = default;

Result<std::unique_ptr<Group>> Group::Duplicate() {
  return Status::Unsupported("this group has no second channel for collective calls");
}

Result<std::unique_ptr<Group::Pending>> Group::StartAllReduce(Op, const int64_t*, size_t) {
  return Status::Unsupported("this group has no nonblocking reductions");
}

Result<std::unique_ptr<Group::Request>> Group::StartSend(int, int, const uint8_t*, size_t) {
  return Status::Unsupported("this group has no nonblocking point-to-point messages");
}

Result<std::unique_ptr<Group::Request>> Group::StartReceive(int, int, uint8_t*, size_t) {
  return Status::Unsupported("this group has no nonblocking point-to-point messages");
}

}  // namespace cairn
