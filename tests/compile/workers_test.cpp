// Compile workers: distinct sources build in parallel, one source asked for twice at once is
// built once, a compiler error names the generated source, a killed worker is reaped and
// replaced (between commands and during one; a second death is an Error), shutdown reaps
// the workers and the pool starts again, a warm cache starts no worker, a fork's child has
// workers of its own and exit stops them without waiting.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "flambeau/compile/build.h"
#include "flambeau/compile/workers.h"
#include "flambeau/core/error.h"

using namespace flambeau;
using namespace flambeau::compiler;
namespace fs = std::filesystem;

namespace {

// Sets an environment variable for one test, restored after.
struct EnvVar {
  std::string name, old;
  bool had;
  EnvVar(const char* n, const std::string& value) : name(n) {
    const char* o = std::getenv(n);
    had = o != nullptr;
    if (had) old = o;
    setenv(n, value.c_str(), 1);
  }
  ~EnvVar() {
    if (had) setenv(name.c_str(), old.c_str(), 1);
    else unsetenv(name.c_str());
  }
};

// A private cache directory (FLAMBEAU_CACHE_DIR) and three workers at most, for one test.
struct Fixture {
  fs::path dir;
  EnvVar cache, threads;
  Fixture()
      : dir(fs::temp_directory_path() / ("flambeau-workers-test-" + std::to_string(getpid()) + "-" +
                                         std::to_string(counter()++))),
        cache("FLAMBEAU_CACHE_DIR", dir.string()),
        threads("FLAMBEAU_COMPILE_THREADS", "3") {}
  ~Fixture() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

std::string source_returning(int v) {
  return "extern \"C\" int value() { return " + std::to_string(v) + "; }\n";
}

int value_of(const Library& lib) { return reinterpret_cast<int (*)()>(lib.symbol("value"))(); }

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// True when pid is no longer a child of this process (it was reaped).
bool reaped(int pid) { return waitpid(pid, nullptr, WNOHANG) < 0 && errno == ECHILD; }

std::string read_all(const fs::path& p) {
  std::ifstream f(p);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST(CompileWorkers, DistinctSourcesBuildInParallel) {
  Fixture fx;
  const int runs = compiler_runs();
  std::vector<std::string> sources;
  for (int i = 0; i < 5; ++i) sources.push_back(source_returning(100 + i));
  const std::vector<Library> libs = load_libraries(sources);
  ASSERT_EQ(libs.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(libs[i].built);
    EXPECT_EQ(value_of(libs[i]), 100 + i);
  }
  EXPECT_EQ(compiler_runs(), runs + 5);
  const std::vector<int> pids = workers::pids();
  EXPECT_GE(pids.size(), 1u);
  EXPECT_LE(pids.size(), 3u);
  for (int pid : pids) EXPECT_NE(pid, getpid());
}

TEST(CompileWorkers, OneSourceAskedForAtOnceIsBuiltOnce) {
  Fixture fx;
  const int runs = compiler_runs();
  const std::string src = source_returning(7);
  const std::vector<Library> libs = load_libraries({src, src, src});
  for (const Library& lib : libs) EXPECT_EQ(value_of(lib), 7);
  EXPECT_EQ(std::count_if(libs.begin(), libs.end(), [](const Library& l) { return l.built; }), 1);
  // From separate threads, each with its own call.
  const std::string other = source_returning(8);
  std::vector<Library> got(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) threads.emplace_back([&got, &other, t] { got[t] = load_library(other); });
  for (std::thread& t : threads) t.join();
  for (const Library& lib : got) EXPECT_EQ(value_of(lib), 8);
  EXPECT_EQ(compiler_runs(), runs + 2);
}

TEST(CompileWorkers, ACompilerErrorNamesTheGeneratedSource) {
  Fixture fx;
  const std::string bad = "extern \"C\" int value() { return 1 +; }\n";
  try {
    (void)load_libraries({source_returning(1), bad});
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    const size_t at = what.find("generated source ");
    ASSERT_NE(at, std::string::npos) << what;
    const std::string path = what.substr(at + 17, what.find(':', at) - at - 17);
    EXPECT_EQ(fs::path(path).extension(), ".cpp") << what;
    EXPECT_EQ(fs::path(path).parent_path(), fx.dir) << what;
    EXPECT_EQ(read_all(path), bad);                                  // the source is kept for reading
    EXPECT_NE(what.find("error"), std::string::npos) << what;  // the compiler's message
  }
  EXPECT_EQ(value_of(load_library(source_returning(2))), 2);  // the workers still serve
}

TEST(CompileWorkers, AKilledWorkerIsReapedAndReplaced) {
  Fixture fx;
  (void)load_library(source_returning(10));
  std::vector<int> pids = workers::pids();
  ASSERT_FALSE(pids.empty());
  for (int pid : pids) {
    ASSERT_EQ(kill(pid, SIGKILL), 0);  // by id: only our own workers
    siginfo_t info;
    ASSERT_EQ(waitid(P_PID, pid, &info, WEXITED | WNOWAIT), 0);  // dead, not reaped: the pool reaps it
  }
  // The next command finds each dead worker at its socket, reaps it and uses a new one.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(value_of(load_library(source_returning(11 + i))), 11 + i);
  const std::vector<int> now = workers::pids();
  EXPECT_FALSE(now.empty());
  for (int pid : now) EXPECT_FALSE(contains(pids, pid));
  for (int pid : pids) EXPECT_TRUE(reaped(pid)) << pid;
}

TEST(CompileWorkers, AWorkerThatDiesDuringACommandIsRetriedOnceThenAnError) {
  Fixture fx;
  (void)load_library(source_returning(20));  // the worker program is built
  // A command that kills the worker running it ($PPID), never this process; the first time
  // only (a marker file), then it succeeds on the replacement.
  const std::string me = std::to_string(getpid()), marker = (fx.dir / "killed-once").string();
  const std::string guard = "[ $PPID = " + me + " ] && exit 3; ";
  const fs::path log = fx.dir / "retry.log";
  const std::vector<int> before = workers::pids();
  EXPECT_EQ(workers::run({"/bin/sh", "-c", guard + "[ -e " + marker + " ] || { touch " + marker +
                                               "; kill -9 $PPID; sleep 5; }; echo ran"},
                         log.string()),
            0);
  EXPECT_EQ(read_all(log), "ran\n");
  EXPECT_LT(std::count_if(before.begin(), before.end(), [](int p) { return contains(workers::pids(), p); }),
            int(before.size()));
  // Every time: a clear error after the second death.
  try {
    (void)workers::run({"/bin/sh", "-c", guard + "kill -9 $PPID; sleep 5"}, log.string());
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("died running /bin/sh, and so did its replacement"), std::string::npos) << what;
  }
  EXPECT_EQ(value_of(load_library(source_returning(21))), 21);
}

TEST(CompileWorkers, ShutdownReapsTheWorkersAndThePoolStartsAgain) {
  Fixture fx;
  (void)load_libraries({source_returning(30), source_returning(31)});
  const std::vector<int> pids = workers::pids();
  ASSERT_FALSE(pids.empty());
  workers::shutdown();
  EXPECT_TRUE(workers::pids().empty());
  for (int pid : pids) EXPECT_TRUE(reaped(pid)) << pid;
  // A warm cache starts no worker (and no compiler).
  const int runs = compiler_runs();
  const Library warm = load_library(source_returning(30));
  EXPECT_FALSE(warm.built);
  EXPECT_EQ(value_of(warm), 30);
  EXPECT_TRUE(workers::pids().empty());
  EXPECT_EQ(compiler_runs(), runs);
  // A cold one starts the pool again.
  EXPECT_EQ(value_of(load_library(source_returning(32))), 32);
  EXPECT_FALSE(workers::pids().empty());
  EXPECT_EQ(compiler_runs(), runs + 1);
}

// A fork's child starts workers of its own, and exit() stops them without waiting for the
// command in flight (its process group is killed). The child is watched and ended by its id.
TEST(CompileWorkers, AForksChildHasItsOwnWorkersAndExitWaitsForNoCommand) {
  Fixture fx;
  (void)load_library(source_returning(60));  // the parent's pool runs; the worker program is cached
  const fs::path log = fx.dir / "in-flight.log";
  const pid_t child = fork();
  if (child == 0) {
    if (!workers::pids().empty()) _exit(2);  // the parent's workers are not the child's
    std::thread([log] {
      try {
        (void)workers::run({"/bin/sh", "-c", "echo $$; sleep 60"}, log.string());
      } catch (...) {
      }
    }).detach();
    for (int i = 0; i < 1000 && read_all(log).empty(); ++i) usleep(10000);
    if (workers::pids().size() != 1 || read_all(log).empty()) _exit(3);
    std::exit(0);
  }
  ASSERT_GT(child, 0);
  int status = -1;
  pid_t done = 0;
  for (int i = 0; i < 2000 && done == 0; ++i) {  // 20 s at most, the command takes 60
    done = waitpid(child, &status, WNOHANG);
    if (done == 0) usleep(10000);
  }
  if (done == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    FAIL() << "the child did not exit";
  }
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The command's shell is gone (or a zombie awaiting its new parent).
  const std::string sh = "/proc/" + std::to_string(std::atoi(read_all(log).c_str())) + "/stat";
  bool gone = false;
  for (int i = 0; i < 500 && !gone; ++i) {
    const std::string stat = read_all(sh);
    const size_t paren = stat.rfind(')');
    gone = stat.empty() || (paren != std::string::npos && stat.compare(paren, 4, ") Z ") == 0);
    if (!gone) usleep(10000);
  }
  EXPECT_TRUE(gone) << sh;
  EXPECT_EQ(value_of(load_library(source_returning(61))), 61);  // the parent's pool still serves
}

TEST(CompileWorkers, ThePoolSizeComesFromTheEnvironment) {
  Fixture fx;
  EXPECT_EQ(workers::max_workers(), 3);
  EnvVar one("FLAMBEAU_COMPILE_THREADS", "1");
  EXPECT_EQ(workers::max_workers(), 1);
  (void)load_libraries({source_returning(40), source_returning(41), source_returning(42)});
  EXPECT_LE(workers::pids().size(), 1u);  // extra workers stop as they finish
  EnvVar junk("FLAMBEAU_COMPILE_THREADS", "none");
  EXPECT_GE(workers::max_workers(), 1);
  EXPECT_LE(workers::max_workers(), 4);
}
