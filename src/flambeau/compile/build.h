// Building generated C++ into a shared library with the system compiler, through an on-disk
// cache: the library of a source is found by a hash of the source, the flags and the
// compiler's version, so a second process running the same program starts no compiler.
// Entries are written atomically (temporary names, then rename) with a checksum file; an
// entry whose checksum does not match or that dlopen refuses is rebuilt, never loaded. A
// cache directory that cannot be written falls back to a private temporary one. The
// compilers run in compile workers (workers.h), several at once when several threads build.
//
// The cache directory: $FLAMBEAU_CACHE_DIR, else $XDG_CACHE_HOME/flambeau/compile, else
// ~/.cache/flambeau/compile. The compiler: $CXX, else g++.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace flambeau::compiler {

struct Library {
  void* handle = nullptr;  // from dlopen (kept open for the process's life)
  std::string path;
  bool built = false;      // false when it came from the cache
  // The address of the extern "C" symbol `name`; Error when it is missing.
  void* symbol(const std::string& name) const;
};

// The library of `source` (C++17), built with -O3 -march=native when not cached. A compiler
// error raises Error with the path of the source and the compiler's message.
Library load_library(const std::string& source);
// The libraries of several sources, built in parallel (up to workers::max_workers() at once);
// the first error, in the order of `sources`, is raised after all have finished.
std::vector<Library> load_libraries(const std::vector<std::string>& sources);

// A compiler with its flags, and what it makes (".so": a shared library, "": a program).
struct Toolchain {
  std::string compiler;
  std::vector<std::string> flags;
  std::string suffix;
  bool in_process = false;  // run from this process, not in a compile worker (the worker's own build)
};
// $CXX (else g++) with -O3 -march=native ... -shared: libraries this process can load.
Toolchain native_toolchain();
// The path of what tc builds from source: the cached one when its checksum holds and
// usable(path) (when given) accepts it, else a new build (*built tells which).
std::string build(const std::string& source, const Toolchain& tc, bool* built = nullptr,
                  const std::function<bool(const std::string&)>& usable = nullptr);
// Runs argv (no shell) with its output into the file `log`; its exit status (-1: no start).
int run_program(const std::vector<std::string>& argv, const std::string& log);

std::string cache_dir();
// How many times this process ran the compiler, the compile worker's own build aside (tests
// check a warm cache starts none).
int compiler_runs();

}  // namespace flambeau::compiler
