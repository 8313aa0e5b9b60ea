#include "pond/check/graph_search.h"

#include <gtest/gtest.h>

#include "pond/check/dependency_graph.h"

namespace pond::check {
namespace {

using E = EdgeKind;

DependencyGraph Build(uint32_t n, std::vector<std::tuple<uint32_t, uint32_t, EdgeKind>> edges,
                      uint32_t txns = 0) {
  std::vector<DependencyGraph::RawEdge> raw;
  for (auto [a, b, k] : edges) raw.push_back(DependencyGraph::Edge(a, b, k));
  return DependencyGraph(txns ? txns : n, n, std::move(raw));
}

TEST(GraphSearchTest, FindsComponentsAndDeduplicatesEdges) {
  // 0 <-> 1 (twice), 2 -> 3 -> 4 -> 2, 5 alone.
  DependencyGraph g = Build(6, {{0, 1, E::kWw},
                                {0, 1, E::kWw},
                                {1, 0, E::kWr},
                                {2, 3, E::kRw},
                                {3, 4, E::kRw},
                                {4, 2, E::kWw},
                                {1, 2, E::kWw}});
  EXPECT_EQ(g.edge_count(), 6u);
  Components c = StronglyConnected(KindView(g, kAllMask, nullptr));
  EXPECT_EQ(c.comp[0], c.comp[1]);
  EXPECT_EQ(c.comp[2], c.comp[3]);
  EXPECT_EQ(c.comp[3], c.comp[4]);
  EXPECT_NE(c.comp[0], c.comp[2]);
  EXPECT_FALSE(c.Nontrivial(5));
  EXPECT_TRUE(c.Nontrivial(4));
  // Without rw edges the second cycle is gone.
  Components ww = StronglyConnected(KindView(g, kWwWrMask, nullptr));
  EXPECT_TRUE(ww.Nontrivial(0));
  EXPECT_FALSE(ww.Nontrivial(3));
}

TEST(GraphSearchTest, ShortestCycleInComponent) {
  // Long way 0->1->2->3->0 and a shortcut 0->3.
  DependencyGraph g =
      Build(4, {{0, 1, E::kWw}, {1, 2, E::kWw}, {2, 3, E::kWw}, {3, 0, E::kWw}, {0, 3, E::kWr}});
  KindView v(g, kAllMask, nullptr);
  Components c = StronglyConnected(v);
  SearchScratch s;
  auto cycle = ShortestPath(v, c, c.comp[0], 0, 0, s);
  ASSERT_EQ(cycle.size(), 2u);
  EXPECT_EQ(cycle[0].node, 3u);
  EXPECT_EQ(v.Kind(cycle[0].edge), E::kWr);
  EXPECT_EQ(cycle[1].node, 0u);
  auto path = ShortestPath(v, c, c.comp[0], 1, 3, s);
  ASSERT_EQ(path.size(), 2u);
  EXPECT_EQ(path[1].node, 3u);
}

TEST(GraphSearchTest, BarriersCostNothing) {
  // Txns 0..2, barriers 3 and 4: 0 -> b3 -> b4 -> 2 is one real-time hop; 0 -> 1 -> 2 two.
  DependencyGraph g = Build(5,
                            {{0, 3, E::kRealtime},
                             {3, 4, E::kRealtime},
                             {4, 2, E::kRealtime},
                             {0, 1, E::kWw},
                             {1, 2, E::kWw},
                             {2, 0, E::kRw}},
                            /*txns=*/3);
  KindView v(g, kAllMask, nullptr);
  Components c = StronglyConnected(v);
  SearchScratch s;
  auto cycle = ShortestPath(v, c, c.comp[0], 0, 0, s);
  ASSERT_EQ(cycle.size(), 4u);  // b3, b4, 2, 0
  EXPECT_EQ(cycle[2].node, 2u);
}

TEST(GraphSearchTest, LayeredViewRejectsAdjacentRw) {
  // 0 -rw-> 1 -rw-> 0 is write skew: a cycle, but not in the layered view.
  DependencyGraph skew = Build(2, {{0, 1, E::kRw}, {1, 0, E::kRw}});
  std::vector<uint8_t> all(2, 1);
  EXPECT_FALSE(StronglyConnected(LayeredView(skew, kDataMask, &all)).AnyNontrivial());
  EXPECT_TRUE(StronglyConnected(KindView(skew, kDataMask, nullptr)).AnyNontrivial());
  // 0 -rw-> 1 -wr-> 0 is G-single: a cycle in the layered view.
  DependencyGraph single = Build(2, {{0, 1, E::kRw}, {1, 0, E::kWr}});
  EXPECT_TRUE(StronglyConnected(LayeredView(single, kDataMask, &all)).AnyNontrivial());
}

TEST(GraphSearchTest, DeepChainDoesNotOverflowTheStack) {
  const uint32_t n = 1'000'000;
  std::vector<std::tuple<uint32_t, uint32_t, EdgeKind>> edges;
  for (uint32_t i = 0; i + 1 < n; i++) edges.push_back({i, i + 1, E::kWw});
  edges.push_back({n - 1, 0, E::kWr});
  DependencyGraph g = Build(n, edges);
  Components c = StronglyConnected(KindView(g, kAllMask, nullptr));
  EXPECT_EQ(c.size[c.comp[0]], n);
}

}  // namespace
}  // namespace pond::check
