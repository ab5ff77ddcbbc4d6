package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

//go:embed web
var webFS embed.FS

// Config configures a Console.
type Config struct {
	// Seeds returns the bootstrap servers (HOST:PORT). It is called when the first client is
	// built, so a broker can mount the console before its own listener is bound.
	Seeds func() ([]string, error)
	// Opts are extra client options (TLS, a client id; the --command-config of the tools).
	Opts []kgo.Opt
	// Login: the cluster needs SASL credentials, and the console asks each user for theirs
	// (Mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512) instead of using a client of its own.
	Login     bool
	Mechanism string
	// Interval between throughput and lag samples (default 5s); History is how many samples
	// the charts keep (default 120).
	Interval time.Duration
	History  int
	// Prefix is the path the console is mounted under ("" or "/console").
	Prefix string
	Logger *slog.Logger
}

// Console serves the pages. Its methods are safe for concurrent use.
type Console struct {
	cfg   Config
	pages map[string]*template.Template
	samp  *sampler // without Login (each session has its own)
	log   *slog.Logger

	mu struct {
		sync.Mutex
		shared   *kgo.Client         // the client without login (nil until first use)
		sessions map[string]*session // by cookie, with Login
		closed   bool
	}
}

// session is one logged-in user: a client with their credentials, and a sampler of its
// own, so each user's charts show only what their ACLs let them see.
type session struct {
	user string
	cl   *kgo.Client
	samp *sampler
	seen time.Time
}

// close stops the session's sampler and closes its client.
func (s *session) close() {
	s.samp.stop()
	s.cl.Close()
}

// sessionCookie names the session cookie of Login.
const sessionCookie = "gregor_console"

// New builds a console; it connects to nothing until the first page is viewed.
func New(cfg Config) (*Console, error) {
	if cfg.Seeds == nil {
		return nil, errors.New("console: no bootstrap servers")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.History <= 0 {
		cfg.History = 120
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Login {
		if _, err := saslMechanism(cfg.Mechanism, "", ""); err != nil {
			return nil, err
		}
	}
	pages, err := parsePages(cfg.Prefix)
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, pages: pages, log: cfg.Logger}
	c.mu.sessions = map[string]*session{}
	c.samp = c.newSampler(c.sharedClient)
	return c, nil
}

// parsePages parses every page of web/ together with the layout.
func parsePages(prefix string) (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"path":   func(p string) string { return prefix + p },
		"chart":  chartSVG,
		"series": func(name, class string, pts []point) series { return series{Name: name, Class: class, Pts: pts} },
		"bytes":  humanBytes,
		"rate":   func(f float64) string { return fmt.Sprintf("%.1f", f) },
		"join":   joinInt32s,
		"offset": offsetText,
		"inList": func(v int32, l []int32) bool {
			for _, x := range l {
				if x == v {
					return true
				}
			}
			return false
		},
	}
	names, err := fs.Glob(webFS, "web/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		if n == "web/layout.html" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(webFS, "web/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("console page %s: %w", n, err)
		}
		pages[n[len("web/"):len(n)-len(".html")]] = t
	}
	return pages, nil
}

// Handler is the console's HTTP handler; mount it at Config.Prefix (with a trailing slash).
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	static, err := fs.Sub(webFS, "web")
	if err != nil {
		panic(err) // web/ is embedded; a missing directory is a build bug
	}
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /login", c.loginPage)
	mux.HandleFunc("POST /login", c.login)
	mux.HandleFunc("POST /logout", c.logout)
	c.routes(mux)
	// Every form posts to the console's own origin: a cross-site POST (a page elsewhere
	// submitting a form to a console on loopback) is refused (Sec-Fetch-Site and Origin).
	var h http.Handler = http.NewCrossOriginProtection().Handler(mux)
	if c.cfg.Prefix != "" {
		h = http.StripPrefix(c.cfg.Prefix, h)
	}
	return h
}

// routes registers the pages.
func (c *Console) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", c.page(c.overview))
	mux.HandleFunc("GET /topics", c.page(c.topicList))
	mux.HandleFunc("POST /topics", c.page(c.topicCreate))
	mux.HandleFunc("GET /topics/{topic}", c.page(c.topicPage))
	mux.HandleFunc("POST /topics/{topic}/delete", c.page(c.topicDelete))
	mux.HandleFunc("POST /topics/{topic}/configs", c.page(c.topicAlterConfigs))
	mux.HandleFunc("POST /topics/{topic}/partitions", c.page(c.topicAddPartitions))
	mux.HandleFunc("GET /topics/{topic}/messages", c.page(c.messages))
	mux.HandleFunc("POST /topics/{topic}/produce", c.page(c.produce))
	mux.HandleFunc("GET /groups", c.page(c.groupList))
	mux.HandleFunc("GET /groups/{group}", c.page(c.groupPage))
	mux.HandleFunc("POST /groups/{group}/reset", c.page(c.groupReset))
	mux.HandleFunc("GET /reassignments", c.page(c.reassignments))
	mux.HandleFunc("POST /elect", c.page(c.elect))
}

