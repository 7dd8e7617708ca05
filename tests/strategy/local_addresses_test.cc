// Where the chief listens, and whether a cluster address is this host's
// (the warning about a "task" given to the wrong host), on addresses that
// need no name service.
#include "worker/strategy/local_addresses.h"

#include <gtest/gtest.h>

namespace mirrored {
namespace {

TEST(LocalAddressesTest, TheChiefListensOnALiteralAddressOrOnEveryInterfaceForAName) {
  EXPECT_EQ(ListenAddress(HostPort{"10.0.0.1", 2222}), "10.0.0.1:2222");
  EXPECT_EQ(ListenAddress(HostPort{"::1", 2222}), "[::1]:2222");
  EXPECT_EQ(ListenAddress(HostPort{"localhost", 2222}), "localhost:2222");
  EXPECT_EQ(ListenAddress(HostPort{"h1.example", 2222}), "0.0.0.0:2222");
}

// TEST-NET addresses (RFC 5737) are no host's: each is named once, in the
// order given, even one that begins another (192.0.2.1 in 192.0.2.12).
TEST(LocalAddressesTest, NamesEveryAddressThatIsNotThisHostsOnce) {
  EXPECT_EQ(NonLocalAddresses(std::vector<std::string>{"192.0.2.12", "192.0.2.1", "192.0.2.12"}),
            "192.0.2.12, 192.0.2.1");
  EXPECT_EQ(NonLocalAddresses(std::vector<std::string>{"198.51.100.7"}), "198.51.100.7");
  EXPECT_EQ(NonLocalAddresses("192.0.2.12"), "192.0.2.12");
}

TEST(LocalAddressesTest, SaysNothingWhenAnyAddressIsThisHosts) {
  EXPECT_EQ(NonLocalAddresses(std::vector<std::string>{"192.0.2.12", "127.0.0.1"}), "");
  EXPECT_EQ(NonLocalAddresses("127.0.0.1"), "");
  EXPECT_EQ(NonLocalAddresses(std::vector<std::string>{}), "");
}

TEST(LocalAddressesTest, AnIpLiteralResolves) {
  EXPECT_EQ(ResolveError("127.0.0.1"), "");
  EXPECT_EQ(GlooInterfaceAddress(HostPort{"10.0.0.2", 2222}, HostPort{"10.0.0.1", 2222}), "10.0.0.2");
  EXPECT_EQ(GlooInterfaceAddress(std::nullopt, HostPort{"127.0.0.1", 2222}), "127.0.0.1");
}

}  // namespace
}  // namespace mirrored

namespace mirrored {
namespace {

// Probe D11: NCCL's bootstrap listener opened on the external interface.
// GPU tasks pin NCCL to the interface that holds their address.
TEST(LocalAddressesTest, InterfaceNameOfAnAddressOfThisHost) {
  EXPECT_EQ(InterfaceNameOf("127.0.0.1"), "lo");
  EXPECT_EQ(InterfaceNameOf("127.0.1.1"), "lo");  // Debian's own-name alias
  EXPECT_EQ(InterfaceNameOf("192.0.2.99"), "");   // TEST-NET-1: no host holds it
  EXPECT_EQ(InterfaceNameOf("not-an-address"), "");
}

}  // namespace
}  // namespace mirrored
