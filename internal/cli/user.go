package cli

import (
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// `gregor user scram set|list|delete`: SCRAM credentials, as kafka-configs.sh --alter
// --entity-type users --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]' and
// --delete-config SCRAM-SHA-256, and --describe. The password never leaves this process:
// as Kafka's admin client does, the tool picks a random salt and sends the salted password
// (PBKDF2 with the mechanism's HMAC, RFC 5802's Hi), from which the controller derives the
// keys it stores.

// scramDefaultIterations is kafka-configs.sh's default when a config gives none.
const scramDefaultIterations = 4096

// scramSaltBytes is the length of the random salt.
const scramSaltBytes = 32

func newUserCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Manage users' SCRAM credentials",
	}
	cf.register(cmd)
	scram := &cobra.Command{
		Use:   "scram",
		Short: "Set, list and delete SCRAM credentials (kafka-configs.sh --entity-type users)",
	}
	scram.AddCommand(newScramSetCommand(&cf), newScramListCommand(&cf), newScramDeleteCommand(&cf))
	cmd.AddCommand(scram)
	return cmd
}

// scramConfig is one SCRAM credential of --add-config.
type scramConfig struct {
	mechanism  kadm.ScramMechanism
	iterations int32
	password   string
}

// parseScramMechanism reads SCRAM-SHA-256 or SCRAM-SHA-512.
func parseScramMechanism(s string) (kadm.ScramMechanism, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "SCRAM-SHA-256":
		return kadm.ScramSha256, nil
	case "SCRAM-SHA-512":
		return kadm.ScramSha512, nil
	}
	return 0, fmt.Errorf("unknown SCRAM mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", s)
}

// parseScramConfigs reads kafka-configs.sh's --add-config value for users:
// MECHANISM=[iterations=N,password=P] or MECHANISM=[password=P], several separated by
// commas. A password may hold commas or '=' but not ']'.
func parseScramConfigs(s string) ([]scramConfig, error) {
	var out []scramConfig
	for rest := strings.TrimSpace(s); rest != ""; {
		mech, after, ok := strings.Cut(rest, "=[")
		if !ok {
			return nil, fmt.Errorf("--add-config %q: want MECHANISM=[iterations=N,password=P]", s)
		}
		body, tail, ok := strings.Cut(after, "]")
		if !ok {
			return nil, fmt.Errorf("--add-config %q: missing ]", s)
		}
		m, err := parseScramMechanism(mech)
		if err != nil {
			return nil, err
		}
		c := scramConfig{mechanism: m, iterations: scramDefaultIterations}
		var hasPassword bool
		for body != "" {
			var item string
			// password= takes the rest of the brackets: it may hold commas.
			if strings.HasPrefix(body, "password=") {
				item, body = body, ""
			} else {
				item, body, _ = strings.Cut(body, ",")
			}
			k, v, ok := strings.Cut(item, "=")
			if !ok {
				return nil, fmt.Errorf("--add-config: %q is not key=value", item)
			}
			switch k {
			case "iterations":
				n, err := strconv.ParseInt(v, 10, 32)
				if err != nil {
					return nil, fmt.Errorf("--add-config: iterations %q: %w", v, err)
				}
				c.iterations = int32(n)
			case "password":
				c.password, hasPassword = v, true
			default:
				return nil, fmt.Errorf("--add-config: unknown key %q (want iterations or password)", k)
			}
		}
		if !hasPassword {
			return nil, fmt.Errorf("--add-config: %s needs a password", m)
		}
		out = append(out, c)
		rest = strings.TrimPrefix(strings.TrimSpace(tail), ",")
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--add-config is empty")
	}
	return out, nil
}

// saltPassword returns a random salt and Hi(password, salt, iterations) for mechanism.
func saltPassword(mechanism kadm.ScramMechanism, password string, iterations int32) (salt, salted []byte, err error) {
	var h func() hash.Hash
	size := 0
	switch mechanism {
	case kadm.ScramSha256:
		h, size = sha256.New, sha256.Size
	case kadm.ScramSha512:
		h, size = sha512.New, sha512.Size
	default:
		return nil, nil, fmt.Errorf("unknown SCRAM mechanism %d", mechanism)
	}
	salt = make([]byte, scramSaltBytes)
	if _, err := rand.Read(salt); err != nil {
		return nil, nil, err
	}
	salted, err = pbkdf2.Key(h, password, salt, int(iterations), size)
	return salt, salted, err
}

func printAltered(cmd *cobra.Command, format string, altered kadm.AlteredUserSCRAMs, verb string) error {
	for _, a := range altered.Sorted() {
		if a.Err != nil {
			return fmt.Errorf("%s SCRAM credentials of %s: %s", verb, a.User, kafkaErrorText(a.Err, a.ErrMessage))
		}
	}
	w := cmd.OutOrStdout()
	if format == outputJSON {
		users := []string{}
		for _, a := range altered.Sorted() {
			users = append(users, a.User)
		}
		return writeJSON(w, map[string]any{"users": users, "altered": true})
	}
	for _, a := range altered.Sorted() {
		if _, err := fmt.Fprintf(w, "Completed updating SCRAM credentials for user %s.\n", a.User); err != nil {
			return err
		}
	}
	return nil
}