// view is what a handler answers: a page and its data, or a redirect.
type view struct {
	page     string
	title    string
	data     any
	status   int
	redirect string
}

// pageFunc handles one request with the user's client.
type pageFunc func(ctx context.Context, r *http.Request, adm *kadm.Client, cl *kgo.Client) view

// page wraps a pageFunc: it finds the user's client (or sends them to the login form) and
// renders the answer in the layout.
func (c *Console) page(f pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cl, user, samp, err := c.client(r)
		if errors.Is(err, errLogin) {
			http.Redirect(w, r, c.cfg.Prefix+"/login", http.StatusSeeOther)
			return
		}
		if err != nil {
			c.render(w, view{page: "error", title: "Error", status: http.StatusBadGateway, data: err.Error()}, user)
			return
		}
		samp.start()
		ctx, cancel := context.WithTimeout(context.WithValue(r.Context(), samplerKey{}, samp), 15*time.Second)
		defer cancel()
		v := f(ctx, r, kadm.NewClient(cl), cl)
		if v.redirect != "" {
			http.Redirect(w, r, c.cfg.Prefix+v.redirect, http.StatusSeeOther)
			return
		}
		c.render(w, v, user)
	}
}

// render writes v's page in the layout: rendered whole first, so a template error answers
// 500 instead of half a page.
func (c *Console) render(w http.ResponseWriter, v view, user string) {
	t, ok := c.pages[v.page]
	if !ok {
		http.Error(w, "no page "+v.page, http.StatusInternalServerError)
		return
	}
	data := map[string]any{"Title": v.title, "Data": v.data, "User": user, "Login": c.cfg.Login, "Prefix": c.cfg.Prefix}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		c.log.Warn("console: rendering page", "page", v.page, "err", err)
		http.Error(w, "rendering page "+v.page+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if v.status != 0 {
		w.WriteHeader(v.status)
	}
	if _, err := buf.WriteTo(w); err != nil {
		c.log.Debug("console: writing page", "page", v.page, "err", err) // the browser went away
	}
}

// errorView is a page showing err as Kafka names it.
func errorView(status int, format string, args ...any) view {
	return view{page: "error", title: "Error", status: status, data: fmt.Sprintf(format, args...)}
}

// errLogin: the request has no session and the cluster needs one.
var errLogin = errors.New("console: login needed")

// client is the client for r, with its sampler: the shared ones, or the session's with
// Login.
func (c *Console) client(r *http.Request) (*kgo.Client, string, *sampler, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, "", nil, errors.New("console: closed")
	}
	if c.cfg.Login {
		ck, err := r.Cookie(sessionCookie)
		if err != nil {
			return nil, "", nil, errLogin
		}
		c.expireSessionsLocked(time.Now())
		s, ok := c.mu.sessions[ck.Value]
		if !ok {
			return nil, "", nil, errLogin
		}
		s.seen = time.Now()
		return s.cl, s.user, s.samp, nil
	}
	if c.mu.shared == nil {
		cl, err := c.newClient()
		if err != nil {
			return nil, "", nil, err
		}
		c.mu.shared = cl
	}
	return c.mu.shared, "", c.samp, nil
}

// sharedClient is the client without Login (nil before the first page).
func (c *Console) sharedClient() *kgo.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.shared
}

// newSampler is a sampler with the console's interval and history, sampling through cl.
func (c *Console) newSampler(cl func() *kgo.Client) *sampler {
	return newSampler(c.cfg.Interval, c.cfg.History, cl, c.log)
}

// samplerKey keys the request's sampler in its context.
type samplerKey struct{}

// samplerOf is the sampler of the request whose context is ctx.
func samplerOf(ctx context.Context) *sampler { return ctx.Value(samplerKey{}).(*sampler) }

// newClient builds a client to the seeds with the configured options and extra.
func (c *Console) newClient(extra ...kgo.Opt) (*kgo.Client, error) {
	seeds, err := c.cfg.Seeds()
	if err != nil {
		return nil, err
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("gregor-console")}, c.cfg.Opts...)
	return kgo.NewClient(append(opts, extra...)...)
}

// Close stops the samplers and closes every client; a second Close does nothing.
func (c *Console) Close() {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return
	}
	c.mu.closed = true
	shared, sessions := c.mu.shared, c.mu.sessions
	c.mu.sessions = map[string]*session{}
	c.mu.Unlock()
	c.samp.stop()
	if shared != nil {
		shared.Close()
	}
	for _, s := range sessions {
		s.close()
	}
}

// newSessionID is a random session cookie value.
func newSessionID() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// errText renders err as Kafka's tools do: the protocol error name and the broker's message
// (or the error's description).
func errText(err error, msg *string) string {
	if err == nil {
		return ""
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		if msg != nil && *msg != "" {
			return ke.Message + ": " + *msg
		}
		return ke.Message + ": " + ke.Description
	}
	return err.Error()
}
