package coordinator

import "time"

// Timer is a shard's one wall-clock timer, pointed at its core's next deadline (the core's
// Deadlines.Next): the edge arms it after every input, and it calls the fire function given
// to Init (the coordinator's tick, which feeds the core the time) when that deadline comes.
// It is guarded by its shard's lock; fire runs on its own goroutine and takes that lock.
type Timer struct {
	fire  func()
	t     *time.Timer // made on the first Arm with a deadline
	armed int64       // the deadline t is set for; 0: none
}

// Init sets the function the timer calls; call it once, before the first Arm.
func (t *Timer) Init(fire func()) { t.fire = fire }

// Arm points the timer at next (Unix milliseconds), or stops it if ok is false (nothing is
// scheduled). A deadline the timer is already set for is left alone.
func (t *Timer) Arm(next int64, ok bool) {
	if !ok {
		t.Stop()
		return
	}
	if next == t.armed {
		return
	}
	t.armed = next
	d := time.Until(time.UnixMilli(next))
	if t.t == nil {
		t.t = time.AfterFunc(d, t.fire)
	} else {
		t.t.Reset(d)
	}
}

// Fired records that the timer went off: the next Arm sets it again even for the same
// deadline (the core may have left it due).
func (t *Timer) Fired() { t.armed = 0 }

// Stop stops the timer; it reports whether that stopped a pending call of fire (false if it
// was never armed, already stopped or already fired), as time.Timer.Stop.
func (t *Timer) Stop() bool {
	t.armed = 0
	return t.t != nil && t.t.Stop()
}
