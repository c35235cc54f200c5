package nexmark

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// EventType says which of the three events an Event holds.
type EventType uint8

// The event types, as the first byte of an encoded event.
const (
	PersonEvent  EventType = 0
	AuctionEvent EventType = 1
	BidEvent     EventType = 2
)

// Person is a new user of the auction site. The byte-slice fields alias
// the buffer they were decoded from (or the generator's scratch buffer):
// copy them to keep them.
type Person struct {
	ID           int64
	Name         []byte
	EmailAddress []byte
	CreditCard   []byte
	City         []byte
	State        []byte
	DateTime     int64 // event time, milliseconds since the Unix epoch
	Extra        []byte
}

// Auction is an item put up for sale. Byte slices alias as in Person.
type Auction struct {
	ID          int64
	ItemName    []byte
	Description []byte
	InitialBid  int64
	Reserve     int64
	DateTime    int64 // event time, milliseconds since the Unix epoch
	Expires     int64 // milliseconds since the Unix epoch
	Seller      int64 // a Person's ID
	Category    int64
	Extra       []byte
}

// Bid is a bid on an auction. Extra aliases as in Person.
type Bid struct {
	Auction  int64 // an Auction's ID
	Bidder   int64 // a Person's ID
	Price    int64 // in cents
	DateTime int64 // event time, milliseconds since the Unix epoch
	Extra    []byte
}

// Event is one Nexmark event: Type says which of Person, Auction and Bid
// holds it. Only that one is meaningful: DecodeEvent and the generator
// leave the other two as they were, since clearing the whole struct for
// every event costs more than the event's own fields.
type Event struct {
	Type    EventType
	Person  Person
	Auction Auction
	Bid     Bid
}

// Time returns the event's event time (its DateTime).
func (e *Event) Time() int64 {
	switch e.Type {
	case PersonEvent:
		return e.Person.DateTime
	case AuctionEvent:
		return e.Auction.DateTime
	default:
		return e.Bid.DateTime
	}
}

// ErrMalformed is what Decode and its kin wrap when the bytes are not an
// encoding this package produced.
var ErrMalformed = errors.New("malformed nexmark event")

func appendInt(dst []byte, v int64) []byte { return binary.LittleEndian.AppendUint64(dst, uint64(v)) }

func appendBytes(dst, b []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

// AppendEvent appends e's encoding to dst.
func AppendEvent(dst []byte, e *Event) []byte {
	dst = append(dst, byte(e.Type))
	switch e.Type {
	case PersonEvent:
		return appendPerson(dst, &e.Person)
	case AuctionEvent:
		return appendAuction(dst, &e.Auction)
	default:
		return appendBid(dst, &e.Bid)
	}
}

func appendPerson(dst []byte, p *Person) []byte {
	dst = appendInt(dst, p.ID)
	dst = appendBytes(dst, p.Name)
	dst = appendBytes(dst, p.EmailAddress)
	dst = appendBytes(dst, p.CreditCard)
	dst = appendBytes(dst, p.City)
	dst = appendBytes(dst, p.State)
	dst = appendInt(dst, p.DateTime)
	return appendBytes(dst, p.Extra)
}

func appendAuction(dst []byte, a *Auction) []byte {
	dst = appendInt(dst, a.ID)
	dst = appendBytes(dst, a.ItemName)
	dst = appendBytes(dst, a.Description)
	dst = appendInt(dst, a.InitialBid)
	dst = appendInt(dst, a.Reserve)
	dst = appendInt(dst, a.DateTime)
	dst = appendInt(dst, a.Expires)
	dst = appendInt(dst, a.Seller)
	dst = appendInt(dst, a.Category)
	return appendBytes(dst, a.Extra)
}

func appendBid(dst []byte, b *Bid) []byte {
	dst = appendInt(dst, b.Auction)
	dst = appendInt(dst, b.Bidder)
	dst = appendInt(dst, b.Price)
	dst = appendInt(dst, b.DateTime)
	return appendBytes(dst, b.Extra)
}

// AppendBid appends the encoding of an Event holding b to dst: what
// AppendEvent gives for it, without building the Event.
func AppendBid(dst []byte, b *Bid) []byte { return appendBid(append(dst, byte(BidEvent)), b) }

// reader consumes an encoding; the first failure sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) int64(field string) int64 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 8 {
		r.err = fmt.Errorf("%w: %s: %d bytes left, want 8", ErrMalformed, field, len(r.b))
		return 0
	}
	v := int64(binary.LittleEndian.Uint64(r.b))
	r.b = r.b[8:]
	return v
}

func (r *reader) bytes(field string) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < 4 {
		r.err = fmt.Errorf("%w: %s: %d bytes left, want a 4-byte length", ErrMalformed, field, len(r.b))
		return nil
	}
	n := binary.LittleEndian.Uint32(r.b)
	if uint64(n) > uint64(len(r.b)-4) {
		r.err = fmt.Errorf("%w: %s: length %d, but %d bytes left", ErrMalformed, field, n, len(r.b)-4)
		return nil
	}
	v := r.b[4 : 4+n : 4+n]
	r.b = r.b[4+n:]
	return v
}

