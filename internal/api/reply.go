package api

import "github.com/gregor-project/gregor/internal/server"

// The transport contract between the connection loop and the handlers is internal/server's
// (reply.go there): what a handler answers and what it knows of the connection. The names are
// kept here so the handlers read as before; server imports nothing above it.
type (
	// Reply is what a handler gives the connection loop to send back (server.Reply).
	Reply = server.Reply
	// Raw is a hand-encoded response body (server.Raw).
	Raw = server.Raw
	// Part is one piece of a Raw body (server.Part).
	Part = server.Part
	// Conn describes the client connection a request came in on (server.Conn).
	Conn = server.Conn
)
