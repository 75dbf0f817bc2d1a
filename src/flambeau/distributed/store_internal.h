// Helpers shared by the store implementations (not public API): deadlines with c10d's
// "0 = no timeout", the decimal counters of add, the wording of timeout errors, and
// little-endian lengths.
#pragma once
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "flambeau/distributed/store.h"

namespace flambeau::distributed::detail {

using Clock = std::chrono::steady_clock;

// A point in time to give up at; a timeout <= 0 never expires (c10d's kNoTimeout).
struct Deadline {
  bool infinite = true;
  Clock::time_point at{};
  static Deadline after(Millis timeout) {
    Deadline d;
    if (timeout.count() > 0) {
      d.infinite = false;
      d.at = Clock::now() + timeout;
    }
    return d;
  }
  bool expired() const { return !infinite && Clock::now() >= at; }
  // Milliseconds left, rounded up, for poll(); -1 when infinite.
  int poll_ms() const {
    if (infinite) return -1;
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(at - Clock::now()).count();
    if (left <= 0) return 0;
    auto ms = (left + 999) / 1000;
    return ms > 1'000'000'000 ? 1'000'000'000 : static_cast<int>(ms);
  }
};

inline std::string errno_text(int e) { return std::strerror(e); }

// Little-endian u32, as the TCPStore wire and the FileStore file write lengths.
inline void put_u32(std::string& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

inline std::string join_keys(const std::vector<std::string>& keys) {
  std::string s;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i) s += ", ";
    s += keys[i];
  }
  return s;
}

// "[op] timed out after 300 ms waiting for keys: a, b"
inline std::string timeout_message(const std::string& op, Millis timeout,
                                   const std::vector<std::string>& keys) {
  return "[" + op + "] timed out after " + std::to_string(timeout.count()) +
         " ms waiting for key" + (keys.size() == 1 ? "" : "s") + ": " + join_keys(keys);
}

// The integer stored by add (decimal text); false when the bytes are not one.
inline bool parse_counter(const Bytes& b, int64_t* out) {
  const char* first = reinterpret_cast<const char*>(b.data());
  const char* last = first + b.size();
  if (first != last && *first == '+') ++first;
  auto [p, ec] = std::from_chars(first, last, *out);
  return ec == std::errc() && p == last && first != last;
}

inline Bytes counter_bytes(int64_t v) {
  std::string s = std::to_string(v);
  return Bytes(s.begin(), s.end());
}

// Applies add's arithmetic to the current value (nullptr: absent). Returns false with *error
// set when the value is not an integer or the sum overflows.
inline bool add_to_counter(const std::string& key, const Bytes* current, int64_t delta,
                           int64_t* result, std::string* error) {
  int64_t v = 0;
  if (current && !parse_counter(*current, &v)) {
    std::string shown(current->begin(), current->begin() + std::min<size_t>(current->size(), 32));
    *error = "the value of key '" + key + "' is not an integer: '" + shown +
             (current->size() > 32 ? "...'" : "'");
    return false;
  }
  if (__builtin_add_overflow(v, delta, result)) {
    *error = "adding " + std::to_string(delta) + " to key '" + key + "' (" +
             std::to_string(v) + ") overflows int64";
    return false;
  }
  return true;
}

}  // namespace flambeau::distributed::detail