func (r *reader) end() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d bytes after the event", ErrMalformed, len(r.b))
	}
	return r.err
}

// DecodeEvent decodes one event from b into e: its Type and the fields of
// that type. Its byte slices alias b.
//
// # Errors
//
// An error wrapping ErrMalformed when b is not exactly one encoded event.
func DecodeEvent(b []byte, e *Event) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: empty", ErrMalformed)
	}
	r := reader{b: b[1:]}
	switch e.Type = EventType(b[0]); e.Type {
	case PersonEvent:
		p := &e.Person
		p.ID = r.int64("person id")
		p.Name = r.bytes("person name")
		p.EmailAddress = r.bytes("person email")
		p.CreditCard = r.bytes("person credit card")
		p.City = r.bytes("person city")
		p.State = r.bytes("person state")
		p.DateTime = r.int64("person time")
		p.Extra = r.bytes("person extra")
	case AuctionEvent:
		a := &e.Auction
		a.ID = r.int64("auction id")
		a.ItemName = r.bytes("auction item name")
		a.Description = r.bytes("auction description")
		a.InitialBid = r.int64("auction initial bid")
		a.Reserve = r.int64("auction reserve")
		a.DateTime = r.int64("auction time")
		a.Expires = r.int64("auction expiry")
		a.Seller = r.int64("auction seller")
		a.Category = r.int64("auction category")
		a.Extra = r.bytes("auction extra")
	case BidEvent:
		decodeBid(&r, &e.Bid)
	default:
		return fmt.Errorf("%w: event type %d (want 0, 1 or 2)", ErrMalformed, b[0])
	}
	return r.end()
}

func decodeBid(r *reader, b *Bid) {
	b.Auction = r.int64("bid auction")
	b.Bidder = r.int64("bid bidder")
	b.Price = r.int64("bid price")
	b.DateTime = r.int64("bid time")
	b.Extra = r.bytes("bid extra")
}

// The offsets of a bid's fixed-width fields in its encoding (AppendBid's,
// AppendEvent's for a bid): a query reads or rewrites one in place, with
// encoding/binary's LittleEndian, without decoding the event.
const (
	BidAuctionOffset  = 1
	BidBidderOffset   = 9
	BidPriceOffset    = 17
	BidDateTimeOffset = 25
	bidFixedBytes     = 33 + 4 // the type byte, four int64s and Extra's length
)

// IsBid reports whether b is an encoded bid event, long enough for its
// fixed-width fields (whose offsets are the Bid*Offset constants). It does
// not check Extra: DecodeBid does.
func IsBid(b []byte) bool { return len(b) >= bidFixedBytes && EventType(b[0]) == BidEvent }

// DecodeBid decodes b into bid when b encodes a Bid event, and reports
// whether it did: the fast path of queries that read bids only, which skip
// persons and auctions by their first byte. Extra aliases b.
//
// # Errors
//
// An error wrapping ErrMalformed when b starts as a bid but is not one.
func DecodeBid(b []byte, bid *Bid) (bool, error) {
	if len(b) == 0 || EventType(b[0]) != BidEvent {
		return false, nil
	}
	r := reader{b: b[1:]}
	decodeBid(&r, bid)
	return true, r.end()
}

// EventCodec encodes and decodes whole events for the typed guest SDK (it
// satisfies sdk/guest/typed.Codec[*Event]). Decode decodes into one Event
// the codec holds and returns it, so an operator handles a pointer rather
// than copying the large struct: the event and its byte slices are valid
// only until the next Decode (and the record they came from lives only
// during the operator's call). Copy what you keep.
type EventCodec struct{ e *Event }

// NewEventCodec returns an EventCodec with its own Event.
func NewEventCodec() EventCodec { return EventCodec{e: new(Event)} }

// Append appends e's encoding to dst.
func (c EventCodec) Append(dst []byte, e *Event) []byte { return AppendEvent(dst, e) }

// Decode decodes one event into the codec's Event and returns it.
//
// # Errors
//
// As DecodeEvent.
func (c EventCodec) Decode(b []byte) (*Event, error) {
	if c.e == nil {
		c.e = new(Event) // a zero EventCodec works, allocating per call
	}
	err := DecodeEvent(b, c.e)
	return c.e, err
}

// BidCodec encodes and decodes Bid events for the typed guest SDK (it
// satisfies sdk/guest/typed.Codec[Bid]); its encoding is AppendBid's, the
// same as an Event holding the bid.
type BidCodec struct{}

// Append appends the encoding of b as a Bid event.
func (BidCodec) Append(dst []byte, b Bid) []byte { return AppendBid(dst, &b) }

// Decode decodes a Bid event.
//
// # Errors
//
// An error wrapping ErrMalformed when b is not an encoded Bid event.
func (BidCodec) Decode(b []byte) (Bid, error) {
	var bid Bid
	ok, err := DecodeBid(b, &bid)
	if err == nil && !ok {
		err = fmt.Errorf("%w: not a bid", ErrMalformed)
	}
	return bid, err
}
