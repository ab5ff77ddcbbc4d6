package state

import "github.com/twmb/franz-go/pkg/kerr"

// ProducerIDsResponse is a block of producer ids [Start, Start+Len).
type ProducerIDsResponse struct {
	Err   error
	Start int64
	Len   int64
}

// AllocateProducerIDs hands a registered broker the next block of producer ids (Kafka's
// AllocateProducerIds). Ids are never handed out twice: the block's end is in the log
// before any id of it is used.
func (c *Controller) AllocateProducerIDs(brokerID int32, brokerEpoch int64) ([]Record, ProducerIDsResponse) {
	b := c.im.brokers[brokerID]
	if b == nil {
		return nil, ProducerIDsResponse{Err: errf(kerr.BrokerIDNotRegistered, "broker %d is not registered", brokerID)}
	}
	if b.Epoch != brokerEpoch {
		return nil, ProducerIDsResponse{Err: errf(kerr.StaleBrokerEpoch, "broker %d has epoch %d, not %d", brokerID, b.Epoch, brokerEpoch)}
	}
	start := c.im.nextProducerID
	n := c.cfg.ProducerIDBlockSize
	return []Record{&ProducerIDsRecord{BrokerID: brokerID, BrokerEpoch: brokerEpoch, NextProducerID: start + n}},
		ProducerIDsResponse{Start: start, Len: n}
}
