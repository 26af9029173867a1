#include "ir/strided_view.h"

#include <algorithm>

namespace dg {

namespace {

bool is_view_op(OpKind op) {
  return op == OpKind::kReshape || op == OpKind::kPermute || op == OpKind::kSlice ||
         op == OpKind::kExpand;
}

int64_t norm_axis(int64_t a, size_t rank) { return a < 0 ? a + static_cast<int64_t>(rank) : a; }

// Strides for `to` when reshaping a view of shape `from` with `strides`, or nullopt. Dims are
// matched in chunks of equal product; the dims of an old chunk must be contiguous with each other.
std::optional<std::vector<SymExpr>> reshape_strides(const std::vector<SymExpr>& from,
                                                    const std::vector<SymExpr>& strides,
                                                    const std::vector<SymExpr>& to) {
  std::vector<size_t> old_dims;  // dims of size 1 carry no layout
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != SymExpr(1)) old_dims.push_back(i);
  std::vector<SymExpr> out(to.size(), SymExpr(0));
  size_t oi = 0, j = 0;
  while (j < to.size()) {
    if (to[j] == SymExpr(1)) {
      ++j;
      continue;
    }
    if (oi >= old_dims.size()) return std::nullopt;
    size_t o0 = oi, j0 = j;
    SymExpr po = from[old_dims[oi++]], pn = to[j++];
    while (po != pn) {
      auto co = po.as_const(), cn = pn.as_const();
      if (!co || !cn) return std::nullopt;  // a symbolic split or merge
      if (*co < *cn) {
        if (oi >= old_dims.size()) return std::nullopt;
        po = po * from[old_dims[oi++]];
      } else {
        while (j < to.size() && to[j] == SymExpr(1)) ++j;
        if (j >= to.size()) return std::nullopt;
        pn = pn * to[j++];
      }
    }
    for (size_t k = o0; k + 1 < oi; ++k)  // the old chunk must be one contiguous run
      if (strides[old_dims[k]] != strides[old_dims[k + 1]] * from[old_dims[k + 1]])
        return std::nullopt;
    SymExpr s = strides[old_dims[oi - 1]];
    for (size_t k = j; k-- > j0;) {
      if (to[k] == SymExpr(1)) continue;
      out[k] = s;
      s = s * to[k];
    }
  }
  if (oi != old_dims.size()) return std::nullopt;
  return out;
}

}  // namespace

std::optional<StridedView> strided_view_of(const Graph& g, ValueId v) {
  std::vector<int> chain;
  ValueId base = v;
  while (g.value(base).producer >= 0 && is_view_op(g.nodes[g.value(base).producer].op)) {
    chain.push_back(g.value(base).producer);
    base = g.nodes[chain.back()].inputs[0];
  }
  std::reverse(chain.begin(), chain.end());
  StridedView view;
  view.base = base;
  view.shape = g.tensor(base).shape;
  view.strides = g.tensor(base).contiguous_strides();
  view.offset = SymExpr(0);
  view.nodes = chain;
  for (int ni : chain) {
    const Node& n = g.nodes[ni];
    const std::vector<SymExpr>& out = g.tensor(n.output).shape;
    switch (n.op) {
      case OpKind::kPermute: {
        std::vector<SymExpr> strides;
        const std::vector<int64_t> dims = n.attrs.get_ints("dims").value_or(std::vector<int64_t>{});
        if (dims.size() != view.shape.size()) return std::nullopt;
        for (int64_t d : dims) strides.push_back(view.strides[norm_axis(d, view.shape.size())]);
        view.strides = strides;
        break;
      }
      case OpKind::kSlice: {
        int64_t d = norm_axis(*n.attrs.get_int("dim"), view.shape.size());
        view.offset = view.offset + (*n.attrs.get_syms("start"))[0] * view.strides[d];
        view.strides[d] = view.strides[d] * SymExpr(n.attrs.get_int("step").value_or(1));
        break;
      }
      case OpKind::kExpand: {
        std::vector<SymExpr> strides(out.size(), SymExpr(0));
        size_t lead = out.size() - view.shape.size();
        for (size_t i = 0; i < view.shape.size(); ++i)
          strides[lead + i] = view.shape[i] == out[lead + i] ? view.strides[i] : SymExpr(0);
        view.strides = strides;
        break;
      }
      case OpKind::kReshape: {
        auto strides = reshape_strides(view.shape, view.strides, out);
        if (!strides) return std::nullopt;
        view.strides = *strides;
        break;
      }
      default:
        return std::nullopt;
    }
    view.shape = out;
  }
  return view;
}

}  // namespace dg
