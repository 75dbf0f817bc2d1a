// See build.h.
#include "flambeau/compile/build.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <system_error>
#include <thread>
#include <vector>

#include "flambeau/compile/workers.h"
#include "flambeau/core/error.h"
#include "flambeau/profiler/profiler.h"

extern char** environ;

namespace flambeau::compiler {

namespace fs = std::filesystem;

namespace {

const char* kFlags[] = {"-O3", "-march=native", "-std=c++17", "-fPIC", "-shared", "-ffp-contract=off",
                        "-fno-math-errno"};

std::atomic<int> g_compiler_runs{0};
std::atomic<uint64_t> g_builds{0};  // tells apart the temporary names of builds in flight

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string hex(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", (unsigned long long)v);
  return b;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

bool write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  return bool(f);
}

std::string compiler() {
  const char* cxx = std::getenv("CXX");
  return cxx && *cxx ? cxx : "g++";
}

// Runs argv (no shell) with stdout and stderr into `log`; returns the exit status (-1 when
// it could not start).
int run(const std::vector<std::string>& argv, const fs::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A compiler's version line (part of the cache key), read once per compiler.
std::string compiler_version(const std::string& cxx) {
  static std::mutex mutex;
  static std::map<std::string, std::string> versions;
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, fresh] = versions.emplace(cxx, "");
  if (fresh) {
    const fs::path log = fs::temp_directory_path() / ("flambeau-cxx-version-" + std::to_string(getpid()));
    if (run({cxx, "--version"}, log) == 0) it->second = read_file(log);
    std::error_code ec;
    fs::remove(log, ec);
    it->second = it->second.substr(0, it->second.find('\n'));
  }
  return it->second;
}

// The private temporary directory used when the cache cannot be written (empty until then).
std::mutex g_fallback_mutex;
fs::path g_fallback;
fs::path fallback_dir() {
  std::lock_guard<std::mutex> lock(g_fallback_mutex);
  return g_fallback;
}

// A lock per cache key: threads building one source wait for the first, then find its entry.
std::mutex& key_mutex(const std::string& key) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<std::mutex>> locks;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<std::mutex>& m = locks[key];
  if (!m) m = std::make_unique<std::mutex>();
  return *m;
}

// A directory we can write: the cache, or a private temporary one when it can't be.
fs::path writable_dir() {
  std::error_code ec;
  fs::path dir = cache_dir();
  fs::create_directories(dir, ec);
  const fs::path probe = dir / (".probe-" + std::to_string(getpid()));
  if (!ec && write_file(probe, "ok")) {
    fs::remove(probe, ec);
    return dir;
  }
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tmpl = (fs::temp_directory_path() / "flambeau-compile-XXXXXX").string();
    if (char* d = mkdtemp(tmpl.data())) {
      std::lock_guard<std::mutex> lock(g_fallback_mutex);
      g_fallback = d;
    }
  });
  FLB_CHECK(!fallback_dir().empty(), Error, "[compile] neither the cache directory ", dir.string(),
            " nor a temporary directory can be written");
  return fallback_dir();
}

}  // namespace

