#include "ir/graph_io.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "ir/fb_writer.h"
#include "ir/text_format.h"

namespace dg {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Reads at most `limit` + 1 bytes; "" on success, else the reason.
std::string read_file(const std::string& path, size_t limit, std::string* out) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return std::string("cannot open: ") + std::strerror(errno);
  std::string data;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) {
    data.append(buf, n);
    if (data.size() > limit) {
      std::fclose(f);
      return "file exceeds the limit of " + std::to_string(limit) + " bytes";
    }
  }
  bool failed = std::ferror(f);
  int err = errno;
  std::fclose(f);
  if (failed) return std::string("cannot read: ") + std::strerror(err);
  *out = std::move(data);
  return "";
}

}  // namespace

bool is_graph_fb_path(const std::string& path) { return ends_with(path, ".fb"); }

LoadResult load_graph_file(const std::string& path) {
  LoadResult r;
  std::string data;
  size_t limit = FbLimits{}.max_bytes;
  if (std::string err = read_file(path, limit, &data); !err.empty()) {
    r.error = path + ": " + err;
    return r;
  }
  if (is_graph_fb_path(path)) {
    r = load_graph_fb(data.data(), data.size());
  } else {
    ParseResult p = parse_graph_text(data);
    r.graph = std::move(p.graph);
    r.error = std::move(p.error);
  }
  if (!r.ok()) {
    // One line, whatever the bytes a message quotes.
    for (char& c : r.error)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    r.error = path + ": " + r.error;
    r.graph = Graph();
  }
  return r;
}

std::string save_graph_file(const std::string& path, const Graph& g) {
  std::string data;
  try {
    data = is_graph_fb_path(path) ? write_graph_fb(g) : print_graph(g);
  } catch (const std::exception& e) {
    return path + ": " + e.what();
  }
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return path + ": cannot write: " + std::strerror(errno);
  int err = 0;
  if (std::fwrite(data.data(), 1, data.size(), f) != data.size()) err = errno ? errno : EIO;
  if (std::fclose(f) != 0 && err == 0) err = errno ? errno : EIO;
  if (err == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    std::remove(tmp.c_str());
    return path + ": cannot write: " + std::strerror(err);
  }
  return "";
}

}  // namespace dg
