package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// `gregor cluster unregister --id N`: remove broker N's registration
// (UnregisterBroker, KIP-631), like kafka-cluster.sh unregister. It is the
// last step of decommissioning a broker: move its partitions away (gregor
// reassign), stop it, then unregister it. The controller moves any leadership
// the broker still holds to another ISR member and takes it out of every ISR
// first; a broker unregistered while running stays out until restarted.

// UnregisterResult is what `gregor cluster unregister` prints as JSON.
type UnregisterResult struct {
	BrokerID int32 `json:"broker_id"`
}

func newUnregisterCommand(cf *clientFlags) *cobra.Command {
	var id int32
	cmd := &cobra.Command{
		Use:   "unregister --id N",
		Short: "Unregister (decommission) a broker, once its partitions are moved away and it is stopped",
		Long: `Remove broker N's registration, so that no broker lists it any more.
Move its partitions to other brokers first (gregor reassign) and stop it: a
broker that still holds replicas keeps them in the assignments, and leaderships
it holds move to other in-sync replicas. An id with no registration is
BROKER_ID_NOT_REGISTERED.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if id < 0 {
				return fmt.Errorf("--id %d: want a broker id", id)
			}
			return clientRun(cmd, cf, adminTimeout, func(ctx context.Context, cl *kgo.Client, format string) error {
				if err := UnregisterBroker(ctx, cl, id); err != nil {
					return err
				}
				if format == outputJSON {
					return writeJSON(cmd.OutOrStdout(), UnregisterResult{BrokerID: id})
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "Broker %d is no longer registered.\n", id)
				return err
			})
		},
	}
	cmd.Flags().Int32VarP(&id, "id", "i", -1, "the id of the broker to unregister")
	if err := cmd.MarkFlagRequired("id"); err != nil {
		panic(err) // the flag is defined on the line above
	}
	return cmd
}

// UnregisterBroker sends UnregisterBroker for broker id (to any broker, which
// forwards it to the controller) and returns its error, named as Kafka's tools
// name it.
func UnregisterBroker(ctx context.Context, cl *kgo.Client, id int32) error {
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = id
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("unregistering broker %d: %w", id, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("unregistering broker %d: %s", id, kafkaErrorText(err, derefString(resp.ErrorMessage)))
	}
	return nil
}
