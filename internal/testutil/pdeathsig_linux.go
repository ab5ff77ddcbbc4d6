package testutil

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes a broker process a test starts get SIGKILL when the test process dies
// (killed by a timeout, or interrupted), so no server outlives its test.
func dieWithTest(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
