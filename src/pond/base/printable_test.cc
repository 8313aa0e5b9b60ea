#include "pond/base/printable.h"

#include <gtest/gtest.h>

namespace pond {
namespace {

TEST(PrintableTest, KeepsOneLineAndCutsLongText) {
  EXPECT_EQ(Printable("crash-cn:1@5ms"), "crash-cn:1@5ms");
  EXPECT_EQ(Printable(std::string_view("a\nb\0\"\\\xff", 7)), "a\\x0ab\\x00\\x22\\x5c\\xff");
  // (Not `std::string(64, 'x') + "..."`: once <string> comes from the tests' precompiled header,
  // GCC 12 no longer takes its inlined copy for system-header code and warns of it, wrongly, under
  // -Warray-bounds.)
  const std::string cut = std::string(64, 'x');
  EXPECT_EQ(Printable(std::string(70, 'x')), cut + "...");
  EXPECT_EQ(Printable("abcdef", 3), "abc...");
}

}  // namespace
}  // namespace pond
