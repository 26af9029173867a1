// libFuzzer target: graph.fb bytes -> load_graph_fb. Besides "no crash, no hang, no sanitizer
// report", it checks two properties: an error is one line, and whatever loads re-serializes
// and reloads to the same graph (print and hash equal).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "ir/fb_loader.h"
#include "ir/fb_writer.h"
#include "ir/graph_hash.h"
#include "ir/text_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dg::LoadResult r = dg::load_graph_fb(data, size);
  if (!r.ok()) {
    if (r.error.find('\n') != std::string::npos) std::abort();
    return 0;
  }
  std::string text = dg::print_graph(r.graph);
  std::string bytes = dg::write_graph_fb(r.graph);
  dg::LoadResult again = dg::load_graph_fb(bytes.data(), bytes.size());
  if (!again.ok() || dg::print_graph(again.graph) != text) std::abort();
  if (dg::graph_hash(again.graph) != dg::graph_hash(r.graph)) std::abort();
  if (dg::write_graph_fb(again.graph) != bytes) std::abort();
  return 0;
}
