// Reading and writing graph files: `.fb` is graph.fb (FlatBuffers), anything else the text form.
#pragma once
#include <string>

#include "ir/fb_loader.h"
#include "ir/graph.h"

namespace dg {

// True when `path` names a graph.fb file (extension ".fb").
bool is_graph_fb_path(const std::string& path);

// Loads and verifies a graph file. On failure, `error` is one line naming the file:
// "PATH: what is wrong". Files above FbLimits{}.max_bytes are refused.
LoadResult load_graph_file(const std::string& path);

// Writes `g` in the format the extension selects, through a temporary file renamed into place.
// Returns "" on success, else one line naming the file.
std::string save_graph_file(const std::string& path, const Graph& g);

}  // namespace dg
