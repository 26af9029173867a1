// Internal to the C API: what a dg_graph handle holds (shared by c_api.cc and c_api_builder.cc).
#pragma once
#include <string>

#include "ir/graph.h"

struct dg_graph {
  dg::Graph graph;
};

// Sets the calling thread's dg_last_error() message and returns `code`.
int dg_capi_fail(int code, std::string message);
