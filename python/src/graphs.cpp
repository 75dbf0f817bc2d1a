// flambeau._C._graphs: graph capture (graphs/graph.h); flambeau.graphs wraps it with
// torch.cuda's names (CUDAGraph, graph, is_current_stream_capturing).
#include "bindings.h"
#include "flambeau/graphs/graph.h"

namespace flambeau::python {

void bind_graphs(nb::module_& m) {
  nb::module_ g = m.def_submodule("_graphs", "Graph capture (graphs/graph.h)");
  using graphs::Graph;
  nb::class_<Graph>(g, "Graph")
      .def(nb::init<>())
      .def("capture_begin", &Graph::capture_begin)
      .def("capture_end", &Graph::capture_end)
      .def("replay", &Graph::replay, release_gil())
      .def("reset", &Graph::reset)
      .def("captured", &Graph::captured)
      .def("to_dot", &Graph::to_dot)
      .def("debug_dump", &Graph::debug_dump, nb::arg("path"))
      .def("get_graph_data", [](const Graph& self) {
        const graphs::GraphData d = self.get_graph_data();
        nb::list nodes, edges;
        for (const graphs::GraphNode& n : d.nodes) {
          nb::dict node;
          node["id"] = n.id;
          node["type"] = graphs::node_type_name(n.type);
          node["kernel_name"] = n.kernel_name;
          node["op_name"] = n.op_name;
          nb::list shapes;
          for (const auto& s : n.shapes) shapes.append(nb::tuple(nb::cast(s)));
          node["shapes"] = shapes;
          node["correlation_id"] = n.correlation_id;
          nodes.append(node);
        }
        for (const auto& [from, to] : d.edges) edges.append(nb::make_tuple(from, to));
        nb::dict out;
        out["nodes"] = nodes;
        out["edges"] = edges;
        out["execution_order"] = nb::cast(d.execution_order);
        return out;
      });
  g.def("is_capturing", &graphs::is_capturing);
}

}  // namespace flambeau::python
