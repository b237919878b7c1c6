// Which memory a pointer addresses: host, device or managed (docs/gpu.md).
//
// Asked of the driver with cuPointerGetAttributes (memory type, managed flag,
// device ordinal, allocation range). Its documented behaviour for a pointer
// CUDA does not know (plain malloc/mmap memory) is to succeed and leave every
// attribute at its "NULL" default (memory type 0), where cuPointerGetAttribute
// would return CUDA_ERROR_INVALID_VALUE; both mean host memory here. Without a
// driver (none loaded, or a build without CUDA) every pointer is host memory.
//
// This header has no CUDA types, so any code may use it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cairn/cairn.hpp"
#include "cairn/status.hpp"

namespace cairn::gpu {

class Driver;

// The public memory kind, as the driver reports it: kHost (pageable, or
// page-locked when `registered`), kDevice (cuMemAlloc, or a mapped cuMemCreate
// range), kManaged (cuMemAllocManaged: host- and device-accessible).
using PointerKind = MemoryKind;

// "host", "device", "managed".
const char* PointerKindName(PointerKind kind);

struct PointerInfo {
  PointerKind kind = PointerKind::kHost;
  // Host memory the driver knows: page-locked by cuMemHostRegister or
  // allocated by cuMemAllocHost (DMA-able, so async copies are truly async).
  bool registered = false;
  // The device the memory belongs to (device/managed) or was registered with;
  // -1 when the driver does not know the pointer.
  int device = -1;
  // The allocation (or address reservation, for cuMemCreate/cuMemMap memory)
  // that contains the pointer; 0/0 when unknown.
  uintptr_t range_start = 0;
  size_t range_size = 0;

  // The driver knows the pointer (anything but unregistered host memory).
  bool known = false;

  // True when [p, p + n) lies inside the known allocation range (true when the
  // range is unknown).
  bool RangeContains(const void* p, size_t n) const;
};

// Classifies `ptr` with `driver`; host when `driver` is null or ptr is null.
// Errors only for driver failures other than "not a CUDA pointer" (then the
// Status names cuPointerGetAttributes and the CUDA error).
Result<PointerInfo> ClassifyPointer(const Driver* driver, const void* ptr);

// As above with the process-wide driver (Driver::Get(), loaded on first use);
// host when there is no usable driver.
Result<PointerInfo> ClassifyPointer(const void* ptr);

// Classifies the region [ptr, ptr + bytes) (bytes > 0): its first and last
// byte must be of the same kind and, for device and managed memory, inside one
// allocation; kInvalidArgument otherwise (a region straddling allocations or
// kinds cannot be copied by one driver call).
Result<PointerInfo> ClassifyRegion(const Driver* driver, const void* ptr, size_t bytes);

}  // namespace cairn::gpu
