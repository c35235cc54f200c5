package nexmark

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The shape of the stream, as in the Java generator's defaults.
const (
	// PersonProportion, AuctionProportion and BidProportion are the shares
	// of each event type: of every 50 consecutive event ids, the first is
	// a person, the next three auctions and the rest bids.
	PersonProportion  = 1
	AuctionProportion = 3
	BidProportion     = 46
	totalProportion   = PersonProportion + AuctionProportion + BidProportion

	// FirstPersonID, FirstAuctionID and FirstCategoryID are the smallest
	// ids: ids start there so that small streams still join.
	FirstPersonID   = 1000
	FirstAuctionID  = 1000
	FirstCategoryID = 10
	// NumCategories is how many categories auctions fall in.
	NumCategories = 5

	numActivePeople     = 1000 // persons a bid or an auction picks from
	numInFlightAuctions = 100  // auctions a bid picks from
	personIDLead        = 10   // not-yet-created persons a pick may name
	auctionIDLead       = 10
	hotAuctionRatio     = 2 // 1 - 1/2 of the bids go to a hot auction
	hotSellersRatio     = 4 // 1 - 1/4 of the auctions are by a hot seller
	hotBiddersRatio     = 4 // 1 - 1/4 of the bids are by a hot bidder
	hotBatch            = 100
	avgPersonBytes      = 200
	avgAuctionBytes     = 500
	avgBidBytes         = 100
	minStringLength     = 3

	// DefaultRate is the event-time rate when a Config sets none: the
	// Java generator's default first-event rate.
	DefaultRate = 10_000
	// unboundedEvents is the size of a timeline of an unbounded stream:
	// at a million events a second, 35 years.
	unboundedEvents = 1 << 50
)

// Config is what the stream depends on: the same Config and split layout
// always give the same events.
type Config struct {
	// BaseTime is the first event's event time, in milliseconds since the
	// Unix epoch.
	BaseTime int64
	// Rate is the stream's event-time rate in events per second over all
	// timelines: consecutive events of one timeline are Timelines × 10⁶ /
	// Rate microseconds apart in event time. 0 means DefaultRate.
	Rate int64
	// Seed selects the stream; each event is a function of it and the
	// event's id.
	Seed uint64
	// OutOfOrderGroup, when above 1, permutes each run of that many
	// events of a timeline, so event times go back and forth within a
	// group (the Java generator's outOfOrderGroupSize). 0 means 1.
	OutOfOrderGroup int64
}

// Range is one timeline of the stream: event ids Start to End (excluded).
// Timelines run side by side in event time, each from BaseTime.
type Range struct{ Start, End int64 }

// Split cuts a stream of events events (0: unbounded) into n timelines of
// (nearly) equal length, in id order, as the source connector hands them to
// its subtasks.
//
// # Errors
//
// An error when events is negative or n is below 1.
func Split(events int64, n int) ([]Range, error) {
	switch {
	case events < 0:
		return nil, fmt.Errorf("nexmark: %d events is negative: give a positive count, or 0 for an unbounded stream", events)
	case n < 1:
		return nil, fmt.Errorf("nexmark: %d timelines: need at least 1", n)
	}
	out := make([]Range, n)
	for i := range out {
		if events == 0 {
			out[i] = Range{int64(i) * unboundedEvents, int64(i+1) * unboundedEvents}
			continue
		}
		out[i] = Range{events * int64(i) / int64(n), events * int64(i+1) / int64(n)}
	}
	return out, nil
}

// SplitKey names timeline r of a stream cut into timelines ones: the key of
// the source connector's split, from which ParseSplitKey recovers both, so
// the rest of a split that was cut at a checkpoint still knows where its
// timeline began.
func SplitKey(r Range, timelines int) string {
	return fmt.Sprintf("nexmark/%d/%d", timelines, r.Start)
}

// ParseSplitKey reverses SplitKey: the timeline's first id and the number
// of timelines.
//
// # Errors
//
// An error when key is not one SplitKey made.
func ParseSplitKey(key string) (start int64, timelines int, err error) {
	rest, ok := strings.CutPrefix(key, "nexmark/")
	n, s, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		return 0, 0, fmt.Errorf("nexmark: split key %q is not nexmark/<timelines>/<start>", key)
	}
	tl, err1 := strconv.Atoi(n)
	start, err2 := strconv.ParseInt(s, 10, 64)
	if err := errors.Join(err1, err2); err != nil || tl < 1 || start < 0 {
		return 0, 0, fmt.Errorf("nexmark: split key %q is not nexmark/<timelines>/<start>", key)
	}
	return start, tl, nil
}

