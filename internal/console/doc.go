// Package console is Gregor's web console: a cluster overview with throughput charts, topics
// (list, partitions, configs; create, delete, alter configs, add partitions), a message
// browser with a produce form, consumer groups with lag and offset resets, reassignments and
// leader elections.
//
// # Shape
//
// The console is a Kafka client, like the tools of internal/cli: every page is rendered from
// Kafka requests (franz-go's kadm and kgo) sent to the bootstrap servers it was given, and it
// imports no broker package, so it works pointed at any Kafka-compatible cluster. The broker
// mounts it on its http.listener with its own client listener as the bootstrap server;
// `gregor console` serves it on an address of its own, pointed anywhere.
//
// Pages are html/template rendered on the server from files embedded with go:embed (web/),
// with a little hand-written JavaScript (auto-refresh of the overview, the reset preview) and
// charts drawn as inline SVG on the server (chart.go), so `go build` alone builds it.
//
// Throughput and lag over time come from a sampler (sampler.go): once the first page is
// viewed, it lists every partition's log end offset and every group's lag each interval and
// keeps the rates in a bounded ring buffer; nothing polls before anyone looks.
//
// # Security
//
// When the cluster needs credentials (Config.Login), every page but the login form needs a
// session: the user's SASL username and password are tried against the cluster at login and
// every request of the session is sent by a client of its own with those credentials, so the
// broker applies the user's ACLs; the console holds no credentials of its own. Each session
// has a sampler of its own, sending with the user's client, so one user's charts show
// nothing another's ACLs hide from them; it stops with the session (log out, or 8 hours
// unused).
//
// # Lock rules
//
// Console.mu guards the shared client and the sessions; sampler.mu guards the ring buffers.
// No lock is held across a Kafka request.
package console
