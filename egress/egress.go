// Package egress is the address policy of every connection Playhead opens to an address a
// user gave it (an imported video's link, a webhook's URL): only globally reachable addresses,
// checked on the address actually dialled, after DNS resolution, so that neither a hostname
// that resolves to a private address nor a redirect to one makes the server a proxy into its
// own network. The importer's fetcher and the webhook sender both dial through Control.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// ErrForbiddenAddress is a connection refused because the address is not public (loopback,
// private, link-local, multicast, unspecified): the server must not be a proxy into its own
// network.
var ErrForbiddenAddress = errors.New("address not allowed")

// CheckHost resolves host (a name or an address literal) and returns an error wrapping
// ErrForbiddenAddress, naming the address, when any of its addresses is not allowed. It is the
// early check of an address that will be dialled later (a webhook URL at registration); the
// dial itself must still go through Control, because the name may resolve elsewhere by then.
func CheckHost(ctx context.Context, host string, allow func(netip.Addr) bool) error {
	if ip, err := netip.ParseAddr(host); err == nil {
		if !allow(ip) {
			return fmt.Errorf("%w: %s", ErrForbiddenAddress, ip)
		}
		return nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", host, err)
	}
	for _, ip := range addrs {
		if !allow(ip) {
			return fmt.Errorf("%w: %s resolves to %s", ErrForbiddenAddress, host, ip)
		}
	}
	return nil
}

// Control returns a net.Dialer Control that runs on every connection after DNS resolution,
// with the address about to be dialled, before any packet is sent to it.
func Control(allow func(netip.Addr) bool) func(string, string, syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !allow(ap.Addr()) {
			return fmt.Errorf("%w: %s", ErrForbiddenAddress, address)
		}
		return nil
	}
}

// Public reports whether ip is an address Playhead may reach by default: a global unicast
// address, in IPv4 or IPv6, and not one of the special-purpose blocks that are not globally
// reachable (IANA's registries). IPv6 forms that carry an IPv4 address — IPv4-mapped, NAT64
// (64:ff9b::/96), 6to4 (2002::/16), Teredo (2001::/32) — are judged by the IPv4 address inside,
// because that is where the packets end up: [64:ff9b::7f00:1] is 127.0.0.1 through a NAT64
// gateway. The deprecated IPv4-compatible (::/96) and site-local (fec0::/10) forms, and the
// local-use NAT64 prefix (64:ff9b:1::/48), are refused outright.
func Public(ip netip.Addr) bool {
	switch {
	case !ip.IsValid():
		return false
	case ip.Is4() || ip.Is4In6():
		return public4(ip.Unmap())
	case nat64.Contains(ip):
		return public4(v4At(ip, 12))
	case sixToFour.Contains(ip):
		return public4(v4At(ip, 2))
	case teredo.Contains(ip):
		// The Teredo server's address, and the client's, stored inverted.
		client := v4At(ip, 12).As4()
		for i := range client {
			client[i] ^= 0xff
		}
		return public4(v4At(ip, 4)) && public4(netip.AddrFrom4(client))
	case !globalUnicast6.Contains(ip):
		// Everything outside 2000::/3: ::/96 and ::1, 64:ff9b:1::/48, 100::/64, fc00::/7,
		// fe80::/10, fec0::/10, ff00::/8 and the unassigned rest.
		return false
	}
	for _, p := range notGlobal6 {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

var (
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
	teredo         = netip.MustParsePrefix("2001::/32")
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
	// notGlobal6 are the blocks inside 2000::/3 that are not globally reachable.
	notGlobal6 = []netip.Prefix{
		netip.MustParsePrefix("2001::/23"),     // IETF protocol assignments (benchmarking, ORCHID, …)
		netip.MustParsePrefix("2001:db8::/32"), // documentation
		netip.MustParsePrefix("3fff::/20"),     // documentation
	}
	// notGlobal4 are the IPv4 blocks that are not globally reachable, beyond what net/netip
	// names (loopback, private, link-local, multicast, unspecified).
	notGlobal4 = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
		netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT: private in practice
		netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
		netip.MustParsePrefix("192.0.2.0/24"),    // documentation
		netip.MustParsePrefix("192.88.99.0/24"),  // 6to4 relay anycast (deprecated)
		netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
		netip.MustParsePrefix("198.51.100.0/24"), // documentation
		netip.MustParsePrefix("203.0.113.0/24"),  // documentation
		netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
	}
)

func public4(ip netip.Addr) bool {
	if !ip.Is4() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsMulticast() || ip.IsUnspecified() {
		return false
	}
	for _, p := range notGlobal4 {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// v4At returns the IPv4 address stored in bytes at..at+3 of an IPv6 address.
func v4At(ip netip.Addr, at int) netip.Addr {
	b := ip.As16()
	return netip.AddrFrom4([4]byte(b[at : at+4]))
}
