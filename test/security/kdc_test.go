package security_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kdc is a real MIT Kerberos KDC (Debian's krb5-kdc) the test runs: its own realm and
// database in a temp dir, serving on a free loopback port until the test ends.
type kdc struct {
	t       *testing.T
	dir     string
	realm   string
	port    int
	krb5    string // the krb5.conf clients and the broker read
	profile string // kdc.conf
}

const testRealm = "GREGOR.TEST"

// kdcBinaries are the MIT programs the KDC needs (scripts/test installs them).
var kdcBinaries = []string{"krb5kdc", "kdb5_util", "kadmin.local"}

func kdcBinary(t *testing.T, name string) string {
	t.Helper()
	for _, d := range []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		p := filepath.Join(d, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	t.Fatalf("%s not found: the Kerberos tests run a real MIT KDC; install Debian's krb5-kdc, krb5-admin-server and krb5-user (scripts/test does)", name)
	return ""
}

// startKDC creates a realm, its database and krb5.conf, and runs krb5kdc in the foreground
// as a child process stopped when the test ends.
func startKDC(t *testing.T) *kdc {
	t.Helper()
	for _, b := range kdcBinaries {
		kdcBinary(t, b)
	}
	dir := t.TempDir()
	k := &kdc{t: t, dir: dir, realm: testRealm, port: freePort(t)}
	k.profile = filepath.Join(dir, "kdc.conf")
	k.krb5 = filepath.Join(dir, "krb5.conf")
	write(t, k.profile, fmt.Sprintf(`[kdcdefaults]
 kdc_ports = %[1]d
 kdc_tcp_ports = %[1]d
 kdc_listen = 127.0.0.1:%[1]d
 kdc_tcp_listen = 127.0.0.1:%[1]d
[realms]
 %[2]s = {
  database_name = %[3]s/principal
  key_stash_file = %[3]s/stash
  acl_file = %[3]s/kadm5.acl
  admin_keytab = FILE:%[3]s/kadm5.keytab
  max_life = 1h
  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
 }
[logging]
 kdc = FILE:%[3]s/kdc.log
`, k.port, k.realm, dir))
	write(t, filepath.Join(dir, "kadm5.acl"), "")
	write(t, k.krb5, fmt.Sprintf(`[libdefaults]
 default_realm = %[1]s
 dns_lookup_realm = false
 dns_lookup_kdc = false
 rdns = false
 dns_canonicalize_hostname = false
 udp_preference_limit = 1
 ticket_lifetime = 1h
 default_tkt_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
 default_tgs_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
 permitted_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
[realms]
 %[1]s = {
  kdc = 127.0.0.1:%[2]d
 }
[domain_realm]
 localhost = %[1]s
`, k.realm, k.port))
	k.run("kdb5_util", "create", "-s", "-P", "master-secret", "-r", k.realm, "-d", filepath.Join(dir, "principal"))

	cmd := exec.Command(kdcBinary(t, "krb5kdc"), "-n", "-r", k.realm)
	cmd.Env = k.env()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("krb5kdc: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", k.port), time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(dir, "kdc.log"))
			t.Fatalf("krb5kdc exited: %s\n%s", out.String(), log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("krb5kdc does not listen on port %d: %s", k.port, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return k
}

// env is the environment of the MIT programs: this realm's configuration only.
func (k *kdc) env() []string {
	return append(os.Environ(), "KRB5_CONFIG="+k.krb5, "KRB5_KDC_PROFILE="+k.profile)
}

func (k *kdc) run(name string, args ...string) string {
	k.t.Helper()
	cmd := exec.Command(kdcBinary(k.t, name), args...)
	cmd.Env = k.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		k.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// principal adds a principal with a random key and exports its key to a new keytab,
// returned.
func (k *kdc) principal(name string) string {
	k.t.Helper()
	kt := filepath.Join(k.dir, strings.ReplaceAll(name, "/", "_")+".keytab")
	k.run("kadmin.local", "-r", k.realm, "-q", "addprinc -randkey "+name+"@"+k.realm)
	k.run("kadmin.local", "-r", k.realm, "-q", "ktadd -k "+kt+" "+name+"@"+k.realm)
	return kt
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
