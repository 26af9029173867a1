// Cases for the grouped-experts ops (Note [Grouped experts ops]): offsets and the stable order of
// a routing, grouped_mm in both weight forms and layouts, its weight gradient, and the errors for
// an expert index out of range and for offsets that are not a segmentation of the rows.
#include "op_case.h"

namespace dg::testing {

void add_grouped_cases(std::vector<OpCase>& cases) {
  cases.push_back(
      {OpKind::kExpertOffsets, "inclusive_counts_and_bad_index", [] {
         Graph g =
             one_op(OpKind::kExpertOffsets, {{DType::kI64, {3, 2}}}, {{"num_experts", int64_t{4}}});
         // experts 2,0 | 2,3 | 0,2: counts 2,0,3,1 (expert 1 empty)
         expect_tensor(run1(g, {T(DType::kI64, {3, 2}, {2, 0, 2, 3, 0, 2})}), DType::kI32, {4},
                       {2, 2, 5, 6});
         std::string e = run_error(g, {T(DType::kI64, {3, 2}, {2, 0, 4, 3, 0, 2})});
         EXPECT_NE(e.find("expert index 4 at position 2 is out of range"), std::string::npos) << e;
         e = run_error(g, {T(DType::kI64, {3, 2}, {2, -1, 1, 3, 0, 2})});
         EXPECT_NE(e.find("out of range"), std::string::npos) << e;
       }});
  cases.push_back({OpKind::kExpertOrder, "stable_counting_sort", [] {
                     Graph g = one_op(OpKind::kExpertOrder, {{DType::kI32, {3, 2}}},
                                      {{"num_experts", int64_t{4}}});
                     // expert 0: flat 1, 4; expert 2: flat 0, 2, 5; expert 3: flat 3
                     expect_tensor(run1(g, {T(DType::kI32, {3, 2}, {2, 0, 2, 3, 0, 2})}),
                                   DType::kI32, {6}, {1, 4, 0, 2, 5, 3});
                     std::string e = run_error(g, {T(DType::kI32, {3, 2}, {2, 0, 2, 9, 0, 2})});
                     EXPECT_NE(e.find("out of range"), std::string::npos) << e;
                   }});
  cases.push_back(
      {OpKind::kGroupedMm, "fused_nk_rows_past_the_end_are_zero", [] {
         Graph g = one_op(OpKind::kGroupedMm,
                          {{DType::kF32, {4, 2}}, {DType::kI32, {2}}, {DType::kF32, {2, 1, 2}}},
                          {{"w_layout", int64_t{0}}});
         HostTensor a = T(DType::kF32, {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
         HostTensor w = T(DType::kF32, {2, 1, 2}, {1, 1, 1, -1});
         // rows 0: expert 0 (sum), rows 1-2: expert 1 (difference), row 3: past offs[1]
         expect_tensor(run1(g, {a, T(DType::kI32, {2}, {1, 3}), w}), DType::kF32, {4, 1},
                       {3, -1, -1, 0});
         std::string e = run_error(g, {a, T(DType::kI32, {2}, {3, 1}), w});
         EXPECT_NE(e.find("offs[1] = 1 is not a non-decreasing offset"), std::string::npos) << e;
         e = run_error(g, {a, T(DType::kI32, {2}, {1, 5}), w});
         EXPECT_NE(e.find("within [0, 4]"), std::string::npos) << e;
       }});
  cases.push_back(
      {OpKind::kGroupedMm, "separate_kn_with_an_empty_expert", [] {
         Graph g = one_op(OpKind::kGroupedMm,
                          {{DType::kBF16, {3, 2}},
                           {DType::kI32, {3}},
                           {DType::kBF16, {2, 1}},
                           {DType::kBF16, {2, 1}},
                           {DType::kBF16, {2, 1}}},
                          {{"w_layout", int64_t{1}}});
         HostTensor a = T(DType::kBF16, {3, 2}, {1, 2, 3, 4, 5, 6});
         // expert 0: rows 0-1 with w [1, 0]^T; expert 1 empty; expert 2: row 2 with [0, 2]^T
         expect_tensor(run1(g, {a, T(DType::kI32, {3}, {2, 2, 3}), T(DType::kBF16, {2, 1}, {1, 0}),
                                T(DType::kBF16, {2, 1}, {9, 9}), T(DType::kBF16, {2, 1}, {0, 2})}),
                       DType::kBF16, {3, 1}, {1, 3, 12});
       }});
  cases.push_back({OpKind::kGroupedMmWgrad, "per_segment_outer_products", [] {
                     Graph g =
                         one_op(OpKind::kGroupedMmWgrad,
                                {{DType::kF32, {3, 1}}, {DType::kF32, {3, 2}}, {DType::kI32, {3}}});
                     HostTensor dy = T(DType::kF32, {3, 1}, {1, 2, 3});
                     HostTensor x = T(DType::kF32, {3, 2}, {1, 1, 2, 0, 0, 5});
                     // expert 0: rows 0-1 -> [1*1 + 2*2, 1*1 + 2*0]; expert 1 empty; expert 2: row
                     // 2 -> [0, 15]
                     expect_tensor(run1(g, {dy, x, T(DType::kI32, {3}, {2, 2, 3})}), DType::kF32,
                                   {3, 1, 2}, {5, 1, 0, 0, 0, 15});
                   }});
}

}  // namespace dg::testing
