package streams_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The library is a Kafka client that runs against any Kafka: no package of the broker may
// creep into its imports (its tests may use embed).
func TestImportsNoBrokerPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const module = "github.com/gregor-project/gregor/"
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, module) && !strings.HasPrefix(p, module+"streams") {
			t.Errorf("streams depends on %s", p)
		}
	}
}
