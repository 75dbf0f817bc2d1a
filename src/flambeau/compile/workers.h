// Compile workers (Inductor's subprocess pool): build.h runs its compilers in a pool of
// long-lived helper processes rather than from this process, several at once. A worker
// reads a request (a command and a log file) from a socket, runs the command with its
// output into the log, waits for it and answers its exit status.
//
// Note [The compile worker is a program of its own]
// A worker must not be a fork of this process: a long-lived fork of a large, multithreaded
// process pins its memory as it was and may inherit locks held by other threads. So a worker
// is a fresh image started with posix_spawn: a tiny C++ program whose source lives in
// workers.cpp, built by the system compiler through build.h's cache like any kernel (once per
// compiler, and not counted by compiler_runs()). Nothing has to be installed next to the
// library or the Python package, and it exists wherever compiling works. When it cannot be
// built or started, commands run from this process, as before.
//
// Workers start when the first command needs one (a warm cache starts none), are reused,
// and stop at exit. Each leads its own process group (its compiler included): a worker that
// dies is detected by the end of its socket, its group is killed by id, it is reaped and
// replaced, and the command runs once more on a fresh worker; a second death raises Error.
// Safe to call from several threads; after fork() the child starts its own workers.
#pragma once
#include <string>
#include <vector>

namespace flambeau::compiler::workers {

// Runs argv (no shell) in a worker with stdout and stderr into the file `log`; its exit
// status (-1: it could not start).
int run(const std::vector<std::string>& argv, const std::string& log);

// How many workers run at most: $FLAMBEAU_COMPILE_THREADS (torch's compile_threads), else
// min(hardware threads, 4).
int max_workers();

// The process ids of the running workers (tests kill one by its id).
std::vector<int> pids();

// Stops the workers after the commands in flight; the next run starts new ones. Also at exit
// (which waits for nothing).
void shutdown();

}  // namespace flambeau::compiler::workers
