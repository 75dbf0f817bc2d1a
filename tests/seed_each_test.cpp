// Every GoogleTest test starts with the default generator freshly seeded (as in a new
// process), so a test draws the same values alone (ctest), in one process, and in any
// order (--gtest_shuffle).
#include <gtest/gtest.h>

#include "flambeau/core/generator.h"

namespace {

struct SeedEachTest : ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo&) override { flambeau::manual_seed(flambeau::Generator::kDefaultSeed); }
};

const bool registered = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new SeedEachTest);
  return true;
}();

}  // namespace
