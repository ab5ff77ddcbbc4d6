package console

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// saslMechanism is the client mechanism for name with the user's credentials.
func saslMechanism(name, user, pass string) (sasl.Mechanism, error) {
	switch strings.ToUpper(name) {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("console: SASL mechanism %q: the login form serves PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512", name)
}

// loginPage is the login form (or the overview when no login is needed).
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if !c.cfg.Login {
		http.Redirect(w, r, c.cfg.Prefix+"/", http.StatusSeeOther)
		return
	}
	c.render(w, view{page: "login", title: "Log in", data: map[string]any{"Mechanism": c.cfg.Mechanism, "Error": "", "Username": ""}}, "")
}

// login tries the user's credentials against the cluster (a Metadata request must pass
// authentication) and opens a session with a client of their own.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !c.cfg.Login {
		http.Redirect(w, r, c.cfg.Prefix+"/", http.StatusSeeOther)
		return
	}
	user, pass := r.FormValue("username"), r.FormValue("password")
	fail := func(msg string) {
		c.render(w, view{page: "login", title: "Log in", status: http.StatusUnauthorized,
			data: map[string]any{"Mechanism": c.cfg.Mechanism, "Error": msg, "Username": user}}, "")
	}
	mech, err := saslMechanism(c.cfg.Mechanism, user, pass)
	if err != nil {
		fail(err.Error())
		return
	}
	cl, err := c.newClient(kgo.SASL(mech))
	if err != nil {
		fail(err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).BrokerMetadata(ctx); err != nil {
		cl.Close()
		fail("login failed: " + errText(err, nil))
		return
	}
	id, err := newSessionID()
	if err != nil {
		cl.Close()
		fail(err.Error())
		return
	}
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		cl.Close()
		fail("console: closed")
		return
	}
	c.expireSessionsLocked(time.Now())
	c.mu.sessions[id] = &session{user: user, cl: cl, seen: time.Now(), samp: c.newSampler(func() *kgo.Client { return cl })}
	c.mu.Unlock()
	path := c.cfg.Prefix + "/"
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: path, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, path, http.StatusSeeOther)
}

// sessionIdle is how long a session lasts unused.
const sessionIdle = 8 * time.Hour

// expireSessionsLocked closes the sessions unused for sessionIdle. c.mu is held.
func (c *Console) expireSessionsLocked(now time.Time) {
	for id, s := range c.mu.sessions {
		if now.Sub(s.seen) > sessionIdle {
			s.close()
			delete(c.mu.sessions, id)
		}
	}
}

// logout ends the session and closes its client.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(sessionCookie); err == nil {
		c.mu.Lock()
		if s, ok := c.mu.sessions[ck.Value]; ok {
			s.close()
			delete(c.mu.sessions, ck.Value)
		}
		c.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: c.cfg.Prefix + "/", MaxAge: -1})
	http.Redirect(w, r, c.cfg.Prefix+"/login", http.StatusSeeOther)
}
