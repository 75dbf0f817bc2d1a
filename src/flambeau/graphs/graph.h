// Graph capture (CUDAGraph's role, on the CPU): the ops one thread runs between
// capture_begin() and capture_end() are recorded with their buffers; replay() runs their
// kernels again on those same buffers, with no dispatch, autograd or op hook. As with CUDA
// graphs, new inputs are copied into the tensors the capture read (its static inputs), and
// the results appear in the tensors it made (its static outputs), which the graph keeps
// alive: they are its memory pool.
//
// What a replay could not reproduce is refused (capture_end raises, naming the op): host
// syncs (item()), ops whose output shape depends on values, RNG on an explicit Generator
// (the default generator is graph-safe: each replay continues its stream), ops with no
// kernel to replay, and tensors made during the capture by code the op hook does not see.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace flambeau::graphs {

// A node's type, as CUDA graphs name theirs: "kernel", "memcpy" (copy_, a factory's
// constant), "memset" (fill_, zero_).
enum class NodeType { Kernel, Memcpy, Memset };
const char* node_type_name(NodeType t);

struct GraphNode {
  int64_t id = 0;
  NodeType type = NodeType::Kernel;
  std::string kernel_name;                   // "flambeau::mm"
  std::string op_name;                       // "mm"
  std::vector<std::vector<int64_t>> shapes;  // the tensor arguments' shapes, in order
  uint64_t correlation_id = 0;               // the profiler's id for the captured launch
};

// The topology of a captured graph (CUDAGraph.get_graph_data()).
struct GraphData {
  std::vector<GraphNode> nodes;
  // (from, to): node `to` reads what `from` wrote, or writes what `from` read or wrote.
  std::vector<std::pair<int64_t, int64_t>> edges;
  std::vector<int64_t> execution_order;  // node ids in replay order
};

class Graph {
 public:
  Graph();
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Starts recording the calling thread's ops. Error when this graph holds a capture
  // (reset() first) or the thread is capturing already.
  void capture_begin();
  // Ends recording. Error naming the first op that cannot be replayed, and why; the graph
  // is then reset.
  void capture_end();
  // Runs the captured kernels on the captured buffers. Error before a capture ended.
  void replay() const;
  // Drops the capture and its buffers.
  void reset();
  bool captured() const;

  GraphData get_graph_data() const;
  // The graph in Graphviz's dot language; debug_dump writes it to `path` (atomically).
  std::string to_dot() const;
  void debug_dump(const std::string& path) const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// Whether the calling thread is capturing.
bool is_capturing();

}  // namespace flambeau::graphs
