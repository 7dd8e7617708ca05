// PeerHost and ListedIpMatches: gRPC's caller names reduced to their host,
// matched against the IP a cluster lists.
#include "worker/coordination/peer_host.h"

#include <gtest/gtest.h>

namespace mirrored::coordination {
namespace {

TEST(CoordinationPeerHostTest, DropsTheSchemeAndThePort) {
  EXPECT_EQ(PeerHost("ipv4:10.0.0.2:41234"), "10.0.0.2");
  EXPECT_EQ(PeerHost("ipv6:[::1]:41234"), "[::1]");
  EXPECT_EQ(PeerHost("ipv6:[fe80::1%eth0]:5"), "[fe80::1%eth0]");
}

TEST(CoordinationPeerHostTest, KeepsWhatItDoesNotKnow) {
  EXPECT_EQ(PeerHost(""), "");
  EXPECT_EQ(PeerHost("unix:/tmp/socket"), "unix:/tmp/socket");
  EXPECT_EQ(PeerHost("10.0.0.2:41234"), "10.0.0.2:41234");
  EXPECT_EQ(PeerHost("ipv4:10.0.0.2"), "10.0.0.2");  // no port
  EXPECT_EQ(PeerHost("ipv6:[::1]"), "[::1]");
}

TEST(CoordinationPeerHostTest, AListedIpMatchesItsCallerBracketedOrNot) {
  EXPECT_TRUE(ListedIpMatches("10.0.0.2", "10.0.0.2"));
  EXPECT_TRUE(ListedIpMatches("::1", "[::1]"));
  EXPECT_TRUE(ListedIpMatches("[::1]", "[::1]"));
  EXPECT_FALSE(ListedIpMatches("10.0.0.2", "10.0.0.3"));
}

TEST(CoordinationPeerHostTest, ANameOrAnUnknownCallerNeverMatches) {
  EXPECT_FALSE(ListedIpMatches("localhost", "localhost"));  // a name: no lookup
  EXPECT_FALSE(ListedIpMatches("host-a.example", "10.0.0.2"));
  EXPECT_FALSE(ListedIpMatches("10.0.0.2", ""));
  EXPECT_FALSE(ListedIpMatches("", ""));
}

}  // namespace
}  // namespace mirrored::coordination
