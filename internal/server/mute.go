package server

import (
	"context"
	"time"
)

// mute waits out the throttle of the reply just sent (Reply.Throttle, KIP-219) before the
// connection reads its next request, as Kafka mutes a throttled client's channel: the client
// was told throttle_time_ms in the response, and one that ignores it is held back all the
// same. Reading resumes after the throttle; connections.max.idle.ms counts from then. A
// stopping server does not wait: false closes the connection.
func (c *conn) mute(ctx context.Context) bool {
	d := c.throttle
	c.throttle = 0
	return c.pause(ctx, d)
}

// pause holds the connection's goroutine for d (nothing is read or written meanwhile); false
// when the server stops or ctx ends first.
func (c *conn) pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.srv.stopped:
		return false
	case <-ctx.Done():
		return false
	}
}
