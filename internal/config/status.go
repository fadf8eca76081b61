package config

import (
	"net"
	"strconv"
)

// checkStatusAddr refuses a STATUS_ADDR that is not host:port, or that is LISTEN_ADDR itself:
// the page has a listener of its own, so that the signed API's port never serves it.
func (r *report) checkStatusAddr(c *API) {
	const status, listen = "STATUS_ADDR", "LISTEN_ADDR"
	if !r.set(status) || !r.ok(status) {
		return
	}
	_, port, err := net.SplitHostPort(c.StatusAddr)
	if err != nil {
		r.addf(status, "%s: want host:port, such as 127.0.0.1:8081", r.show(status))
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		r.addf(status, "%s: port %q is not a number within 0..65535", r.show(status), port)
		return
	}
	if r.ok(listen) && c.StatusAddr == c.ListenAddr && port != "0" {
		r.addf(status, "%s is %s: the status page needs a listener of its own", r.show(status), r.show(listen))
	}
}
