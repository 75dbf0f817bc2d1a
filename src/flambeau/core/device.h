// Device: where a tensor's memory lives. Only the CPU exists today; CUDA is named so
// that code can carry a device, and asking for it fails with a clear error.
#pragma once
#include <string>

namespace flambeau {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = -1;
  Device() = default;
  Device(DeviceType t, int i = -1) : type(t), index(i) {}
  explicit Device(const std::string& spec);  // "cpu", "cuda", "cuda:1"
  bool is_cpu() const { return type == DeviceType::CPU; }
  std::string str() const;
  friend bool operator==(const Device& a, const Device& b) {
    return a.type == b.type && a.index == b.index;
  }
};
inline const Device kCPU{};

// Throws NotImplementedError naming `op` unless the device is usable in this build.
void check_device_available(const Device& d, const char* op);

}  // namespace flambeau
