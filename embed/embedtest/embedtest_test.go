package embedtest_test

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
)

// What a test starts is serving during the test and gone after it: its listeners closed and
// its temporary data directory removed.
func TestCleanedUpAfterTheTest(t *testing.T) {
	var addrs, dirs []string
	t.Run("user", func(t *testing.T) {
		n := embedtest.Start(t, embed.Options{})
		c := embedtest.StartCluster(t, 2, embed.Options{})
		addrs = append([]string{n.Addr()}, c.Addrs()...)
		dirs = []string{n.DataDir(), c.DataDir(1), c.DataDir(2)}
		for _, addr := range addrs {
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err = cl.Ping(ctx)
			cancel()
			cl.Close()
			if err != nil {
				t.Fatalf("%s does not answer: %v", addr, err)
			}
		}
	})
	for _, addr := range addrs {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after the test", addr)
		}
	}
	for _, dir := range dirs {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after the test: %v", dir, err)
		}
	}
}
