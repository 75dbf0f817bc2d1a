// The flight recorder: a ring buffer of a communicator's last operations (2000 by default),
// dumped as JSON in torchcomms' layout on a timeout, an abort or on demand, and read back by
// `python -m flambeau.distributed.flight_recorder DIR` to name the rank that fell behind.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "flambeau/distributed/types.h"

namespace flambeau::distributed {

struct FlightRecord {
  int64_t record_id = 0;
  int64_t collective_seq_id = 0;  // 0 for P2P ops
  int64_t p2p_seq_id = 0;         // 0 for collectives
  std::string profiling_name;     // "gloo:all_reduce"
  std::vector<std::vector<int64_t>> input_sizes, output_sizes;
  std::vector<std::string> input_dtypes, output_dtypes;
  int64_t time_created_ns = 0;  // system clock
  int64_t time_started_ns = 0;  // 0: not started
  int64_t time_completed_ns = 0;
  int64_t timeout_ms = 0;
  std::string state = "scheduled";  // scheduled, started, completed, failed, canceled
  std::string error;
  bool is_p2p = false;
};

// What a dump says about its communicator.
struct FlightRecorderHeader {
  std::string comm_name, backend;
  int rank = 0, size = 0, global_rank = 0;
  std::vector<int> ranks;  // global ranks of the members
  int64_t last_enqueued = 0, last_started = 0, last_completed = 0;  // collective seq ids
};

class FlightRecorder {
 public:
  explicit FlightRecorder(size_t capacity = 2000) : capacity_(capacity) {}
  // Adds a record (its record_id is set) and returns the id.
  int64_t record(FlightRecord r);
  void started(int64_t id);
  void finished(int64_t id, const std::string& state, const std::string& error = {});
  std::vector<FlightRecord> entries() const;  // oldest first
  void reset();
  size_t size() const;
  size_t capacity() const { return capacity_; }

  // The JSON dump: {"version", "pg_config", "pg_status", "entries": [...]}.
  std::string dump_json(const FlightRecorderHeader& h, bool include_completed = true) const;
  // Writes dump_json to `path` atomically (a temporary file renamed).
  void dump_file(const std::string& path, const FlightRecorderHeader& h,
                 bool include_completed = true) const;

 private:
  size_t capacity_;
  mutable std::mutex mutex_;
  std::vector<FlightRecord> ring_;
  size_t next_ = 0;  // slot the next record goes to once the ring is full
  int64_t next_id_ = 0;
  int64_t base_id_ = 0;  // id of the record in slot 0 since the last reset
  FlightRecord* find(int64_t id);
};

}  // namespace flambeau::distributed
