package metadata

import "errors"

// Errors of topic operations, translated to Kafka codes by the api layer.
var (
	ErrTopicExists  = errors.New("metadata: topic already exists")
	ErrUnknownTopic = errors.New("metadata: unknown topic")
	ErrPartitions   = errors.New("metadata: invalid partition count")
)
