package security_test

import (
	"os/exec"
	"syscall"
)

// dieWithTest has the KDC killed when the test process dies, even when it panics (a test
// timeout) before its cleanups run.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
