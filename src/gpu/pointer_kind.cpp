#include "gpu/pointer_kind.hpp"

#include <bit>
#include <cstdio>
#include <string>

#include "gpu/cuda_driver.hpp"

namespace cairn::gpu {

namespace {

std::string Hex(uintptr_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

const char* PointerKindName(PointerKind kind) {
  switch (kind) {
    case PointerKind::kHost: return "host";
    case PointerKind::kDevice: return "device";
    case PointerKind::kManaged: return "managed";
  }
  return "unknown";
}

bool PointerInfo::RangeContains(const void* p, size_t n) const {
  if (range_size == 0) return true;
  const auto a = reinterpret_cast<uintptr_t>(p);
  return a >= range_start && a - range_start <= range_size && n <= range_size - (a - range_start);
}

Result<PointerInfo> ClassifyPointer(const void* ptr) {
  auto driver = Driver::Get();
  return ClassifyPointer(driver.ok() ? *driver : nullptr, ptr);
}

#if !CAIRN_GPU_HAVE_CUDA

Result<PointerInfo> ClassifyPointer(const Driver* /*driver*/, const void* /*ptr*/) {
  return PointerInfo{};
}

#else

Result<PointerInfo> ClassifyPointer(const Driver* driver, const void* ptr) {
  PointerInfo info;
  if (driver == nullptr || ptr == nullptr) return info;
  const auto dptr = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(ptr));

  // Each attribute is read into a zeroed 8-byte slot: the driver writes an
  // unsigned int (memory type), an int (ordinal) or a boolean, and reading the
  // low bytes of a zeroed slot is right for any of those widths.
  static_assert(std::endian::native == std::endian::little);
  uint64_t memory_type = 0, is_managed = 0, ordinal = 0;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                 CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void* data[] = {&memory_type, &is_managed, &ordinal};
  const CUresult r = driver->cuPointerGetAttributes(3, attrs, data, dptr);
  // Documented: an unknown pointer succeeds with NULL defaults. Tolerated too:
  // CUDA_ERROR_INVALID_VALUE (what cuPointerGetAttribute returns for a pointer
  // not allocated, mapped or registered by CUDA) and CUDA_ERROR_INVALID_CONTEXT
  // (documented for pointers of no UVA context). Both mean "not CUDA memory".
  if (r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_INVALID_CONTEXT) return info;
  if (r != CUDA_SUCCESS) return driver->Check(r, "cuPointerGetAttributes");

  const auto type = static_cast<uint32_t>(memory_type);
  if (is_managed != 0 || type == CU_MEMORYTYPE_UNIFIED) {
    info.kind = PointerKind::kManaged;
  } else if (type == CU_MEMORYTYPE_DEVICE) {
    info.kind = PointerKind::kDevice;
  } else if (type == CU_MEMORYTYPE_HOST) {
    info.kind = PointerKind::kHost;
    info.registered = true;
  } else if (type == 0) {
    return info;  // unregistered host memory
  } else {
    return Status::Unsupported("pointer " + Hex(dptr) + " is CUDA memory of type " +
                               std::to_string(type) + " (a CUDA array?), not linear memory");
  }
  info.known = true;
  info.device = static_cast<int>(static_cast<uint32_t>(ordinal));

  // The allocation range is optional information: keep 0/0 if not reported.
  uint64_t start = 0, size = 0;
  CUpointer_attribute range_attrs[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                       CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* range_data[] = {&start, &size};
  if (driver->cuPointerGetAttributes(2, range_attrs, range_data, dptr) == CUDA_SUCCESS &&
      size != 0 && start <= dptr && dptr - start < size) {
    info.range_start = static_cast<uintptr_t>(start);
    info.range_size = static_cast<size_t>(size);
  }
  return info;
}

#endif  // CAIRN_GPU_HAVE_CUDA

Result<PointerInfo> ClassifyRegion(const Driver* driver, const void* ptr, size_t bytes) {
  if (ptr == nullptr || bytes == 0) {
    return Status::InvalidArgument("region needs a non-null pointer and a non-zero size");
  }
  const auto first_addr = reinterpret_cast<uintptr_t>(ptr);
  if (bytes - 1 > UINTPTR_MAX - first_addr) {
    return Status::InvalidArgument("region at " + Hex(first_addr) + " of " +
                                   std::to_string(bytes) + " bytes wraps around");
  }
  CAIRN_ASSIGN_OR_RETURN(PointerInfo first, ClassifyPointer(driver, ptr));
  if (bytes == 1) return first;
  const auto* last_ptr = static_cast<const unsigned char*>(ptr) + (bytes - 1);
  CAIRN_ASSIGN_OR_RETURN(PointerInfo last, ClassifyPointer(driver, last_ptr));
  const std::string what = "region [" + Hex(first_addr) + ", +" + std::to_string(bytes) + ")";
  if (first.kind != last.kind) {
    return Status::InvalidArgument(what + " starts in " + PointerKindName(first.kind) +
                                   " memory and ends in " + PointerKindName(last.kind) +
                                   " memory");
  }
  if (first.kind == PointerKind::kHost) {
    // Partly registered host memory is pageable for DMA purposes.
    first.registered = first.registered && last.registered &&
                       first.range_start == last.range_start &&
                       first.RangeContains(ptr, bytes);
    return first;
  }
  const bool same_allocation = first.range_size != 0
                                   ? first.RangeContains(ptr, bytes)
                                   : (first.device == last.device && last.range_size == 0);
  if (!same_allocation) {
    return Status::InvalidArgument(what + " is not inside one " + PointerKindName(first.kind) +
                                   " allocation" +
                                   (first.range_size != 0
                                        ? " (the allocation at " + Hex(first.range_start) +
                                              " has " + std::to_string(first.range_size) +
                                              " bytes)"
                                        : std::string()));
  }
  return first;
}

}  // namespace cairn::gpu
