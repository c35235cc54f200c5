package exchange

import "fmt"

// EventType is the kind of an in-band event.
type EventType uint8

// The events of the data protocol.
const (
	// EndOfPartition is the last element of a channel: the producer
	// finished and will send nothing more.
	EndOfPartition EventType = 1
	// CheckpointBarrier separates the records before checkpoint
	// CheckpointID from those after it.
	CheckpointBarrier EventType = 2
	// Watermark says that no record with a time at or below Timestamp
	// follows on the channel (event time progressed). It travels after
	// the records before it, like a barrier, but nothing aligns on it.
	Watermark EventType = 3
	// WatermarkStatus says whether the channel is idle (Idle): an idle
	// channel holds back no consumer's watermark until it is active again.
	WatermarkStatus EventType = 4
)

func (t EventType) valid() bool { return t >= EndOfPartition && t <= WatermarkStatus }

func (t EventType) String() string {
	switch t {
	case EndOfPartition:
		return "END_OF_PARTITION"
	case CheckpointBarrier:
		return "CHECKPOINT_BARRIER"
	case Watermark:
		return "WATERMARK"
	case WatermarkStatus:
		return "WATERMARK_STATUS"
	}
	return fmt.Sprintf("EventType(%d)", uint8(t))
}

// Event is an in-band event: it reaches each consumer after every record the
// producer wrote to that consumer before emitting it.
type Event struct {
	Type         EventType
	CheckpointID int64 // CheckpointBarrier only
	Timestamp    int64 // Watermark only: milliseconds since the Unix epoch
	Idle         bool  // WatermarkStatus only
}

func (e Event) String() string {
	switch e.Type {
	case CheckpointBarrier:
		return fmt.Sprintf("%v(%d)", e.Type, e.CheckpointID)
	case Watermark:
		return fmt.Sprintf("%v(%d)", e.Type, e.Timestamp)
	case WatermarkStatus:
		if e.Idle {
			return "WATERMARK_STATUS(idle)"
		}
		return "WATERMARK_STATUS(active)"
	}
	return e.Type.String()
}
