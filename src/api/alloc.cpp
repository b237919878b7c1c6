// Tracked memory: cairn::Alloc / cairn::Free (cairn.hpp) and cairn_alloc /
// cairn_free (cairn.h), over the os layer's mappings (os/mem/mappings.hpp: why
// not malloc, the one table of them, huge pages).
#include "cairn/cairn.hpp"
#include "os/mem/mappings.hpp"

namespace cairn {

Result<void*> Alloc(size_t bytes) {
  if (bytes == 0) return Status::InvalidArgument("cairn_alloc of 0 bytes");
  return os::Map(bytes);
}

Status Free(void* ptr) { return ptr == nullptr ? Status::Ok() : os::Unmap(ptr); }

}  // namespace cairn
