// The flight recorder's ring: ids map to slots as the ring wraps and after a reset; records
// that fell out of the ring are not found (updates to them do nothing).
#include <gtest/gtest.h>

#include "flambeau/distributed/flight_recorder.h"

using namespace flambeau::distributed;

TEST(FlightRecorder, UpdatesFindTheirRecordAcrossWrapsAndResets) {
  FlightRecorder fr(3);
  for (int i = 0; i < 7; ++i) {
    FlightRecord r;
    r.profiling_name = "op" + std::to_string(i);
    EXPECT_EQ(fr.record(r), i);
  }
  fr.started(6);
  fr.finished(5, "completed");
  fr.finished(1, "completed");  // evicted: nothing to update
  auto e = fr.entries();
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].record_id, 4);
  EXPECT_EQ(e[1].record_id, 5);
  EXPECT_EQ(e[2].record_id, 6);
  EXPECT_EQ(e[1].state, "completed");
  EXPECT_EQ(e[2].state, "started");
  EXPECT_EQ(e[0].state, "scheduled");
  fr.reset();
  for (int i = 0; i < 4; ++i) fr.record(FlightRecord{});
  fr.finished(10, "completed");
  fr.finished(7, "completed");  // before the reset: gone
  e = fr.entries();
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].record_id, 8);
  EXPECT_EQ(e[2].record_id, 10);
  EXPECT_EQ(e[2].state, "completed");
  EXPECT_EQ(e[0].state, "scheduled");
}
