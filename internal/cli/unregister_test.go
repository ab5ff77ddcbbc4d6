package cli

import (
	"strings"
	"testing"
)

// `gregor cluster unregister` needs --id and a broker id, checked before any connection
// (port 1 refuses connections); an id that is not registered fails naming
// BROKER_ID_NOT_REGISTERED, and the broker asked stays registered.
func TestClusterUnregister(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"cluster", "unregister", "-b", "127.0.0.1:1"}, `"id" not set`},
		{[]string{"cluster", "unregister", "--id", "-3", "-b", "127.0.0.1:1"}, "--id -3"},
	} {
		if _, err := runCLI(t, "", tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("gregor %s: got error %v, want one mentioning %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}

	addr := startTestBroker(t)
	_, err := runCLI(t, "", "cluster", "unregister", "--id", "99", "-b", addr)
	if err == nil || !strings.Contains(err.Error(), "BROKER_ID_NOT_REGISTERED") || !strings.Contains(err.Error(), "99") {
		t.Fatalf("unregister broker 99: %v, want BROKER_ID_NOT_REGISTERED naming the broker", err)
	}
	if out := mustRunCLI(t, "", "cluster", "describe", "-b", addr); !strings.Contains(out, addr) {
		t.Fatalf("broker %d no longer described after a failed unregister:\n%s", testNodeID, out)
	}
}
