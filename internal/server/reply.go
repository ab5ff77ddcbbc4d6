package server

import (
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/authz"
)

// Reply is what a handler gives the connection loop to send back.
//
// Exactly one of Msg and Raw is set, unless None is true (acks=0 produce), in which case
// nothing is written: Kafka sends no response to acks=0 produce requests. Close (with None)
// closes the connection instead: how Kafka tells an acks=0 producer that a write failed.
//
// Throttle > 0 mutes the connection (KIP-219): the reply (if any) is sent at once, then the
// server reads nothing more from the connection until Throttle has passed, or the server
// stops. The response's throttle_time_ms tells the client the same.
type Reply struct {
	Msg      kmsg.Response // encoded by the server at the request's version
	Raw      *Raw          // a hand-encoded body (Fetch), sent with writev + sendfile
	None     bool
	Close    bool
	Throttle time.Duration
	// Remote is how long the handler waited on others (acks=all for the followers, a Fetch
	// parked for data): the request metrics' remote time, the rest of its time being local.
	Remote time.Duration
}

// Raw is a response body made of byte slices and file ranges, in order. The server sends the
// file ranges with sendfile at an explicit offset, so record bytes never enter the heap.
// Done is called once the body is written (or the connection failed); it releases the
// segment references the file ranges hold.
type Raw struct {
	Parts []Part
	Done  func()
}

// Part is either bytes (File == nil) or N bytes of File starting at Pos.
type Part struct {
	B    []byte
	File *os.File
	Pos  int64
	N    int
}

// Len is the number of body bytes the part contributes.
func (p *Part) Len() int {
	if p.File != nil {
		return p.N
	}
	return len(p.B)
}

// Size is the whole body length.
func (r *Raw) Size() int {
	n := 0
	for i := range r.Parts {
		n += r.Parts[i].Len()
	}
	return n
}

// Conn describes the client connection a request came in on.
type Conn struct {
	ClientID   string
	RemoteAddr string
	Listener   string
	// Principal is who the connection authenticated as (authz.Anonymous on a PLAINTEXT
	// listener, or an SSL one whose client sent no certificate); set by the server before
	// the first request reaches the handler, and changed only by a re-authentication.
	Principal authz.Principal
	// TokenAuthenticated is whether the principal authenticated with a delegation token
	// (which may not ask for, renew or expire tokens); set with Principal.
	TokenAuthenticated bool
	// RequestSize is the size of the request being handled: its frame's bytes after the
	// length (Kafka's request.sizeInBytes), what the produce quota counts.
	RequestSize int
	// Release, if set, tells the connection the handler no longer reads the request's byte
	// slices (they alias the frame buffer): the buffer and the bytes it holds of
	// queued.max.request.bytes go back at once, and another request may fill it. A handler
	// that waits after it is done with the request (Produce waiting for acks=all) calls it
	// first, as Kafka's produce path releases the request buffer and clears the records of a
	// request it parks. Calling it again does nothing.
	Release func()
}

// FreeRequest calls c.Release if it is set.
func (c *Conn) FreeRequest() {
	if c.Release != nil {
		c.Release()
	}
}
