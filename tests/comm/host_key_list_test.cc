#include "worker/comm/host_key_list.h"

#include <gtest/gtest.h>

namespace mirrored {
namespace {

TEST(HostKeyListTest, RoundTripsAnyBytes) {
  const std::vector<std::string> keys = {"0|boot-a|pid:1|user 7", "", "12:34", std::string("a\0b\n", 4)};
  auto back = SplitHostKeys(JoinHostKeys(keys), 4);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, keys);
}

TEST(HostKeyListTest, RefusesAWrongCountOrDamage) {
  EXPECT_EQ(SplitHostKeys(JoinHostKeys({"a", "b"}), 3).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitHostKeys("5:abc", 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitHostKeys("x:abc", 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitHostKeys("3abc", 1).status().code(), StatusCode::kInvalidArgument);
  auto none = SplitHostKeys("", 0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace mirrored