std::string cache_dir() {
  if (const char* d = std::getenv("FLAMBEAU_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return (fs::path(x) / "flambeau" / "compile").string();
  const char* home = std::getenv("HOME");
  return (fs::path(home && *home ? home : "/tmp") / ".cache" / "flambeau" / "compile").string();
}

int compiler_runs() { return g_compiler_runs.load(); }

void* Library::symbol(const std::string& name) const {
  void* p = dlsym(handle, name.c_str());
  FLB_CHECK(p, Error, "[compile] ", path, " has no symbol ", name);
  return p;
}

Toolchain native_toolchain() {
  Toolchain tc{compiler(), {}, ".so"};
  for (const char* f : kFlags) tc.flags.emplace_back(f);
  return tc;
}

std::string build(const std::string& source, const Toolchain& tc, bool* built,
                  const std::function<bool(const std::string&)>& usable) {
  const profiler::Scope scope("compile: build kernel library", profiler::EventKind::Compile);
  std::string key_text = source + "\n" + tc.compiler + "\n" + compiler_version(tc.compiler);
  for (const std::string& f : tc.flags) key_text += " " + f;
  const std::string key = hex(fnv1a(key_text));
  std::lock_guard<std::mutex> key_lock(key_mutex(key));
  if (built) *built = false;
  // A cached entry (in the cache, or the fallback directory if one was made): the artifact
  // and its checksum file, which must agree.
  for (const fs::path& dir : {fs::path(cache_dir()), fallback_dir()}) {
    if (dir.empty()) continue;
    const fs::path out = dir / (key + tc.suffix), sum = dir / (key + ".sum");
    std::error_code ec;
    if (!fs::exists(out, ec) || !fs::exists(sum, ec)) continue;
    if (read_file(sum) == hex(fnv1a(read_file(out))) && (!usable || usable(out.string()))) return out.string();
    fs::remove(out, ec);  // corrupt: rebuilt below
    fs::remove(sum, ec);
  }
  const fs::path dir = writable_dir();
  const std::string tag = key + "." + std::to_string(getpid()) + "." + std::to_string(g_builds++) + "." +
                          hex(fnv1a(std::to_string(std::rand())));
  const fs::path src = dir / (key + ".cpp"), tmp_src = dir / (tag + ".cpp"), tmp_out = dir / (tag + tc.suffix),
                 log = dir / (tag + ".log"), out = dir / (key + tc.suffix), sum = dir / (key + ".sum");
  std::error_code ec;
  FLB_CHECK(write_file(tmp_src, source), Error, "[compile] cannot write ", tmp_src.string(), " (disk full?)");
  fs::rename(tmp_src, src, ec);
  std::vector<std::string> argv{tc.compiler};
  argv.insert(argv.end(), tc.flags.begin(), tc.flags.end());
  argv.insert(argv.end(), {src.string(), "-o", tmp_out.string()});
  if (!tc.in_process) ++g_compiler_runs;
  int status = -1;
  try {
    status = tc.in_process ? run(argv, log) : workers::run(argv, log);
  } catch (const Error& e) {
    fs::remove(log, ec);
    fs::remove(tmp_out, ec);
    throw Error(std::string(e.what()) + " (the generated source " + src.string() + ")");
  }
  if (status != 0) {
    std::string message = read_file(log);
    fs::remove(log, ec);
    fs::remove(tmp_out, ec);
    if (message.size() > 4000) message = message.substr(0, 4000) + "...";
    throw Error("[compile] " + tc.compiler + " failed (status " + std::to_string(status) + ") on the generated source " +
                src.string() + ":\n" + message);
  }
  fs::remove(log, ec);
  const fs::path tmp_sum = dir / (tag + ".sum");
  FLB_CHECK(write_file(tmp_sum, hex(fnv1a(read_file(tmp_out)))), Error, "[compile] cannot write ", tmp_sum.string());
  fs::rename(tmp_out, out, ec);
  if (!ec) fs::rename(tmp_sum, sum, ec);
  FLB_CHECK(!ec, Error, "[compile] cannot move the build into ", dir.string(), ": ", ec.message());
  if (built) *built = true;
  return out.string();
}

Library load_library(const std::string& source) {
  void* handle = nullptr;
  bool built = false;
  const std::string path = build(source, native_toolchain(), &built, [&handle](const std::string& p) {
    return (handle = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr;
  });
  if (!handle) handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  FLB_CHECK(handle, Error, "[compile] dlopen of ", path, " failed: ", dlerror());
  return {handle, path, built};
}

std::vector<Library> load_libraries(const std::vector<std::string>& sources) {
  std::vector<Library> libs(sources.size());
  std::vector<std::exception_ptr> errors(sources.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < sources.size();) {
      try {
        libs[i] = load_library(sources[i]);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  const size_t n = std::min(sources.size(), size_t(workers::max_workers()));
  for (size_t t = 1; t < n; ++t) {
    try {
      threads.emplace_back(work);
    } catch (const std::system_error&) {  // no thread: the others take its share
      break;
    }
  }
  work();
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return libs;
}

int run_program(const std::vector<std::string>& argv, const std::string& log) { return run(argv, log); }

}  // namespace flambeau::compiler
