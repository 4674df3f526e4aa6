package events

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// tcpEstablished is the TCP state (include/net/tcp_states.h) of a connection whose client has
// sent neither a FIN nor a reset.
const tcpEstablished = 1

// clientGone reports whether the client closed its end of conn: its FIN (or a reset) has
// arrived. It peeks at the socket without blocking and without taking a byte, so nothing the
// server reads later is lost. A write finds a closed client only after two attempts (the
// first is buffered, the peer answers it with a reset), which at the heartbeat interval takes
// about 45 s: long enough for a member who reloads a page four times to be refused a stream.
// Unknown (false) when conn is not a plain socket (TLS, a test pipe).
func clientGone(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	var b [1]byte
	_ = raw.Control(func(fd uintptr) {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case n == 0 && err == nil, errors.Is(err, syscall.ECONNRESET):
			// 0 bytes without an error is the end of the stream.
			gone = true
		case n > 0:
			// The client sent bytes after its request, which nothing reads while the stream
			// runs, and a FIN behind them is out of the peek's sight (such a client held its
			// place until a write failed): ask TCP for the connection's state instead.
			info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
			gone = err == nil && info.State != tcpEstablished
		}
		// Otherwise EAGAIN: an open connection with nothing to read.
	})
	return gone
}
