// The flight recorder's ring buffer and its JSON dump (torchcomms' and c10d's layout:
// version, pg_config, pg_status, entries).
#include "flambeau/distributed/flight_recorder.h"
#include "flambeau/io/text_file.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

namespace flambeau::distributed {

int64_t FlightRecorder::record(FlightRecord r) {
  std::lock_guard lock(mutex_);
  r.record_id = next_id_++;
  if (ring_.size() < capacity_) {
    ring_.push_back(std::move(r));
  } else if (capacity_ > 0) {
    ring_[next_] = std::move(r);
    next_ = (next_ + 1) % capacity_;
  }
  return next_id_ - 1;
}

// Records take slots in id order from base_id_ (the ring wraps at capacity_), so a record's
// slot is computed, not searched: every op looks its record up twice.
FlightRecord* FlightRecorder::find(int64_t id) {
  if (ring_.empty() || id < next_id_ - int64_t(ring_.size()) || id >= next_id_) return nullptr;
  FlightRecord& r = ring_[size_t(id - base_id_) % capacity_];
  return r.record_id == id ? &r : nullptr;
}

static int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void FlightRecorder::started(int64_t id) {
  std::lock_guard lock(mutex_);
  if (FlightRecord* r = find(id)) {
    r->state = "started";
    r->time_started_ns = now_ns();
  }
}

void FlightRecorder::finished(int64_t id, const std::string& state, const std::string& error) {
  std::lock_guard lock(mutex_);
  if (FlightRecord* r = find(id)) {
    r->state = state;
    r->error = error;
    r->time_completed_ns = now_ns();
  }
}

std::vector<FlightRecord> FlightRecorder::entries() const {
  std::lock_guard lock(mutex_);
  std::vector<FlightRecord> out;
  out.reserve(ring_.size());
  for (size_t i = 0; i < ring_.size(); ++i) out.push_back(ring_[(next_ + i) % ring_.size()]);
  return out;
}

void FlightRecorder::reset() {
  std::lock_guard lock(mutex_);
  ring_.clear();
  next_ = 0;
  base_id_ = next_id_;
}

size_t FlightRecorder::size() const {
  std::lock_guard lock(mutex_);
  return ring_.size();
}

std::string FlightRecorder::dump_json(const FlightRecorderHeader& h,
                                      bool include_completed) const {
  using nlohmann::json;
  json entries = json::array();
  for (const FlightRecord& r : this->entries()) {
    if (!include_completed && r.state == "completed") continue;
    double duration_ms = r.time_completed_ns && r.time_started_ns
                             ? double(r.time_completed_ns - r.time_started_ns) / 1e6
                             : 0.0;
    json e = {{"record_id", r.record_id},
              {"pg_id", h.comm_name},
              {"process_group", {h.comm_name, h.comm_name}},
              {"collective_seq_id", r.collective_seq_id},
              {"p2p_seq_id", r.p2p_seq_id},
              {"profiling_name", r.profiling_name},
              {"input_sizes", r.input_sizes},
              {"input_dtypes", r.input_dtypes},
              {"output_sizes", r.output_sizes},
              {"output_dtypes", r.output_dtypes},
              {"time_created_ns", r.time_created_ns},
              {"time_discovered_started_ns", r.time_started_ns},
              {"time_discovered_completed_ns", r.time_completed_ns},
              {"duration_ms", duration_ms},
              {"timeout_ms", r.timeout_ms},
              {"state", r.state},
              {"is_p2p", r.is_p2p}};
    if (!r.error.empty()) e["error"] = r.error;
    entries.push_back(std::move(e));
  }
  json dump = {
      {"version", "2.10"},
      {"rank", h.global_rank},
      {"comm_rank", h.rank},
      {"comm_size", h.size},
      {"backend", h.backend},
      {"pg_config", {{h.comm_name, {{"name", h.comm_name}, {"desc", h.backend}, {"ranks", h.ranks}}}}},
      {"pg_status",
       {{h.comm_name,
         {{"last_enqueued_collective", h.last_enqueued},
          {"last_started_collective", h.last_started},
          {"last_completed_collective", h.last_completed}}}}},
      {"entries", std::move(entries)}};
  return dump.dump(1);
}

void FlightRecorder::dump_file(const std::string& path, const FlightRecorderHeader& h,
                               bool include_completed) const {
  io::write_text_file(path, dump_json(h, include_completed), "flight_recorder");
}

}  // namespace flambeau::distributed
