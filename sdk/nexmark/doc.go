// Package nexmark is the Nexmark benchmark's data for Sluice: the three
// event types (Person, Auction, Bid), their compact binary encoding, and a
// deterministic generator of the event stream.
//
// It is shared by the TaskManager's "nexmark" source connector (which runs
// the generator on the host), by guests compiled to wasip1 (which decode the
// events), and by the plain-Go reference queries in package
// nexmark/reference, so all three see the same bytes. It imports the
// standard library only.
//
// The generator re-implements the logic of the Apache-2.0 Java generator of
// the Nexmark benchmark (github.com/nexmark/nexmark, nexmark-flink, itself
// derived from Apache Beam's sdks/java/testing/nexmark): persons, auctions
// and bids in the proportions 1:3:46, hot auctions, sellers and bidders,
// event times spaced by a nominal rate, and optional out-of-order groups.
// Unlike the Java generator, which draws from an unseeded random source,
// each event here is a pure function of the seed and its event id, so the
// same configuration always yields the same stream.
//
// # Encoding
//
// An event is one byte of EventType, then the fields of that type in
// declaration order: int64 fields as 8 bytes little-endian, string fields as
// a 4-byte little-endian length and the bytes. Decode returns byte slices
// that alias its input.
package nexmark
