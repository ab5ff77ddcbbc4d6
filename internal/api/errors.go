package api

import (
	"errors"
	"io/fs"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/authz"
	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/fetchsession"
	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/security"
	"github.com/gregor-project/gregor/internal/share"
	"github.com/gregor-project/gregor/internal/storage"
	"github.com/gregor-project/gregor/internal/wire"
)

// Errors raised inside the api layer itself.
var (
	errInvalidTopic      = errors.New("api: invalid topic name")
	errUnknownPartition  = errors.New("api: unknown topic or partition")
	errMessageTooLarge   = errors.New("api: batch larger than max.message.bytes")
	errLegacyInNewFormat = errors.New("api: produce v3+ must carry magic v2 record batches")
	errInvalidRF         = errors.New("api: invalid replication factor")
	errInvalidPartitions = errors.New("api: invalid partition count")
	errInvalidAssignment = errors.New("api: invalid replica assignment")
	errDeleteDisabled    = errors.New("api: topic deletion is disabled (delete.topic.enable=false)")
	errInvalidRequest    = errors.New("api: invalid request")
	// Produce refuses control batches from clients (only coordinators write markers) and
	// transactional batches without a producer id, as Kafka's LogValidator does.
	errClientControlBatch = errors.New("api: clients may not write control batches")
	errTxnWithoutProducer = errors.New("api: a transactional batch needs a producer id")
	// errMixedProducers: a produce request whose transactional batches carry more than one
	// producer id (Kafka's InvalidPidMappingException).
	errMixedProducers = errors.New("api: transactional records of more than one producer id")
)

// unknownServerError is the code for errors with no Kafka meaning; callers log those.
const unknownServerError = -1

