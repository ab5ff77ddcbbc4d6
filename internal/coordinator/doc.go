// Package coordinator holds what Gregor's coordinators share (Kafka's coordinator-common):
// the deadline queue their deterministic cores keep their timeouts in.
package coordinator
