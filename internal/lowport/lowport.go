// Package lowport gives test and embedded servers a loopback port below the kernel's
// ephemeral range. A server whose port is chosen once and bound again at each restart (an
// embedded cluster's node, a test's broker process) cannot use a port from that range:
// another process's outgoing connection or :0 listener (other test packages run alongside)
// could take it meanwhile, and the restart would fail "address already in use". It imports
// nothing of the project's, so every package, and every package's tests, can use it.
package lowport

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// first is the lowest port tried.
const first = 10000

// Listen listens on a free loopback port in [10000, the ephemeral range's start), or on any
// port when there is no room below the ephemeral range.
func Listen() (net.Listener, error) {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	if low-first < 1000 {
		return net.Listen("tcp", "127.0.0.1:0")
	}
	var err error
	for range 200 {
		var l net.Listener
		if l, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(first+rand.IntN(low-first))); err == nil {
			return l, nil
		}
	}
	return nil, err
}