func newScramSetCommand(cf *clientFlags) *cobra.Command {
	var add string
	cmd := &cobra.Command{
		Use:          "set USER --add-config 'SCRAM-SHA-256=[iterations=8192,password=SECRET]'",
		Short:        "Set (add or replace) a user's SCRAM credentials",
		Args:         cobra.ExactArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			configs, err := parseScramConfigs(add)
			if err != nil {
				return err
			}
			var ups []kadm.UpsertSCRAM
			for _, c := range configs {
				salt, salted, err := saltPassword(c.mechanism, c.password, c.iterations)
				if err != nil {
					return err
				}
				ups = append(ups, kadm.UpsertSCRAM{User: args[0], Mechanism: c.mechanism, Iterations: c.iterations, Salt: salt, SaltedPassword: salted})
			}
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				// A user may be altered once per request: one request per mechanism.
				var altered kadm.AlteredUserSCRAMs
				for _, u := range ups {
					a, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{u})
					if err != nil {
						return fmt.Errorf("setting SCRAM credentials of %s: %w", args[0], err)
					}
					for _, r := range a {
						if r.Err != nil {
							return fmt.Errorf("setting %s credential of %s: %s", u.Mechanism, r.User, kafkaErrorText(r.Err, r.ErrMessage))
						}
					}
					altered = a
				}
				return printAltered(cmd, format, altered, "setting")
			})
		},
	}
	cmd.Flags().StringVar(&add, "add-config", "", "credentials: MECHANISM=[iterations=N,password=P][,...] with MECHANISM SCRAM-SHA-256 or SCRAM-SHA-512 (iterations 4096-16384, default 4096)")
	mustMarkRequired(cmd, "add-config")
	return cmd
}

func newScramDeleteCommand(cf *clientFlags) *cobra.Command {
	var mechs []string
	cmd := &cobra.Command{
		Use:          "delete USER --delete-config SCRAM-SHA-256",
		Short:        "Delete a user's SCRAM credentials for the given mechanisms",
		Args:         cobra.ExactArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(mechs) == 0 {
				return fmt.Errorf("give --delete-config SCRAM-SHA-256 and/or SCRAM-SHA-512")
			}
			var dels []kadm.DeleteSCRAM
			for _, s := range mechs {
				m, err := parseScramMechanism(s)
				if err != nil {
					return err
				}
				dels = append(dels, kadm.DeleteSCRAM{User: args[0], Mechanism: m})
			}
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				// A user may be altered once per request: one request per mechanism.
				for _, d := range dels {
					altered, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{d}, nil)
					if err != nil {
						return fmt.Errorf("deleting SCRAM credentials of %s: %w", args[0], err)
					}
					for _, a := range altered {
						if a.Err != nil {
							return fmt.Errorf("deleting %s credential of %s: %s", d.Mechanism, a.User, kafkaErrorText(a.Err, a.ErrMessage))
						}
					}
				}
				return printAltered(cmd, format, kadm.AlteredUserSCRAMs{args[0]: {User: args[0]}}, "deleting")
			})
		},
	}
	cmd.Flags().StringSliceVar(&mechs, "delete-config", nil, "mechanisms whose credentials to delete: SCRAM-SHA-256, SCRAM-SHA-512 (comma-separated or repeated)")
	return cmd
}

// scramRow is one credential as list prints it.
type scramRow struct {
	User       string `json:"user"`
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

func newScramListCommand(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:          "list [USER...]",
		Short:        "List users' SCRAM mechanisms and iterations (every user when none is named)",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				described, err := adm.DescribeUserSCRAMs(ctx, args...)
				if err != nil {
					return fmt.Errorf("listing SCRAM credentials: %w", err)
				}
				rows := []scramRow{}
				for _, d := range described.Sorted() {
					if d.Err != nil {
						return fmt.Errorf("listing SCRAM credentials of %s: %s", d.User, kafkaErrorText(d.Err, d.ErrMessage))
					}
					for _, c := range d.CredInfos {
						rows = append(rows, scramRow{d.User, c.Mechanism.String(), c.Iterations})
					}
				}
				sort.SliceStable(rows, func(i, j int) bool { return rows[i].User < rows[j].User })
				w := cmd.OutOrStdout()
				if format == outputJSON {
					return writeJSON(w, rows)
				}
				t := newTable(w, "USER", "MECHANISM", "ITERATIONS")
				for _, r := range rows {
					t.row(r.User, r.Mechanism, strconv.Itoa(int(r.Iterations)))
				}
				return t.flush()
			})
		},
	}
}