// Generator produces the events of one timeline in emission order. It is
// not safe for concurrent use.
type Generator struct {
	cfg        Config
	r          Range
	usPerEvent float64 // event-time distance of consecutive events of the timeline
	pos        int64   // the next event to emit, from r.Start
	mult       int64   // permutes an out-of-order group: k ↦ k·mult mod group
	rnd        rng
	buf        []byte // the current event's byte fields
}

// NewGenerator returns a generator of timeline r of a stream cut into
// timelines ones, positioned at its event next (r.Start to r.End): the
// number of events of the timeline already emitted plus r.Start, as a
// checkpoint keeps it.
//
// # Errors
//
// An error when the config or the range is invalid.
func NewGenerator(cfg Config, r Range, timelines int, next int64) (*Generator, error) {
	if cfg.Rate == 0 {
		cfg.Rate = DefaultRate
	}
	if cfg.OutOfOrderGroup == 0 {
		cfg.OutOfOrderGroup = 1
	}
	switch {
	case cfg.Rate < 0:
		return nil, fmt.Errorf("nexmark: rate %d is negative", cfg.Rate)
	case cfg.OutOfOrderGroup < 0:
		return nil, fmt.Errorf("nexmark: out-of-order group %d is negative", cfg.OutOfOrderGroup)
	case timelines < 1:
		return nil, fmt.Errorf("nexmark: %d timelines: need at least 1", timelines)
	case r.Start < 0 || r.End < r.Start || next < r.Start || next > r.End:
		return nil, fmt.Errorf("nexmark: position %d outside timeline [%d, %d)", next, r.Start, r.End)
	}
	// The Java generator multiplies by 953; that is the identity for a
	// group dividing 952 and no permutation for a multiple of 953, so
	// reversing (multiplying by group-1) stands in there.
	mult := int64(953) % cfg.OutOfOrderGroup
	if mult <= 1 || gcd(mult, cfg.OutOfOrderGroup) != 1 {
		mult = max(cfg.OutOfOrderGroup-1, 1)
	}
	return &Generator{
		cfg: cfg, r: r, pos: next - r.Start, mult: mult,
		usPerEvent: 1e6 / float64(cfg.Rate) * float64(timelines),
		buf:        make([]byte, 0, 2048),
	}, nil
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// nextID returns the id of the next event, and false when the timeline has
// ended.
func (g *Generator) nextID() (int64, bool) {
	n := g.r.End - g.r.Start
	if g.pos >= n {
		return 0, false
	}
	k, grp := g.pos, g.cfg.OutOfOrderGroup
	base := k / grp * grp
	if grp > 1 && base+grp <= n {
		k = base + k%grp*g.mult%grp
	}
	return g.r.Start + k, true
}

// Position is the generator's position: r.Start plus the events emitted.
func (g *Generator) Position() int64 { return g.r.Start + g.pos }

// Due is how long after the timeline's first event, in wall-clock
// microseconds at the stream's rate, the next event is due: a paced source
// waits until then.
func (g *Generator) Due() float64 { return float64(g.pos) * g.usPerEvent }

// Next fills e with the next event and reports whether there was one. e's
// byte slices alias the generator's buffer until the next call.
func (g *Generator) Next(e *Event) bool {
	id, ok := g.nextID()
	if !ok {
		return false
	}
	g.pos++
	g.At(id, e)
	return true
}

// timestamp is the event time of event id, from its place in the timeline.
func (g *Generator) timestamp(id int64) int64 {
	return g.cfg.BaseTime + int64(float64(id-g.r.Start)*g.usPerEvent)/1000
}

// At fills e with event id of the generator's timeline, whatever the
// position. e's byte slices alias the generator's buffer until the next
// call.
func (g *Generator) At(id int64, e *Event) {
	g.rnd.seed(g.cfg.Seed, id)
	g.buf = g.buf[:0]
	ts := g.timestamp(id)
	switch rem := id % totalProportion; {
	case rem < PersonProportion:
		e.Type = PersonEvent
		g.person(id, ts, &e.Person)
	case rem < PersonProportion+AuctionProportion:
		e.Type = AuctionEvent
		g.auction(id, ts, &e.Auction)
	default:
		e.Type = BidEvent
		g.bid(id, ts, &e.Bid)
	}
}

// span is a field's bytes in g.buf, sliced once all fields are written
// (appending may move the buffer).
type span struct{ from, to int }

func (g *Generator) field(sp span) []byte { return g.buf[sp.from:sp.to:sp.to] }

var (
	usStates   = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities   = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	firstNames = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames  = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
)

func (g *Generator) appendString(s string) span {
	from := len(g.buf)
	g.buf = append(g.buf, s...)
	return span{from, len(g.buf)}
}

func (g *Generator) person(id, ts int64, p *Person) {
	p.ID = lastBase0PersonID(id) + FirstPersonID
	p.DateTime = ts
	from := len(g.buf)
	g.buf = append(g.buf, firstNames[g.rnd.intn(len(firstNames))]...)
	g.buf = append(g.buf, ' ')
	g.buf = append(g.buf, lastNames[g.rnd.intn(len(lastNames))]...)
	name := span{from, len(g.buf)}
	from = len(g.buf)
	g.randomString(7)
	g.buf = append(g.buf, '@')
	g.randomString(5)
	g.buf = append(g.buf, ".com"...)
	email := span{from, len(g.buf)}
	from = len(g.buf)
	for i := range 4 {
		if i > 0 {
			g.buf = append(g.buf, ' ')
		}
		n := g.rnd.intn(10000)
		g.buf = append(g.buf, byte('0'+n/1000), byte('0'+n/100%10), byte('0'+n/10%10), byte('0'+n%10))
	}
	card := span{from, len(g.buf)}
	city := g.appendString(usCities[g.rnd.intn(len(usCities))])
	state := g.appendString(usStates[g.rnd.intn(len(usStates))])
	size := 8 + (name.to - name.from) + (email.to - email.from) + (card.to - card.from) + (city.to - city.from) + (state.to - state.from)
	extra := g.extra(size, avgPersonBytes)
	p.Name, p.EmailAddress, p.CreditCard = g.field(name), g.field(email), g.field(card)
	p.City, p.State, p.Extra = g.field(city), g.field(state), g.field(extra)
}

func (g *Generator) auction(id, ts int64, a *Auction) {
	a.ID = lastBase0AuctionID(id) + FirstAuctionID
	a.DateTime = ts
	if g.rnd.intn(hotSellersRatio) > 0 {
		a.Seller = lastBase0PersonID(id) / hotBatch * hotBatch
	} else {
		a.Seller = g.nextBase0PersonID(id)
	}
	a.Seller += FirstPersonID
	a.Category = FirstCategoryID + int64(g.rnd.intn(NumCategories))
	a.InitialBid = g.price()
	// The auction closes about when the numInFlightAuctions-th auction
	// after it opens: on average twice that horizon.
	horizon := g.timestamp(id+numInFlightAuctions*totalProportion/AuctionProportion) - ts
	a.Expires = ts + 1 + g.rnd.int63n(max(horizon*2, 1))
	from := len(g.buf)
	g.randomString(20)
	name := span{from, len(g.buf)}
	from = len(g.buf)
	g.randomString(100)
	desc := span{from, len(g.buf)}
	a.Reserve = a.InitialBid + g.price()
	extra := g.extra(8+(name.to-name.from)+(desc.to-desc.from)+8*5, avgAuctionBytes)
	a.ItemName, a.Description, a.Extra = g.field(name), g.field(desc), g.field(extra)
}

func (g *Generator) bid(id, ts int64, b *Bid) {
	if g.rnd.intn(hotAuctionRatio) > 0 {
		b.Auction = lastBase0AuctionID(id) / hotBatch * hotBatch
	} else {
		b.Auction = g.nextBase0AuctionID(id)
	}
	b.Auction += FirstAuctionID
	if g.rnd.intn(hotBiddersRatio) > 0 {
		// The second person of the batch: hot bidders are not hot sellers.
		b.Bidder = lastBase0PersonID(id)/hotBatch*hotBatch + 1
	} else {
		b.Bidder = g.nextBase0PersonID(id)
	}
	b.Bidder += FirstPersonID
	b.Price = g.price()
	b.DateTime = ts
	b.Extra = g.field(g.extra(8*4, avgBidBytes))
}

// lastBase0PersonID is the newest person at event id (counting from 0).
func lastBase0PersonID(id int64) int64 {
	epoch, off := id/totalProportion, id%totalProportion
	if off >= PersonProportion {
		off = PersonProportion - 1
	}
	return epoch*PersonProportion + off
}

// lastBase0AuctionID is the newest auction at event id (counting from 0).
func lastBase0AuctionID(id int64) int64 {
	epoch, off := id/totalProportion, id%totalProportion
	switch {
	case off < PersonProportion:
		epoch--
		off = AuctionProportion - 1
	case off >= PersonProportion+AuctionProportion:
		off = AuctionProportion - 1
	default:
		off -= PersonProportion
	}
	return epoch*AuctionProportion + off
}

// nextBase0PersonID picks one of the active persons, or one a little ahead
// of the newest (so a bid may name a person not created yet).
func (g *Generator) nextBase0PersonID(id int64) int64 {
	people := lastBase0PersonID(id) + 1
	active := min(people, numActivePeople)
	return people - active + g.rnd.int63n(active+personIDLead)
}

// nextBase0AuctionID picks one of the auctions likely still open, or one a
// little ahead of the newest.
func (g *Generator) nextBase0AuctionID(id int64) int64 {
	hi := lastBase0AuctionID(id)
	lo := max(hi-numInFlightAuctions, 0)
	return lo + g.rnd.int63n(hi-lo+1+auctionIDLead)
}

// price is a price in cents, log-uniform from $1 to $1M.
func (g *Generator) price() int64 {
	return int64(math.Round(math.Exp(g.rnd.float64()*6*math.Ln10) * 100))
}

// randomString appends 3 to max-1 random lower-case letters and spaces,
// without leading or trailing spaces.
func (g *Generator) randomString(maxLen int) {
	n := minStringLength + g.rnd.intn(maxLen-minStringLength)
	from := len(g.buf)
	for range n {
		x := g.rnd.next()
		if uint32(x)%13 == 0 {
			g.buf = append(g.buf, ' ')
		} else {
			g.buf = append(g.buf, byte('a'+(x>>32)%26))
		}
	}
	s := g.buf[from:]
	start, end := 0, len(s)
	for start < end && s[start] == ' ' {
		start++
	}
	for end > start && s[end-1] == ' ' {
		end--
	}
	g.buf = append(g.buf[:from], s[start:end]...)
}

// extra appends random letters so that size plus their number is about
// avg on average (±20%).
func (g *Generator) extra(size, avg int) span {
	from := len(g.buf)
	if size > avg {
		return span{from, from}
	}
	avg -= size
	delta := int(math.Round(float64(avg) * 0.2))
	n := avg - delta
	if delta > 0 {
		n += g.rnd.intn(2 * delta)
	}
	g.buf = slices.Grow(g.buf, n)[:from+n]
	out := g.buf[from:]
	for i := 0; i < n; {
		// 13 letters from each 64-bit draw (26¹³ < 2⁶⁴).
		x := g.rnd.next()
		for j := 0; j < 13 && i < n; j++ {
			out[i] = byte('a' + x%26)
			x /= 26
			i++
		}
	}
	return span{from, len(g.buf)}
}

// rng is splitmix64, seeded per event: cheap, and each event's draws depend
// on its id and the seed alone. The state starts at a hash of both, so the
// draws of neighbouring ids do not overlap (a state of seed + id steps
// would make event id+1's first draw event id's second).
type rng struct{ s uint64 }

func (r *rng) seed(seed uint64, id int64) {
	r.s = mix64(uint64(id)*0x9e3779b97f4a7c15 ^ mix64(seed^0x632be59bd9b4e019))
}

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	return mix64(r.s)
}

// mix64 is splitmix64's output function: a bijection that scatters bits.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// intn is uniform in [0, n) for n < 2³¹ (Lemire's multiply-shift).
func (r *rng) intn(n int) int { return int(uint64(uint32(r.next())) * uint64(n) >> 32) }

func (r *rng) int63n(n int64) int64 {
	if n < math.MaxInt32 {
		return int64(r.intn(int(n)))
	}
	return int64(r.next()>>1) % n
}

func (r *rng) float64() float64 { return float64(r.next()>>11) / (1 << 53) }
