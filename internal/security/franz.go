package security

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
)

// The same client, for franz-go's clients (the command-line tools, --command-config): kgo
// runs SaslHandshake and SaslAuthenticate itself and hands each server answer to a
// sasl.Session, while Client.tokens drives a mechanism's dialogue by calling step. The
// session runs tokens in a goroutine of its own and passes the tokens across: each answer
// kgo gives Challenge goes to the waiting step, and what the mechanism does next (another
// token, or its end) comes back. So every mechanism the broker's own connections speak
// (PLAIN, SCRAM, OAUTHBEARER, GSSAPI) works in the tools with the same code.

// franzStepTimeout bounds how long a mechanism waits for kgo's next answer: a session kgo
// abandons (its connection failed) ends instead of holding its goroutine.
const franzStepTimeout = 30 * time.Second

// FranzSASL is c's mechanism as kgo.SASL takes it.
func (c *Client) FranzSASL() sasl.Mechanism { return franzMechanism{c} }

type franzMechanism struct{ c *Client }

func (m franzMechanism) Name() string { return m.c.Mechanism }

func (m franzMechanism) Authenticate(ctx context.Context, hostport string) (sasl.Session, []byte, error) {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	s := &franzSession{ctx: ctx, out: make(chan []byte), in: make(chan []byte), done: make(chan error, 1)}
	go func() {
		s.done <- m.c.tokens(host, s.step)
	}()
	tok, finished, err := s.next()
	if err != nil {
		return nil, nil, err
	}
	if finished {
		return nil, nil, errors.New("security: the SASL mechanism sent no token")
	}
	return s, tok, nil
}

// franzSession is one authentication: out carries the mechanism's tokens to kgo, in kgo's
// answers to the mechanism, done the mechanism's end.
type franzSession struct {
	ctx  context.Context
	out  chan []byte
	in   chan []byte
	done chan error
}

// step is the mechanism's side: hand tok over, wait for the server's answer.
func (s *franzSession) step(tok []byte) ([]byte, error) {
	t := time.NewTimer(franzStepTimeout)
	defer t.Stop()
	select {
	case s.out <- tok:
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	case <-t.C:
		return nil, errors.New("security: SASL session abandoned")
	}
	select {
	case r := <-s.in:
		return r, nil
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	case <-t.C:
		return nil, errors.New("security: SASL session abandoned")
	}
}

// next is what the mechanism does next: a token to send, or its end (finished, with its
// error).
func (s *franzSession) next() (tok []byte, finished bool, err error) {
	select {
	case tok := <-s.out:
		return tok, false, nil
	case err := <-s.done:
		return nil, true, err
	case <-s.ctx.Done():
		return nil, true, s.ctx.Err()
	}
}

func (s *franzSession) Challenge(resp []byte) (bool, []byte, error) {
	select {
	case s.in <- resp:
	case err := <-s.done: // the mechanism ended without waiting for this answer
		return true, nil, err
	case <-s.ctx.Done():
		return true, nil, s.ctx.Err()
	}
	tok, finished, err := s.next()
	if finished {
		return true, nil, err
	}
	return false, tok, nil
}
