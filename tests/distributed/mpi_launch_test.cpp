// Runs the Open MPI engine's check (tests/distributed_mpi/mpi_check.cpp, built as
// flambeau_mpi_check) under mpirun on 2, 3 and 4 ranks and expects exit status 0. A
// watchdog bounds each run: past its deadline the mpirun (and its process group) gets
// SIGTERM, then SIGKILL, and the test fails. Skipped when mpirun or the program is missing.
//
// mpirun flags and environment:
//   --allow-run-as-root  Open MPI refuses to start as root without it (CI containers run
//                        as root); harmless otherwise.
//   --oversubscribe      more ranks than cores (the CI machine may have 2); also set as
//                        OMPI_MCA_rmaps_base_oversubscribe=1.
//   --bind-to none       oversubscribed ranks must not be pinned to the same core.
//   OMPI_MCA_btl=self,vader                      shared memory only: no TCP interface probing.
//   OMPI_MCA_btl_vader_single_copy_mechanism=none  containers often forbid the
//                        process_vm_readv (CMA) that vader uses for large messages.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

#ifdef FLAMBEAU_MPI_CHECK
constexpr const char* kCheckProgram = FLAMBEAU_MPI_CHECK;
#else
constexpr const char* kCheckProgram = "";
#endif

std::string find_in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    std::string p = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return {};
}

std::string tail_of(const std::string& path, size_t max) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  return s.size() > max ? "...\n" + s.substr(s.size() - max) : s;
}

struct RunResult {
  bool timed_out = false;
  int status = -1;  // waitpid's status
  std::string output;
  double seconds = 0;
};

// Runs argv with env added to this process's environment, stdout and stderr to a file;
// kills the process group after `deadline`.
RunResult run_with_watchdog(const std::vector<std::string>& argv,
                            const std::vector<std::string>& env, std::chrono::seconds deadline) {
  RunResult res;
  std::string out_path =
      (std::filesystem::temp_directory_path() / ("flb_mpirun_" + std::to_string(::getpid()) + ".log"))
          .string();
  // Everything exec needs is built before fork (the child only calls async-signal-safe
  // functions).
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    bool overridden = false;
    for (const std::string& mine : env)
      overridden = overridden || kv.compare(0, mine.find('=') + 1, mine, 0, mine.find('=') + 1) == 0;
    if (!overridden) envs.push_back(kv);
  }
  envs.insert(envs.end(), env.begin(), env.end());
  std::vector<char*> cargv, cenv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const std::string& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    res.output = "cannot open " + out_path;
    return res;
  }
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);  // its own process group, so the watchdog can end mpirun and its ranks
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execve(cargv[0], cargv.data(), cenv.data());
    ::_exit(127);
  }
  ::close(fd);
  if (pid < 0) {
    res.output = std::string("fork failed: ") + std::strerror(errno);
    return res;
  }
  ::setpgid(pid, pid);  // also from the parent: no race with the child's own call
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      res.status = status;
      break;
    }
    if (std::chrono::steady_clock::now() - t0 > deadline) {
      res.timed_out = true;
      ::kill(-pid, SIGTERM);
      for (int i = 0; i < 40 && ::waitpid(pid, &status, WNOHANG) == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      res.status = status;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(-pid, SIGKILL);  // stragglers of the group, if any
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  res.output = tail_of(out_path, 12000);
  std::filesystem::remove(out_path);
  return res;
}

class MpiLaunch : public ::testing::TestWithParam<int> {};

TEST_P(MpiLaunch, AllOpsDtypesSplitsTimeoutsAbort) {
  const int ranks = GetParam();
  std::string mpirun = find_in_path("mpirun");
  if (mpirun.empty()) GTEST_SKIP() << "mpirun is not on PATH (install openmpi-bin)";
  if (!*kCheckProgram || ::access(kCheckProgram, X_OK) != 0)
    GTEST_SKIP() << "the MPI check program (flambeau_mpi_check) was not built: '"
                 << kCheckProgram << "'";
  RunResult r = run_with_watchdog(
      {mpirun, "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(ranks),
       "--bind-to", "none", kCheckProgram},
      {"OMPI_MCA_rmaps_base_oversubscribe=1", "OMPI_MCA_btl=self,vader",
       "OMPI_MCA_btl_vader_single_copy_mechanism=none"},
      std::chrono::seconds(90));
  ASSERT_FALSE(r.timed_out) << "mpirun -np " << ranks << " ran past 90 s and was killed:\n"
                            << r.output;
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0)
      << "mpirun -np " << ranks << " ended with "
      << (WIFEXITED(r.status) ? "exit status " + std::to_string(WEXITSTATUS(r.status))
                              : "signal " + std::to_string(WTERMSIG(r.status)))
      << " after " << r.seconds << " s:\n"
      << r.output;
  // The ranks' summaries, for the log.
  std::stringstream ss(r.output);
  std::string line;
  while (std::getline(ss, line))
    if (line.rfind("[mpi_check", 0) == 0) std::printf("  %s\n", line.c_str());
  std::printf("  mpirun -np %d: %.1f s\n", ranks, r.seconds);
}

INSTANTIATE_TEST_SUITE_P(Ranks, MpiLaunch, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

}  // namespace