// code translates an internal error to its Kafka error code. This is the one boundary where
// that happens; unknown errors are UNKNOWN_SERVER_ERROR (and are logged by the caller).
func code(err error) int16 {
	var ke *kerr.Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ke):
		return ke.Code
	case errors.Is(err, share.ErrInvalidRecordState):
		return kerr.InvalidRecordState.Code
	case errors.Is(err, share.ErrInvalidAck), errors.Is(err, share.ErrInvalidMember), errors.Is(err, share.ErrAckOnOpen):
		return kerr.InvalidRequest.Code
	case errors.Is(err, share.ErrUnknownMember):
		return kerr.UnknownMemberID.Code
	case errors.Is(err, share.ErrFencedEpoch):
		return kerr.FencedMemberEpoch.Code
	case errors.Is(err, share.ErrGroupNotEmpty):
		return kerr.NonEmptyGroup.Code
	case errors.Is(err, share.ErrNoGroup):
		return kerr.GroupIDNotFound.Code
	case errors.Is(err, share.ErrSessionNotFound):
		return kerr.ShareSessionNotFound.Code
	case errors.Is(err, share.ErrSessionEpoch):
		return kerr.InvalidShareSessionEpoch.Code
	case errors.Is(err, fetchsession.ErrSessionNotFound):
		return kerr.FetchSessionIDNotFound.Code
	case errors.Is(err, fetchsession.ErrInvalidEpoch):
		return kerr.InvalidFetchSessionEpoch.Code
	case errors.Is(err, fetchsession.ErrTopicIDMismatch):
		return kerr.FetchSessionTopicIDError.Code
	case errors.Is(err, storage.ErrLogOffline):
		return kerr.KafkaStorageError.Code
	case errors.Is(err, storage.ErrCorruptLog), errors.Is(err, storage.ErrInvalidBatch):
		// Checked before the batch errors a corrupt segment wraps: the stored batch is
		// corrupt, whatever its parser found (Kafka's CorruptRecordException, read from a
		// segment, is CORRUPT_MESSAGE), not the client's records.
		return kerr.CorruptMessage.Code
	case errors.Is(err, batch.ErrBadCRC), errors.Is(err, batch.ErrCorrupt):
		return kerr.CorruptMessage.Code
	case errors.Is(err, batch.ErrUnknownCodec):
		return kerr.UnsupportedCompressionType.Code
	case errors.Is(err, batch.ErrInvalidRecord), errors.Is(err, errLegacyInNewFormat),
		errors.Is(err, errClientControlBatch), errors.Is(err, errTxnWithoutProducer):
		return kerr.InvalidRecord.Code
	case errors.Is(err, batch.ErrUnsupportedMagic):
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, errMessageTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, storage.ErrRecordBatchTooLarge):
		return kerr.RecordListTooLarge.Code
	case errors.Is(err, errInvalidTopic):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, errUnknownPartition), errors.Is(err, metadata.ErrUnknownTopic):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, metadata.ErrTopicExists):
		return kerr.TopicAlreadyExists.Code
	case errors.Is(err, metadata.ErrPartitions), errors.Is(err, errInvalidPartitions):
		return kerr.InvalidPartitions.Code
	case errors.Is(err, errInvalidRF):
		return kerr.InvalidReplicationFactor.Code
	case errors.Is(err, errInvalidAssignment):
		return kerr.InvalidReplicaAssignment.Code
	case errors.Is(err, errDeleteDisabled):
		return kerr.TopicDeletionDisabled.Code
	case errors.Is(err, errInvalidRequest):
		return kerr.InvalidRequest.Code
	case errors.Is(err, errExcessiveBatch), errors.Is(err, replica.ErrPolicyViolation):
		return kerr.PolicyViolation.Code
	case errors.Is(err, config.ErrUnknownConfig), errors.Is(err, config.ErrInvalidConfig):
		return kerr.InvalidConfig.Code
	case errors.Is(err, replica.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, replica.ErrInvalidEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, replica.ErrInvalidTxnState):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, replica.ErrTransactionCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced.Code
	case errors.Is(err, errMixedProducers):
		return kerr.InvalidProducerIDMapping.Code
	case errors.Is(err, replica.ErrNotEnoughReplicas):
		return kerr.NotEnoughReplicas.Code
	case errors.Is(err, replica.ErrNotEnoughReplicasAfterAppend):
		return kerr.NotEnoughReplicasAfterAppend.Code
	case errors.Is(err, replica.ErrRequestTimedOut):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, replica.ErrNotLeaderOrFollower):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, replica.ErrFencedLeaderEpoch):
		return kerr.FencedLeaderEpoch.Code
	case errors.Is(err, replica.ErrUnknownLeaderEpoch):
		return kerr.UnknownLeaderEpoch.Code
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, storage.ErrLogDirNotFound):
		return kerr.LogDirNotFound.Code
	case errors.Is(err, storage.ErrNoPartition):
		// No replica on this broker (AlterReplicaLogDirs of a partition placed elsewhere).
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, storage.ErrTooManyOpenFiles):
		// The broker is at its descriptor budget with every file in use: nothing failed and
		// the partition stays online; clients retry KAFKA_STORAGE_ERROR.
		return kerr.KafkaStorageError.Code
	case errors.Is(err, storage.ErrLogClosed):
		// The partition was deleted or the broker is stopping under this request: retriable.
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, storage.ErrInjected), isIOError(err):
		// An I/O error the storage layer did not wrap (Kafka's maybeHandleIOException turns
		// every IOException into KafkaStorageException).
		return kerr.KafkaStorageError.Code
	case errors.Is(err, authz.ErrInvalidBinding), errors.Is(err, authz.ErrInvalidFilter),
		errors.Is(err, authz.ErrInvalidPrincipal):
		return kerr.InvalidRequest.Code // Kafka's AclControlManager: InvalidRequestException
	case errors.Is(err, security.ErrAuthentication):
		return kerr.SaslAuthenticationFailed.Code
	case errors.Is(err, wire.ErrClosed):
		// A connection to another broker or the controller broke under the request
		// (Kafka's NetworkException, retriable).
		return kerr.NetworkException.Code
	}
	return kerr.UnknownServerError.Code
}

// isIOError reports whether err is a failed file operation.
func isIOError(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe)
}

// errMsg is the message for a response's ErrorMessage field (nil when err is nil).
func errMsg(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
