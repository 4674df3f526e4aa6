package egress_test

import (
	"net/netip"
	"testing"

	"github.com/playhead/playhead/egress"
)

// TestPublic: the SSRF guard must not let IPv6 forms of private addresses through (such as
// [::127.0.0.1] and [64:ff9b::7f00:1], which reach 127.0.0.1). Only global unicast passes,
// and an IPv4 address carried inside IPv6 is judged as itself.
func TestPublic(t *testing.T) {
	for addr, want := range map[string]bool{
		// IPv4
		"8.8.8.8": true, "1.1.1.1": true, "93.184.216.34": true,
		"127.0.0.1": false, "127.255.255.254": false, "10.1.2.3": false, "172.16.0.1": false, "172.31.255.255": false,
		"192.168.1.1": false, "169.254.169.254": false, "100.64.0.1": false, "100.127.255.255": false, "0.0.0.0": false,
		"0.1.2.3": false, "224.0.0.1": false, "239.255.255.250": false, "255.255.255.255": false, "240.0.0.1": false,
		"192.0.0.8": false, "192.0.2.1": false, "198.18.0.1": false, "198.51.100.1": false, "203.0.113.1": false,
		"192.88.99.1": false, "172.32.0.1": true, "100.128.0.1": true,
		// IPv4-mapped and -translated
		"::ffff:8.8.8.8": true, "::ffff:127.0.0.1": false, "::ffff:10.0.0.1": false, "::ffff:169.254.169.254": false,
		"::ffff:0:127.0.0.1": false, "::ffff:0:8.8.8.8": false,
		// IPv4-compatible (deprecated): all refused
		"::127.0.0.1": false, "::8.8.8.8": false, "::10.0.0.1": false, "::1": false, "::": false,
		// NAT64
		"64:ff9b::8.8.8.8": true, "64:ff9b::7f00:1": false, "64:ff9b::a9fe:a9fe": false, "64:ff9b::10.0.0.1": false,
		"64:ff9b:1::8.8.8.8": false, "64:ff9b:1::7f00:1": false,
		// 6to4: the IPv4 address is bytes 2–5
		"2002:808:808::1": true, "2002:7f00:1::1": false, "2002:a00:1::1": false, "2002:a9fe:a9fe::1": false,
		// Teredo: server in bytes 4–7, client inverted in bytes 12–15
		"2001:0:808:808::f7f7:f7f7": true, "2001:0:808:808::80ff:fffe": false, "2001:0:7f00:1::f7f7:f7f7": false,
		// IPv6
		"2606:4700:4700::1111": true, "2a00:1450:4001:80b::200e": true,
		"fe80::1": false, "fec0::1": false, "feff::1": false, "fc00::1": false, "fd12:3456::1": false, "ff02::1": false,
		"ff0e::1": false, "100::1": false, "2001:db8::1": false, "2001:2::1": false, "2001:10::1": false, "3fff::1": false,
		"5f00::1": false, "4000::1": false,
	} {
		if got := egress.Public(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Public(%s) = %v, want %v", addr, got, want)
		}
	}
}
