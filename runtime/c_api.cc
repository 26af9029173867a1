// The C API of runtime/dyngen.h over the C++ runtime. No exception crosses this boundary.
#include <array>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ir/fb_loader.h"
#include "ir/graph_hash.h"
#include "ir/text_format.h"
#include "runtime/c_api_graph.h"
#include "runtime/compiler.h"
#include "runtime/dyngen.h"
#include "runtime/executable_json.h"
#include "runtime/runtime_stats.h"
#include "runtime/version.h"
struct dg_executable {
  std::shared_ptr<dg::Executable> exe;
  std::string key;
  int cache_hit;
};

namespace {
thread_local std::string t_last_error;

int fail(int code, std::string message) {
  t_last_error = std::move(message);
  return code;
}

template <class F>
int guarded(F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(DG_ERR_INTERNAL, "out of memory");
  } catch (const std::exception& e) {
    return fail(DG_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(DG_ERR_INTERNAL, "internal error");
  }
}

char* copy_string(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p) std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}
}  // namespace

int dg_capi_fail(int code, std::string message) { return fail(code, std::move(message)); }

extern "C" {

const char* dg_version(void) { return dg::dyngen_version(); }
const char* dg_last_error(void) { return t_last_error.c_str(); }
void dg_free(void* p) { std::free(p); }

int dg_graph_load(const void* data, size_t size, dg_graph** out) {
  return guarded([&]() -> int {
    if (!out || (!data && size)) return fail(DG_ERR_INVALID_INPUT, "null argument");
    auto loaded = dg::load_graph_fb(data, size);
    if (!loaded.ok()) return fail(DG_ERR_INVALID_INPUT, loaded.error);
    *out = new dg_graph{std::move(loaded.graph)};
    return DG_OK;
  });
}

int dg_graph_load_text(const char* text, dg_graph** out) {
  return guarded([&]() -> int {
    if (!out || !text) return fail(DG_ERR_INVALID_INPUT, "null argument");
    auto parsed = dg::parse_graph_text(text);
    if (!parsed.ok()) return fail(DG_ERR_INVALID_INPUT, parsed.error);
    *out = new dg_graph{std::move(parsed.graph)};
    return DG_OK;
  });
}

void dg_graph_free(dg_graph* g) { delete g; }

int dg_graph_hash(const dg_graph* g, char out[65]) {
  return guarded([&]() -> int {
    if (!g || !out) return fail(DG_ERR_INVALID_INPUT, "null argument");
    std::string h = dg::graph_hash(g->graph);
    std::memcpy(out, h.c_str(), 65);
    return DG_OK;
  });
}

int dg_graph_print(const dg_graph* g, char** out) {
  return guarded([&]() -> int {
    if (!g || !out) return fail(DG_ERR_INVALID_INPUT, "null argument");
    *out = copy_string(dg::print_graph(g->graph));
    return *out ? DG_OK : fail(DG_ERR_INTERNAL, "out of memory");
  });
}

int dg_compile(const dg_graph* g, const dg_compile_options* opts, dg_executable** out) {
  return guarded([&]() -> int {
    if (!g || !out) return fail(DG_ERR_INVALID_INPUT, "null argument");
    dg::CompileRequest req;
    if (opts) {
      if (opts->target) req.target = opts->target;
      if (opts->cache_dir) req.cache_dir = opts->cache_dir;
      if (opts->emit_dir) req.emit_dir = opts->emit_dir;
      if (opts->source_arch) req.source_arch = opts->source_arch;
      if (opts->disabled_passes) {
        std::string list = opts->disabled_passes;
        size_t start = 0;
        while (start <= list.size()) {
          size_t comma = list.find(',', start);
          std::string name = list.substr(start, comma - start);
          if (!name.empty()) req.disabled_passes.insert(name);
          if (comma == std::string::npos) break;
          start = comma + 1;
        }
      }
    }
    dg::CompileOutcome o = dg::compile_graph(g->graph, req);
    if (!o.ok()) return fail(o.status, o.error);
    *out = new dg_executable{o.executable, o.key, static_cast<int>(o.cache_hit)};
    return DG_OK;
  });
}

void dg_executable_free(dg_executable* e) { delete e; }

int dg_executable_info(const dg_executable* e, char key[65], int* cache_hit, int* num_inputs,
                       int* num_outputs) {
  return guarded([&]() -> int {
    if (!e) return fail(DG_ERR_INVALID_INPUT, "null argument");
    if (key) std::memcpy(key, e->key.c_str(), std::min<size_t>(65, e->key.size() + 1));
    if (cache_hit) *cache_hit = e->cache_hit;
    if (num_inputs) *num_inputs = e->exe->num_inputs();
    if (num_outputs) *num_outputs = e->exe->num_outputs();
    return DG_OK;
  });
}

int dg_executable_describe(const dg_executable* e, char** json) {
  return guarded([&]() -> int {
    if (!e || !json) return fail(DG_ERR_INVALID_INPUT, "null argument");
    dg::Json description = dg::describe_executable_json(*e->exe, e->key, e->cache_hit);
    *json = copy_string(dg::json_text(description));
    return *json ? DG_OK : fail(DG_ERR_INTERNAL, "out of memory");
  });
}

int dg_prepare(const dg_executable* e, const dg_tensor* inputs, int num_inputs, dg_tensor* outputs,
               int num_outputs, size_t* workspace_bytes) {
  return guarded([&]() -> int {
    if (!e || (!inputs && num_inputs) || (!outputs && num_outputs) || !workspace_bytes)
      return fail(DG_ERR_INVALID_INPUT, "null argument");
    dg::Status s = e->exe->prepare(inputs, num_inputs, outputs, num_outputs, workspace_bytes);
    return s.ok() ? DG_OK : fail(DG_ERR_LAUNCH, s.message());
  });
}

int dg_launch(const dg_executable* e, const dg_tensor* inputs, int num_inputs,
              const dg_tensor* outputs, int num_outputs, void* workspace, void* stream) {
  return guarded([&]() -> int {
    if (!e || (!inputs && num_inputs) || (!outputs && num_outputs))
      return fail(DG_ERR_INVALID_INPUT, "null argument");
    dg::Status s = e->exe->launch(inputs, num_inputs, outputs, num_outputs, workspace, stream);
    if (!s.ok()) return fail(DG_ERR_LAUNCH, s.message());
    dg::count_stat(dg::Stat::launches);
    return DG_OK;
  });
}

int dg_launch_dry_run(const dg_executable* e, const dg_tensor* inputs, int num_inputs,
                      const dg_tensor* outputs, int num_outputs, void* workspace) {
  return guarded([&]() -> int {
    if (!e || (!inputs && num_inputs) || (!outputs && num_outputs))
      return fail(DG_ERR_INVALID_INPUT, "null argument");
    dg::LaunchBatch batch;
    dg::Status s = e->exe->pack(inputs, num_inputs, outputs, num_outputs, workspace, &batch);
    return s.ok() ? DG_OK : fail(DG_ERR_LAUNCH, s.message());
  });
}

void dg_get_stats(dg_stats* out) {
  if (!out) return;
  dg::RuntimeStats s = dg::runtime_stats();
#define DG_STAT(name, doc) out->name = s.name;
#include "runtime/dyngen_stats.def"
#undef DG_STAT
}

int dg_stats_count(void) { return dg::kStatCount; }

const char* dg_stats_name(int i) {
  return i >= 0 && i < dg::kStatCount ? dg::stat_infos()[i].name : nullptr;
}

const char* dg_stats_doc(int i) {
  return i >= 0 && i < dg::kStatCount ? dg::stat_infos()[i].doc : nullptr;
}

void dg_stats_values(int64_t* out, int n) {
  if (!out) return;
  const std::array<int64_t, dg::kStatCount> values = dg::stat_values();
  for (int i = 0; i < n && i < dg::kStatCount; ++i) out[i] = values[i];
}

void dg_reset_stats(void) { dg::reset_runtime_stats(); }

}  // extern "C"
