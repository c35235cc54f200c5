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
)

func (t EventType) valid() bool { return t == EndOfPartition || t == CheckpointBarrier }

func (t EventType) String() string {
	switch t {
	case EndOfPartition:
		return "END_OF_PARTITION"
	case CheckpointBarrier:
		return "CHECKPOINT_BARRIER"
	}
	return fmt.Sprintf("EventType(%d)", uint8(t))
}

// Event is an in-band event: it reaches each consumer after every record the
// producer wrote to that consumer before emitting it.
type Event struct {
	Type         EventType
	CheckpointID int64 // CheckpointBarrier only
}

func (e Event) String() string {
	if e.Type == CheckpointBarrier {
		return fmt.Sprintf("%v(%d)", e.Type, e.CheckpointID)
	}
	return e.Type.String()
}
